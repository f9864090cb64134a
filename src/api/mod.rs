//! The admin API under `/api/v1/` (bearer `ADMIN_TOKEN`, compared in constant time). Without
//! the token: 401 and nothing else; repeated failures from one source: 429. Documented in
//! `docs/openapi.yaml`. Invariants (INVARIANTS.md): "Secrets are secrets", "API
//! conversations are never Telegram chats".
//!
//! status, sessions (paged), a session's messages (paged), session reset, costs, memories,
//! media descriptions, schedules, pairings, users' access, a chat's model, notify (send as the bot), chat
//! (synchronous: text in, the bot's reply out), and when a chat's object next wakes.

mod access;
mod activity;
mod chats;
mod costs;
mod media;
mod memories;
pub mod miniapp;
mod schedules;
mod sessions;
mod status;

use crate::config::auth::refuse;
use crate::config::Ctx;
use serde_json::{json, Value};
use worker::{Method, Request, Response, Result, Url};

pub(crate) fn bad_request(msg: &str) -> Result<Response> {
    Ok(Response::from_json(&json!({"error": msg}))?.with_status(400))
}

pub(crate) fn not_found() -> Result<Response> {
    Ok(Response::from_json(&json!({"error": "not found"}))?.with_status(404))
}

pub(crate) fn query(url: &Url, name: &str) -> Option<String> {
    url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.to_string())
}

/// A number from the query string (`None` when absent or not a number).
pub(crate) fn query_i64(url: &Url, name: &str) -> Option<i64> {
    query(url, name).and_then(|v| v.parse().ok())
}

pub(crate) fn limit(url: &Url, default: i64) -> i64 {
    query_i64(url, "limit").unwrap_or(default).clamp(1, 500)
}

pub async fn handle(mut req: Request, ctx: &Ctx) -> Result<Response> {
    let header = req.headers().get("authorization").ok().flatten().unwrap_or_default();
    let presented = header.strip_prefix("Bearer ").unwrap_or("").to_string();
    if let Some(refused) = refuse(&req, &ctx.secrets.admin_token, "ADMIN_TOKEN", "the admin API", &presented)? {
        return Ok(refused);
    }
    let url = req.url()?;
    let path = url.path().trim_start_matches("/api/v1/").to_string();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let body: Value = if req.method() == Method::Post || req.method() == Method::Put {
        req.json().await.unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    dispatch(ctx, req.method(), &segments, &url, &body).await
}

/// An authorised operator's request: the admin token's, or (the Mini App) an `ADMIN_USER_IDS`
/// person's signed init data. One routing table, so both see and change the same things.
pub(crate) async fn dispatch(ctx: &Ctx, method: Method, segments: &[&str], url: &Url, body: &Value) -> Result<Response> {
    match (method, segments) {
        (Method::Get, ["status"]) => status::get(ctx).await,
        (Method::Get, ["sessions"]) => sessions::list(ctx, &url).await,
        (Method::Get, ["sessions", conv, "messages"]) => sessions::messages(ctx, conv, &url).await,
        (Method::Post, ["sessions", conv, "reset"]) => sessions::reset(ctx, conv).await,
        (Method::Get, ["costs"]) => costs::get(ctx, &url).await,
        (Method::Get, ["activity"]) => activity::get(ctx, &url).await,
        (Method::Get, ["memories"]) => memories::list(ctx, &url).await,
        (Method::Delete, ["memories"]) => memories::forget_user(ctx, &url).await,
        (Method::Delete, ["memories", id]) => memories::forget_one(ctx, id).await,
        (Method::Post, ["notes"]) => memories::add_note(ctx, &body).await,
        (Method::Get, ["media"]) => media::list(ctx, &url).await,
        (Method::Put, ["media", id]) => media::set(ctx, id, &body).await,
        (Method::Get, ["schedules"]) => schedules::list(ctx, &url).await,
        (Method::Delete, ["schedules", id]) => schedules::cancel(ctx, id).await,
        (Method::Get, ["pairings"]) => access::pairings(ctx).await,
        (Method::Post, ["pairings", code, "approve"]) => access::approve(ctx, code).await,
        (Method::Put, ["users", id, "access"]) => access::set_user(ctx, id, &body).await,
        (Method::Post, ["miniapp", "end-operator-sessions"]) => access::end_operator_sessions(ctx).await,
        (Method::Put, ["chats", id, "model"]) => chats::set_model(ctx, id, &body).await,
        (Method::Put, ["chats", id, "crew"]) => chats::set_crew(ctx, id, &body).await,
        (Method::Post, ["notify"]) => chats::notify(ctx, &body).await,
        (Method::Post, ["chat"]) => chats::chat(ctx, &body).await,
        (Method::Get, ["chats", conv, "wake"]) => chats::wake(ctx, conv).await,
        _ => not_found(),
    }
}
