//! Chats: a chat's model, sending as the bot (`notify`, idempotent with a caller's key), the
//! synchronous API chat (text in, the bot's reply out) and a chat object's state.
//!
//! Invariants (INVARIANTS.md): "API conversations are never Telegram chats"
//! (`agent_core::access::policy::is_api_chat_id`).

use super::{bad_request, not_found};
use crate::bot::deliver;
use crate::config::{now_ms, Ctx};
use crate::outbound::objects::{self, ChatRequest};
use crate::storage;
use agent_core::conversation::ConvKey;
use agent_core::access::policy::{is_api_chat_id, API_CHAT_ID_MAX, API_CHAT_ID_MIN};
use serde_json::{json, Value};
use worker::{Response, Result};

pub async fn set_model(ctx: &Ctx, id: &str, body: &Value) -> Result<Response> {
    let Ok(chat_id) = id.parse::<i64>() else { return bad_request("chat id must be a number") };
    let model = body.get("model").and_then(Value::as_str).map(str::trim).filter(|m| !m.is_empty());
    if !storage::chats::set_model(&ctx.db(), chat_id, model).await? {
        return not_found();
    }
    Response::from_json(&json!({"chat_id": chat_id, "model": model}))
}

/// `PUT /chats/{id}/crew` `{"enabled": bool}` (or `null`: follow `CREW_CHATS`): whether the
/// crew speaks in the chat, kept by its chat object.
pub async fn set_crew(ctx: &Ctx, id: &str, body: &Value) -> Result<Response> {
    let Some(key) = ConvKey::parse(id) else { return bad_request("bad conversation key") };
    let enabled = match body.get("enabled") {
        Some(Value::Bool(b)) => Some(*b),
        Some(Value::Null) => None,
        _ => return bad_request("enabled must be true, false or null"),
    };
    if ctx.cfg.crew.is_empty() {
        return bad_request("no crew is configured (CREW)");
    }
    objects::call_ok(ctx, &key, &ChatRequest::Crew { enabled }).await?;
    Response::from_json(&json!({"chat_id": key.chat_id, "thread_id": key.thread_id, "enabled": enabled}))
}


/// When the chat's object next wakes (its alarm), or `null`: a reminder, a debounced burst, a
/// retry's deadline.
pub async fn wake(ctx: &Ctx, conv: &str) -> Result<Response> {
    let Some(key) = ConvKey::parse(conv) else { return bad_request("bad conversation key") };
    objects::call(ctx, &key, &ChatRequest::Wake).await
}

pub async fn notify(ctx: &Ctx, body: &Value) -> Result<Response> {
    let (Some(chat_id), Some(text)) = (body.get("chat_id").and_then(Value::as_i64), body.get("text").and_then(Value::as_str)) else {
        return bad_request("chat_id and text are required");
    };
    if text.trim().is_empty() {
        return bad_request("text is empty");
    }
    let conv = ConvKey { chat_id, thread_id: body.get("thread_id").and_then(Value::as_i64) };
    // A caller-chosen key makes retries of the same notification idempotent.
    let key = match body.get("idempotency_key").and_then(Value::as_str) {
        Some(k) => format!("notify:{k}"),
        None => format!("notify:{}:{}", now_ms(), hex(&crate::config::random_bytes::<6>())),
    };
    match deliver::send_text(ctx, &conv, &key, text, None, None).await {
        Ok(ids) => Response::from_json(&json!({"sent": true, "message_ids": ids})),
        Err(e) => Ok(Response::from_json(&json!({"sent": false, "error": e.message()}))?.with_status(502)),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `POST /api/v1/chat`: text in, the bot's reply out, synchronously. The conversation is an
/// API conversation: `chat_id` must lie in the API range (2^52 to 2^53 - 1), above every
/// Telegram chat id, else 400; nothing is sent to Telegram, the reply is returned and stored
/// as the bot's message.
pub async fn chat(ctx: &Ctx, body: &Value) -> Result<Response> {
    let (Some(chat_id), Some(text)) = (body.get("chat_id").and_then(Value::as_i64), body.get("text").and_then(Value::as_str)) else {
        return bad_request("chat_id and text are required");
    };
    if !is_api_chat_id(chat_id) {
        return bad_request(&format!(
            "chat_id must be an API conversation id, from {API_CHAT_ID_MIN} to {API_CHAT_ID_MAX} (Telegram chat ids are refused)"
        ));
    }
    if text.trim().is_empty() {
        return bad_request("text is empty");
    }
    let name = body.get("name").and_then(Value::as_str).unwrap_or("api").to_string();
    let resp = objects::call(ctx, &ConvKey::chat(chat_id), &ChatRequest::Chat { text: text.to_string(), name }).await?;
    let status = resp.status_code();
    let mut resp = resp;
    let value: Value = resp.json().await.unwrap_or(Value::Null);
    Ok(Response::from_json(&value)?.with_status(status))
}
