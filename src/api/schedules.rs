//! Schedules for the operator: `GET /api/v1/schedules` lists them (newest first; `chat_id`,
//! `status` and `limit` filter), `DELETE /api/v1/schedules/{id}` cancels one and tells its
//! chat object to re-read its next run.

use super::{bad_request, limit, not_found, query, query_i64};
use crate::config::{now_ms, Ctx};
use crate::outbound::objects::{self, ChatRequest};
use crate::storage::schedules;
use serde_json::json;
use worker::{Response, Result, Url};

const STATUSES: [&str; 4] = ["active", "done", "cancelled", "missed"];

pub async fn list(ctx: &Ctx, url: &Url) -> Result<Response> {
    let status = query(url, "status");
    if status.as_deref().is_some_and(|s| !STATUSES.contains(&s)) {
        return bad_request("status must be active, done, cancelled or missed");
    }
    let rows = schedules::admin_list(&ctx.db(), query_i64(url, "chat_id"), status.as_deref(), limit(url, 100)).await?;
    Response::from_json(&json!({ "schedules": rows }))
}

pub async fn cancel(ctx: &Ctx, id: &str) -> Result<Response> {
    let Ok(id) = id.parse::<i64>() else { return bad_request("the schedule id is a number") };
    let Some(conv) = schedules::admin_cancel(&ctx.db(), id, now_ms()).await? else { return not_found() };
    // The object would find nothing due anyway; this keeps its alarm from waking for nothing.
    if let Err(e) = objects::notify(ctx, &conv, &ChatRequest::Schedules).await {
        worker::console_warn!("schedule #{id} cancelled; its chat object was not told ({e})");
    }
    Response::from_json(&json!({ "id": id, "status": "cancelled" }))
}
