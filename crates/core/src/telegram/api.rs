//! Outbound Bot API calls: method bodies, the response envelope, and [`TelegramError`], whose
//! variants drive what the delivery code does next (fall back to plain text, drop the reply,
//! wait `retry_after`, stop sending to a chat, retry with backoff).
//!
//! Invariants (INVARIANTS.md): "Secrets never print" (nothing here holds the bot token;
//! errors carry only Telegram's `description`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Telegram's emoji allowed in `ReactionTypeEmoji` (Bot API 10.1), without variation selectors.
pub const REACTION_EMOJI: [&str; 73] = [
    "❤", "👍", "👎", "🔥", "🥰", "👏", "😁", "🤔", "🤯", "😱", "🤬", "😢", "🎉", "🤩", "🤮", "💩",
    "🙏", "👌", "🕊", "🤡", "🥱", "🥴", "😍", "🐳", "❤\u{200d}🔥", "🌚", "🌭", "💯", "🤣", "⚡",
    "🍌", "🏆", "💔", "🤨", "😐", "🍓", "🍾", "💋", "🖕", "😈", "😴", "😭", "🤓", "👻",
    "👨\u{200d}💻", "👀", "🎃", "🙈", "😇", "😨", "🤝", "✍", "🤗", "🫡", "🎅", "🎄", "☃", "💅",
    "🤪", "🗿", "🆒", "💘", "🙉", "🦄", "😘", "💊", "🙊", "😎", "👾", "🤷\u{200d}♂", "🤷",
    "🤷\u{200d}♀", "😡",
];

