//! Memories and notes for the operator: everything remembered (narrowed by chat and person,
//! `Scope::Operator`), erasing all about a person or one item, and adding an operator note.

use super::{bad_request, not_found, query_i64};
use crate::config::{now_ms, Ctx};
use crate::storage::memory::{self as rows, ItemId};
use crate::storage::notes;
use agent_core::memory::scope::Scope;
use serde_json::{json, Value};
use worker::{Response, Result, Url};

/// Everything remembered, narrowed by `user_id` and/or `chat_id` (`Scope::Operator`).
pub async fn list(ctx: &Ctx, url: &Url) -> Result<Response> {
    let scope = Scope::Operator { chat_id: query_i64(url, "chat_id"), about_user_id: query_i64(url, "user_id") };
    let found = rows::operator_list(&ctx.db(), &scope).await?;
    Response::from_json(&json!({"memories": found}))
}

pub async fn forget_user(ctx: &Ctx, url: &Url) -> Result<Response> {
    let Some(user) = query_i64(url, "user_id") else {
        return bad_request("user_id is required");
    };
    let scope = Scope::Operator { chat_id: None, about_user_id: Some(user) };
    let n = rows::erase(&ctx.db(), &scope, None).await?;
    Response::from_json(&json!({"user_id": user, "deleted": n}))
}

pub async fn forget_one(ctx: &Ctx, id: &str) -> Result<Response> {
    let item = match (id.chars().next(), id.get(1..).and_then(|n| n.parse::<i64>().ok())) {
        (Some('n'), Some(n)) => ItemId::Note(n),
        (Some('m'), Some(n)) => ItemId::Memory(n),
        _ => return bad_request("memory ids look like n12 (notes) or m7 (memories)"),
    };
    if !rows::erase_one(&ctx.db(), item, None).await? {
        return not_found();
    }
    Response::from_json(&json!({"deleted": id}))
}

pub async fn add_note(ctx: &Ctx, body: &Value) -> Result<Response> {
    let Some(content) = body.get("content").and_then(Value::as_str).map(str::trim).filter(|c| !c.is_empty()) else {
        return bad_request("content is required");
    };
    let chat_id = body.get("chat_id").and_then(Value::as_i64);
    let about = body.get("about_user_id").and_then(Value::as_i64);
    let id = notes::insert_operator_note(&ctx.db(), chat_id, about, content, now_ms()).await?;
    Response::from_json(&json!({"note": id}))
}
