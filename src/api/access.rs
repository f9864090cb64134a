//! Who may talk to the bot: pairings waiting for approval, approving one, and setting a
//! user's access level (`allowed`, `blocked`, or cleared).

use super::{bad_request, not_found};
use crate::bot::access;
use crate::config::{now_ms, Ctx};
use crate::storage;
use agent_core::access::policy::UserAccess;
use serde_json::{json, Value};
use worker::{Response, Result};

pub async fn pairings(ctx: &Ctx) -> Result<Response> {
    let rows = storage::access::open_pairings(&ctx.db(), now_ms()).await?;
    Response::from_json(&json!({"pairings": rows}))
}

pub async fn approve(ctx: &Ctx, code: &str) -> Result<Response> {
    match access::approve(ctx, code, "admin-api").await? {
        Some(a) => Response::from_json(&json!({"approved": true, "user_id": a.user_id})),
        None => not_found(),
    }
}

pub async fn set_user(ctx: &Ctx, id: &str, body: &Value) -> Result<Response> {
    let Ok(user_id) = id.parse::<i64>() else { return bad_request("user id must be a number") };
    let value = body.get("access").and_then(Value::as_str);
    let level = value.map(UserAccess::parse);
    if matches!(level, Some(None)) {
        return bad_request("access must be \"allowed\", \"blocked\" or null");
    }
    access::set_access(ctx, user_id, level.flatten(), "admin api").await?;
    Response::from_json(&json!({"user_id": user_id, "access": value}))
}

/// Ends every operator session of the Mini App: init data signed up to now no longer opens the
/// operator's view (401), whatever its age; operators open the page from Telegram again.
pub async fn end_operator_sessions(ctx: &Ctx) -> Result<Response> {
    let now = now_ms() / 1000;
    storage::miniapp::end_operator_sessions(&ctx.db(), now).await?;
    Response::from_json(&json!({"ended": true, "not_before": now}))
}
