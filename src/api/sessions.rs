//! Sessions: the conversations on record (paged by key), a conversation's messages (paged
//! by seq), and a reset (the next turn starts a new session after the newest message).
//!
//! Invariants (INVARIANTS.md): "The conversation key is a type": a key from the path is
//! parsed once into `ConvKey`; one that does not parse is a 400.

use super::{bad_request, limit, query, query_i64};
use crate::config::{now_ms, Ctx};
use crate::storage::conversations::{self, NewSession};
use crate::storage::overview;
use agent_core::conversation::ConvKey;
use serde_json::json;
use worker::{Response, Result, Url};

pub async fn list(ctx: &Ctx, url: &Url) -> Result<Response> {
    let limit = limit(url, 50);
    // Cursor: the last conv of the previous page (pages go by conversation key).
    let after = query(url, "cursor").unwrap_or_default();
    let rows = overview::sessions(&ctx.db(), &after, limit).await?;
    let next = (rows.len() as i64 == limit).then(|| rows.last().and_then(|r| r.get("conv").cloned())).flatten();
    Response::from_json(&json!({"sessions": rows, "next_cursor": next}))
}

pub async fn messages(ctx: &Ctx, conv: &str, url: &Url) -> Result<Response> {
    let Some(key) = ConvKey::parse(conv) else { return bad_request("bad conversation key") };
    let limit = limit(url, 100);
    let before = query_i64(url, "before").unwrap_or(i64::MAX);
    let (mut rows, next) = overview::messages(&ctx.db(), &key.to_string(), before, limit).await?;
    rows.reverse();
    Response::from_json(&json!({"conv": key.to_string(), "messages": rows, "next_before": next}))
}

pub async fn reset(ctx: &Ctx, conv: &str) -> Result<Response> {
    let Some(key) = ConvKey::parse(conv) else { return bad_request("bad conversation key") };
    conversations::start_new_session(&ctx.db(), &key, NewSession::AfterNewest, now_ms()).await?;
    Response::from_json(&json!({"conv": key.to_string(), "reset": true}))
}
