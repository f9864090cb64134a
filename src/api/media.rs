//! Media descriptions for the operator: `GET /api/v1/media` lists them, `PUT
//! /api/v1/media/{file_unique_id}` sets a curated one (it wins over a generated one).
//!
//! Invariant: a description is text from outside: capped like the model's (600 characters,
//! a transcript 4,000), never the file.

use super::{bad_request, limit};
use crate::config::{now_ms, Ctx};
use crate::storage::media;
use serde_json::{json, Value};
use worker::{Response, Result, Url};

pub async fn list(ctx: &Ctx, url: &Url) -> Result<Response> {
    let rows = media::list(&ctx.db(), limit(url, 100)).await?;
    Response::from_json(&json!({ "media": rows }))
}

pub async fn set(ctx: &Ctx, unique_id: &str, body: &Value) -> Result<Response> {
    let text = |name: &str, cap: usize| body.get(name).and_then(Value::as_str).map(|t| t.trim().chars().take(cap).collect::<String>()).filter(|t| !t.is_empty());
    let Some(description) = text("description", 600) else { return bad_request("description is required") };
    if unique_id.is_empty() || unique_id.len() > 128 {
        return bad_request("file_unique_id is required");
    }
    let kind = text("kind", 32).unwrap_or_else(|| "media".into());
    let transcript = text("transcript", 4000);
    media::set_curated(&ctx.db(), unique_id, &kind, &description, transcript.as_deref(), now_ms()).await?;
    Response::from_json(&json!({ "file_unique_id": unique_id, "description": description, "curated": true }))
}