/// Normalises an emoji the model wrote to one Telegram accepts (drops U+FE0F), if allowed.
pub fn allowed_reaction(emoji: &str) -> Option<&'static str> {
    let cleaned: String = emoji.trim().chars().filter(|c| *c != '\u{fe0f}').collect();
    REACTION_EMOJI.iter().copied().find(|e| *e == cleaned)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplyParameters {
    pub message_id: i64,
    /// Send anyway when the target is gone (same chat only).
    pub allow_sending_without_reply: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkPreviewOptions {
    pub is_disabled: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendMessage {
    pub chat_id: i64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub message_thread_id: Option<i64>,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub parse_mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reply_parameters: Option<ReplyParameters>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub link_preview_options: Option<LinkPreviewOptions>,
}

impl SendMessage {
    /// A message of `text` to `chat_id`, nothing else set.
    pub fn text(chat_id: i64, text: String) -> SendMessage {
        SendMessage {
            chat_id,
            message_thread_id: None,
            text,
            parse_mode: None,
            reply_parameters: None,
            link_preview_options: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReactionTypeEmoji {
    #[serde(rename = "type")]
    pub kind: String,
    pub emoji: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetMessageReaction {
    pub chat_id: i64,
    pub message_id: i64,
    pub reaction: Vec<ReactionTypeEmoji>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendSticker {
    pub chat_id: i64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub message_thread_id: Option<i64>,
    pub sticker: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reply_parameters: Option<ReplyParameters>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendChatAction {
    pub chat_id: i64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub message_thread_id: Option<i64>,
    pub action: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BotCommand {
    pub command: String,
    pub description: String,
    /// Bot API 10.2: sent in a group, the command is seen only by its sender and the bot, and
    /// the bot may answer it with an ephemeral message.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_ephemeral: bool,
}

/// The Bot API 10.3 `ephemeral_message_parameters` of a message only `receiver_user_id` sees.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EphemeralMessageParameters {
    pub receiver_user_id: i64,
}

/// How long after an ephemeral message the bot may answer it (when it is not an admin).
pub const EPHEMERAL_WINDOW_MS: i64 = 15_000;

/// Whether an ephemeral command sent at `date_s` (Telegram's seconds) can still be answered
/// ephemerally at `now_ms`, with a margin of two seconds for the answer's own way (Telegram
/// stamps whole seconds).
pub fn ephemeral_in_window(date_s: i64, now_ms: i64) -> bool {
    now_ms - date_s.saturating_mul(1000) <= EPHEMERAL_WINDOW_MS - 2_000
}

/// The part of a sent `Message` the bot keeps.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SentMessage {
    pub message_id: i64,
}

/// Bot API 10.1 `InputRichMessage`, in its HTML form (the bot renders its own rich HTML:
/// `core::format::rich`). `skip_entity_detection`: the model's bare URLs, mentions and
/// commands stay text (no link appears that the model did not write as one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputRichMessage {
    pub html: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_entity_detection: bool,
}

/// `sendRichMessage` (Bot API 10.1). It has no `link_preview_options` and no fallback text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendRichMessage {
    pub chat_id: i64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub message_thread_id: Option<i64>,
    pub rich_message: InputRichMessage,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reply_parameters: Option<ReplyParameters>,
}

impl TelegramError {
    /// Whether Telegram refused a rich message itself (its method or its payload), so the same
    /// answer goes as an ordinary HTML message instead: the method is missing (404 "method not
    /// found", or a 404 without a JSON body), or a 400 about the payload (over a limit, a tag
    /// it does not know; the reference documents no wording, so any 400 but a reply gone or a
    /// migrated chat). A 401 (wrong token), 403, 429, 5xx or network error is not: those are
    /// handled as for any message.
    pub fn refuses_rich(&self) -> bool {
        matches!(self, TelegramError::MethodNotFound(_) | TelegramError::Unauthorized(404) | TelegramError::BadRequest(_)
            | TelegramError::CantParseEntities(_) | TelegramError::TooLong)
    }

    /// Whether the refusal is of the rich methods themselves (not one payload): rich answers
    /// are then off for a while.
    pub fn rich_method_missing(&self) -> bool {
        matches!(self, TelegramError::MethodNotFound(_) | TelegramError::Unauthorized(404))
    }
}

/// `getMe`'s answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BotUser {
    pub id: i64,
    #[serde(default)]
    pub first_name: String,
    #[serde(default)]
    pub username: Option<String>,
    /// Topics in private chats are on for the bot (Bot API 9.3; returned only by getMe).
    #[serde(default)]
    pub has_topics_enabled: bool,
    /// Guest mode is on (set in BotFather; returned only in getMe, Bot API 10.0).
    #[serde(default)]
    pub supports_guest_queries: bool,
}

/// A sticker of `getStickerSet`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SetSticker {
    pub file_id: String,
    #[serde(default)]
    pub emoji: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StickerSet {
    pub name: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub stickers: Vec<SetSticker>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
struct ResponseParameters {
    retry_after: Option<u64>,
    migrate_to_chat_id: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
struct Envelope {
    ok: bool,
    result: Option<Value>,
    error_code: Option<u16>,
    description: Option<String>,
    parameters: Option<ResponseParameters>,
}

/// Why a Bot API call failed, classified for the caller's next move.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TelegramError {
    /// 429: wait this many seconds.
    #[error("rate limited; retry after {0}s")]
    RetryAfter(u64),
    /// 400 "can't parse entities": the HTML was refused; send as plain text.
    #[error("Telegram refused the formatting: {0}")]
    CantParseEntities(String),
    /// 400 "message to be replied not found": send without the reply.
    #[error("the message to reply to is gone")]
    ReplyNotFound,
    /// 400 "message is too long".
    #[error("message too long")]
    TooLong,
    /// 403: the bot was blocked, kicked or cannot write here. Stop sending to this chat.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// 400 group upgraded to a supergroup.
    #[error("chat migrated to {0}")]
    Migrated(i64),
    /// Any other 400: the same request will fail again.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// 401 or 404: the bot token or the API base is wrong.
    #[error("unauthorized or wrong API base (HTTP {0})")]
    Unauthorized(u16),
    /// 404 "method not found": the token and base are right (Telegram answered in JSON) but this
    /// Bot API server has no such method (an older server, a local Bot API server not updated).
    /// Not a wrong token: the caller falls back to an older method.
    #[error("method not found: {0}")]
    MethodNotFound(String),
    /// 5xx and anything unexpected from the server: worth retrying.
    #[error("server error {0}: {1}")]
    Server(u16, String),
    /// The request never got an answer.
    #[error("network error: {0}")]
    Network(String),
}

impl TelegramError {
    /// Whether the same call may succeed later.
    pub fn is_transient(&self) -> bool {
        matches!(self, TelegramError::RetryAfter(_) | TelegramError::Server(..) | TelegramError::Network(_))
    }

    /// What delivery does about this error (one classification for every Bot API call).
    pub fn delivery(&self) -> Delivery {
        if self.is_transient() {
            Delivery::Retry { after_ms: self.retry_after_ms() }
        } else {
            Delivery::Fatal { blocked: matches!(self, TelegramError::Forbidden(_)) }
        }
    }

    /// The server-requested wait, in milliseconds.
    pub fn retry_after_ms(&self) -> Option<u64> {
        match self {
            TelegramError::RetryAfter(s) => Some(s.saturating_mul(1000)),
            _ => None,
        }
    }
}

/// `getFile`'s answer: where to download a file from (valid for an hour), and its size.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TgFile {
    pub file_id: String,
    #[serde(default)]
    pub file_size: Option<u64>,
    #[serde(default)]
    pub file_path: Option<String>,
}

/// What to do about a failed Bot API call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// It may pass later: retry, no sooner than `after_ms` when Telegram said so.
    Retry { after_ms: Option<u64> },
    /// It will not pass. `blocked`: the bot may not write to this chat (403).
    Fatal { blocked: bool },
}

/// Interprets an HTTP status and body from the Bot API. Returns the `result` on success.
pub fn parse_response(status: u16, body: &str) -> Result<Value, TelegramError> {
    let env: Envelope = match serde_json::from_str(body) {
        Ok(env) => env,
        Err(_) => {
            return Err(match status {
                401 | 404 => TelegramError::Unauthorized(status),
                s if s >= 500 || s == 429 => TelegramError::Server(s, "unreadable body".into()),
                s => TelegramError::Server(s, format!("unexpected body ({} bytes)", body.len())),
            })
        }
    };
    if env.ok {
        return Ok(env.result.unwrap_or(Value::Null));
    }
    let code = env.error_code.unwrap_or(status);
    let desc = env.description.unwrap_or_default();
    let params = env.parameters;
    let lower = desc.to_ascii_lowercase();
    Err(match code {
        429 => TelegramError::RetryAfter(params.and_then(|p| p.retry_after).unwrap_or(5)),
        404 if lower.contains("method not found") => TelegramError::MethodNotFound(desc),
        401 | 404 => TelegramError::Unauthorized(code),
        403 => TelegramError::Forbidden(desc),
        400 if lower.contains("can't parse entities") => TelegramError::CantParseEntities(desc),
        400 if lower.contains("message to be replied not found")
            || lower.contains("replied message not found") =>
        {
            TelegramError::ReplyNotFound
        }
        400 if lower.contains("message is too long") => TelegramError::TooLong,
        400 if params.as_ref().and_then(|p| p.migrate_to_chat_id).is_some() => {
            TelegramError::Migrated(params.and_then(|p| p.migrate_to_chat_id).unwrap_or_default())
        }
        c if (400..500).contains(&c) => TelegramError::BadRequest(desc),
        c => TelegramError::Server(c, desc),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_real_error_bodies() {
        let e = |s, b| parse_response(s, b).unwrap_err();
        assert_eq!(
            e(429, r#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 7","parameters":{"retry_after":7}}"#),
            TelegramError::RetryAfter(7)
        );
        assert!(matches!(
            e(400, r#"{"ok":false,"error_code":400,"description":"Bad Request: can't parse entities: Unsupported start tag \"foo\" at byte offset 0"}"#),
            TelegramError::CantParseEntities(_)
        ));
        assert_eq!(
            e(400, r#"{"ok":false,"error_code":400,"description":"Bad Request: message to be replied not found"}"#),
            TelegramError::ReplyNotFound
        );
        assert!(matches!(
            e(403, r#"{"ok":false,"error_code":403,"description":"Forbidden: bot was blocked by the user"}"#),
            TelegramError::Forbidden(_)
        ));
        assert_eq!(
            e(400, r#"{"ok":false,"error_code":400,"description":"Bad Request: group chat was upgraded to a supergroup chat","parameters":{"migrate_to_chat_id":-100123}}"#),
            TelegramError::Migrated(-100123)
        );
        assert_eq!(e(401, r#"{"ok":false,"error_code":401,"description":"Unauthorized"}"#), TelegramError::Unauthorized(401));
        assert!(e(502, "<html>Bad Gateway</html>").is_transient());
        assert!(!e(400, r#"{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}"#).is_transient());
    }

    #[test]
    fn a_missing_method_is_not_a_wrong_token() {
        let e = |s, b| parse_response(s, b).unwrap_err();
        let missing = e(404, r#"{"ok":false,"error_code":404,"description":"Not Found: method not found"}"#);
        assert!(matches!(missing, TelegramError::MethodNotFound(_)));
        assert!(missing.refuses_rich() && missing.rich_method_missing());
        assert_eq!(e(404, r#"{"ok":false,"error_code":404,"description":"Not Found"}"#), TelegramError::Unauthorized(404));
        let payload = e(400, r#"{"ok":false,"error_code":400,"description":"Bad Request: RICH_MESSAGE_TOO_LONG"}"#);
        assert!(payload.refuses_rich() && !payload.rich_method_missing());
        assert!(!TelegramError::Unauthorized(401).refuses_rich());
        assert!(!TelegramError::RetryAfter(3).refuses_rich());
        assert!(!TelegramError::ReplyNotFound.refuses_rich());
        assert!(!TelegramError::Forbidden("blocked".into()).refuses_rich());
    }

    #[test]
    fn an_ephemeral_command_is_answered_privately_only_within_the_window() {
        let sent = 1_000_000; // seconds
        assert!(ephemeral_in_window(sent, sent * 1000 + 5_000));
        assert!(ephemeral_in_window(sent, sent * 1000 + 13_000));
        assert!(!ephemeral_in_window(sent, sent * 1000 + 13_001), "two seconds kept for the answer's way");
        assert!(!ephemeral_in_window(sent, sent * 1000 + 60_000));
    }

    #[test]
    fn errors_classify_for_delivery() {
        let e = |s, b| parse_response(s, b).unwrap_err();
        assert_eq!(e(429, r#"{"ok":false,"error_code":429,"description":"Too Many Requests","parameters":{"retry_after":3}}"#).delivery(), Delivery::Retry { after_ms: Some(3000) });
        assert_eq!(e(502, "<html>Bad Gateway</html>").delivery(), Delivery::Retry { after_ms: None });
        assert_eq!(TelegramError::Network("reset".into()).delivery(), Delivery::Retry { after_ms: None });
        assert_eq!(e(403, r#"{"ok":false,"error_code":403,"description":"Forbidden: bot was blocked by the user"}"#).delivery(), Delivery::Fatal { blocked: true });
        assert_eq!(e(400, r#"{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}"#).delivery(), Delivery::Fatal { blocked: false });
    }

    #[test]
    fn returns_the_result_on_success() {
        let v = parse_response(200, r#"{"ok":true,"result":{"message_id":42}}"#).unwrap();
        let m: SentMessage = serde_json::from_value(v).unwrap();
        assert_eq!(m.message_id, 42);
    }

    #[test]
    fn reaction_emoji_are_normalised() {
        assert_eq!(allowed_reaction("❤️"), Some("❤"));
        assert_eq!(allowed_reaction(" 👍 "), Some("👍"));
        assert_eq!(allowed_reaction("🦀"), None);
        assert_eq!(REACTION_EMOJI.len(), 73);
    }
}
