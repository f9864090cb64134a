//! The Telegram Bot API client: `POST {TELEGRAM_API_BASE}/bot{TOKEN}/{method}` with a JSON
//! body, answers classified by `agent_core::telegram::api::parse_response`.
//!
//! Invariants (INVARIANTS.md): "Secrets never print" (errors carry Telegram's description
//! or a redacted network error), "Telegram's `retry_after` holds for the chat" (drafts,
//! chunks, typing and the plan's own retries alike: the held call is answered here with the
//! same 429 and the time still to wait).
//!
//! Also: the hold is per bot (a crew persona's 429 does not hold the main bot) and in the
//! isolate's memory: the chat object's, where every answer and plan step is sent, so a restart
//! forgets it (the next 429 sets it again) and the worker's own isolate (command replies,
//! notices) keeps its own.

use std::future::Future;
use std::pin::Pin;
use crate::config::{Ctx, Meter};
use super::net;
use agent_core::secret::Secret;
use agent_core::telegram::api::{self, BotUser, SentMessage, TelegramError};
use serde::Serialize;
use serde_json::Value;
use std::cell::RefCell;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(20);
/// Files are up to 20 MB.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone)]
pub struct TelegramClient {
    base: String,
    token: Secret,
    meter: Meter,
}

thread_local! {
    /// getMe, once per isolate.
    static BOT_USER: RefCell<Option<BotUser>> = const { RefCell::new(None) };
    /// (bot, chat) pairs Telegram answered 429 for, and until when (ms) nothing goes from that
    /// bot to that chat. Per bot: Telegram limits each bot on its own, so a crew persona's 429
    /// does not hold the main bot.
    static HELD: RefCell<std::collections::HashMap<(i64, i64), i64>> = RefCell::new(Default::default());
}

/// The seconds (rounded up) `key` (bot, chat) is still held after a 429, if it is.
fn held_for(key: (i64, i64), now: i64) -> Option<u64> {
    let until = HELD.with(|h| h.borrow().get(&key).copied())?;
    if until <= now {
        HELD.with(|h| h.borrow_mut().remove(&key));
        return None;
    }
    Some(((until - now) as u64).div_ceil(1000))
}

/// Holds `key` (bot, chat) for `seconds` (Telegram's `retry_after`); a longer hold already set stays.
fn hold(key: (i64, i64), seconds: u64, now: i64) {
    let until = now.saturating_add((seconds.min(86_400) * 1000) as i64);
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        let at = h.entry(key).or_insert(until);
        *at = (*at).max(until);
    });
}

impl Ctx {
    /// The Bot API client, counting on this context's meter: the speaking persona's own bot
    /// in crew mode (`bot::crew::speaking_for`), else the main bot.
    pub fn telegram(&self) -> TelegramClient {
        let token = self.speaker_token.clone().unwrap_or_else(|| self.secrets.bot_token.clone());
        TelegramClient::new(&self.cfg.telegram_api_base, token, self.meter.clone())
    }
}

impl TelegramClient {
    pub fn new(base: &str, token: Secret, meter: Meter) -> Self {
        TelegramClient { base: base.trim_end_matches('/').to_string(), token, meter }
    }

    /// Calls a Bot API method.
    pub async fn call<B: Serialize>(&self, method: &str, body: &B) -> Result<Value, TelegramError> {
        let body = serde_json::to_value(body).map_err(|e| TelegramError::BadRequest(e.to_string()))?;
        self.call_value(method, body).await
    }

    /// [`TelegramClient::call`] with the body as JSON, boxed: a Bot API call is awaited in many
    /// places, and an `async fn`'s body is compiled into each caller (`storage::Db::batch`).
    fn call_value<'a>(&'a self, method: &'a str, body: Value) -> Pin<Box<dyn Future<Output = Result<Value, TelegramError>> + 'a>> {
        Box::pin(async move {
            if self.token.is_empty() {
                return Err(TelegramError::Unauthorized(401));
            }
            let url = format!("{}/bot{}/{}", self.base, self.token.expose(), method);
            // The bot's id is the token's public part (before the colon); the key never holds the secret.
            let bot = self.token.expose().split(':').next().and_then(|id| id.parse::<i64>().ok()).unwrap_or(0);
            let chat_id = body.get("chat_id").and_then(Value::as_i64).map(|c| (bot, c));
            if let Some(seconds) = chat_id.and_then(|c| held_for(c, crate::config::now_ms())) {
                return Err(TelegramError::RetryAfter(seconds));
            }
            let resp = net::post_json(&self.meter, &url, &[], body.to_string(), TIMEOUT)
                .await
                .map_err(TelegramError::Network)?;
            let result = api::parse_response(resp.status, &resp.body);
            if let (Err(TelegramError::RetryAfter(seconds)), Some(chat)) = (&result, chat_id) {
                hold(chat, *seconds, crate::config::now_ms());
            }
            result
        })
    }

    /// Sends a message and returns its id.
    pub async fn send_message(&self, body: &api::SendMessage) -> Result<i64, TelegramError> {
        self.message_call("sendMessage", body).await
    }

    /// Sends a rich message (`sendRichMessage`, Bot API 10.1) and returns its id.
    pub async fn send_rich_message(&self, body: &api::SendRichMessage) -> Result<i64, TelegramError> {
        self.message_call("sendRichMessage", body).await
    }

    pub async fn message_call<B: Serialize>(&self, method: &str, body: &B) -> Result<i64, TelegramError> {
        let v = self.call(method, body).await?;
        serde_json::from_value::<SentMessage>(v)
            .map(|m| m.message_id)
            .map_err(|e| TelegramError::Server(200, format!("unexpected result: {e}")))
    }

