//! `GET /api/v1/status`: version, settings that matter, counts and recent failures.

use crate::config::{now_ms, Ctx};
use crate::storage::overview;
use serde_json::json;
use worker::{Response, Result};

pub async fn get(ctx: &Ctx) -> Result<Response> {
    let (counts, failures) = overview::status(&ctx.db(), now_ms()).await?;
    Response::from_json(&json!({
        "version": env!("CARGO_PKG_VERSION"),
        "model": ctx.cfg.gemini_model,
        "history_format": ctx.cfg.history_format.as_str(),
        "dm_policy": ctx.cfg.dm_policy.as_str(),
        "counts": counts,
        "recent_failures": failures,
    }))
}