    /// The bot's own user, cached for the life of the isolate.
    pub async fn me(&self) -> Result<BotUser, TelegramError> {
        if let Some(u) = BOT_USER.with(|b| b.borrow().clone()) {
            return Ok(u);
        }
        let v = self.call("getMe", &serde_json::json!({})).await?;
        let user: BotUser =
            serde_json::from_value(v).map_err(|e| TelegramError::Server(200, format!("unexpected getMe: {e}")))?;
        BOT_USER.with(|b| *b.borrow_mut() = Some(user.clone()));
        Ok(user)
    }

    /// `getBusinessConnection`: a Telegram Business connection the bot has not heard of yet.
    pub async fn business_connection(&self, id: &str) -> Result<agent_core::telegram::BusinessConnection, TelegramError> {
        let v = self.call("getBusinessConnection", &serde_json::json!({ "business_connection_id": id })).await?;
        agent_core::telegram::BusinessConnection::from_json(v).map_err(|e| TelegramError::Server(200, format!("unexpected getBusinessConnection: {e}")))
    }

    /// `getFile`: where a file can be downloaded, and its size.
    pub async fn get_file(&self, file_id: &str) -> Result<api::TgFile, TelegramError> {
        let v = self.call("getFile", &serde_json::json!({ "file_id": file_id })).await?;
        serde_json::from_value(v).map_err(|e| TelegramError::Server(200, format!("unexpected getFile: {e}")))
    }

    /// Downloads a file (`GET {base}/file/bot{TOKEN}/{file_path}`), at most `max` bytes: the
    /// bytes and whether they were cut. The error never carries the URL.
    pub async fn download(&self, file_path: &str, max: usize) -> Result<(Vec<u8>, bool), String> {
        if self.token.is_empty() {
            return Err("no bot token".into());
        }
        let url = format!("{}/file/bot{}/{}", self.base, self.token.expose(), file_path.trim_start_matches('/'));
        match net::get_bytes(&self.meter, &url, max, DOWNLOAD_TIMEOUT).await? {
            (200, bytes, truncated) => Ok((bytes, truncated)),
            (status, ..) => Err(format!("the download answered {status}")),
        }
    }

    /// A chat action other than typing (`upload_photo` while a picture is made); a failure is
    /// only logged.
    pub async fn typing_as(&self, chat_id: i64, thread_id: Option<i64>, action: &str) {
        let body = api::SendChatAction { chat_id, message_thread_id: thread_id, action: action.into() };
        if let Err(e) = self.call("sendChatAction", &body).await {
            worker::console_warn!("{action} indicator for {chat_id} failed: {e}");
        }
    }

    pub async fn typing(&self, chat_id: i64, thread_id: Option<i64>) {
        let body = api::SendChatAction { chat_id, message_thread_id: thread_id, action: "typing".into() };
        if let Err(e) = self.call("sendChatAction", &body).await {
            worker::console_warn!("typing indicator for {chat_id} failed: {e}");
        }
    }
}

/// What `sendPhoto` answered: the message and its largest size's file ids.
pub struct SentPhoto {
    pub message_id: i64,
    pub file_id: Option<String>,
    pub file_unique_id: Option<String>,
    pub file_size: Option<u64>,
}

impl TelegramClient {
    /// `sendPhoto` with the picture uploaded as a file (`multipart/form-data`, built by
    /// `core::image::multipart`); `fields` are the method's other parameters as text. The hold
    /// after a 429 applies as for every call.
    pub async fn send_photo(&self, chat_id: i64, fields: &[(&str, String)], file: (&str, &[u8])) -> Result<SentPhoto, TelegramError> {
        if self.token.is_empty() {
            return Err(TelegramError::Unauthorized(401));
        }
        let bot = self.token.expose().split(':').next().and_then(|id| id.parse::<i64>().ok()).unwrap_or(0);
        if let Some(seconds) = held_for((bot, chat_id), crate::config::now_ms()) {
            return Err(TelegramError::RetryAfter(seconds));
        }
        let (mime, bytes) = file;
        let boundary = (0..4)
            .map(|_| format!("edge{:016x}", js_random()))
            .find(|b| agent_core::image::boundary_fits(b, fields, bytes))
            .ok_or_else(|| TelegramError::BadRequest("no multipart boundary fits".into()))?;
        let body = agent_core::image::multipart(&boundary, fields, ("photo", agent_core::image::file_name(mime), mime, bytes));
        let url = format!("{}/bot{}/sendPhoto", self.base, self.token.expose());
        let content_type = format!("multipart/form-data; boundary={boundary}");
        let resp = net::post_bytes(&self.meter, &url, &[("content-type", &content_type)], &body, net::MAX_RESPONSE_BYTES, DOWNLOAD_TIMEOUT)
            .await
            .map_err(TelegramError::Network)?;
        let result = api::parse_response(resp.status, &resp.body);
        if let Err(TelegramError::RetryAfter(seconds)) = &result {
            hold((bot, chat_id), *seconds, crate::config::now_ms());
        }
        let v = result?;
        let largest = v.get("photo").and_then(Value::as_array).and_then(|p| p.last()).cloned().unwrap_or(Value::Null);
        let text = |k: &str| largest.get(k).and_then(Value::as_str).map(str::to_string);
        Ok(SentPhoto {
            message_id: v.get("message_id").and_then(Value::as_i64).ok_or_else(|| TelegramError::Server(200, "unexpected sendPhoto result".into()))?,
            file_id: text("file_id"),
            file_unique_id: text("file_unique_id"),
            file_size: largest.get("file_size").and_then(Value::as_u64),
        })
    }
}

/// A random 64-bit number (a multipart boundary).
fn js_random() -> u64 {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        return (worker::js_sys::Math::random() * u64::MAX as f64) as u64 ^ crate::config::now_ms() as u64;
    }
    u64::from_le_bytes(b)
}
