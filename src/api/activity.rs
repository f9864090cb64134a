//! `GET /api/v1/activity?days=N` (1 to 90, default 30): per UTC day, turns (answered, failed,
//! scheduled runs fired), messages received and sent, failures and dead letters; and the Free
//! plan's headroom on the busiest day, an estimate (`agent_core::usage::free_plan_estimate`:
//! the bot's own counts times the benchmark's per-message figures), labelled as one.

use super::query_i64;
use crate::config::{now_ms, Ctx};
use crate::storage::activity;
use agent_core::usage::{free_plan_estimate, FREE_PLAN_DAILY};
use serde_json::json;
use worker::{Response, Result, Url};

pub async fn get(ctx: &Ctx, url: &Url) -> Result<Response> {
    let days = query_i64(url, "days").unwrap_or(30).clamp(1, 90);
    let now = now_ms();
    let since = now - now.rem_euclid(86_400_000) - (days - 1) * 86_400_000;
    let (turns, messages, failures) = activity::per_day(&ctx.db(), since).await?;
    let count = |v: &serde_json::Value, k: &str| v.get(k).and_then(serde_json::Value::as_i64).unwrap_or(0).max(0) as u64;
    let busiest = messages
        .iter()
        .map(|m| {
            let t = turns.iter().find(|t| t.get("day") == m.get("day")).map_or(0, |t| count(t, "turns"));
            (count(m, "received"), t)
        })
        .max_by_key(|(u, t)| u + t)
        .unwrap_or((0, 0));
    let estimate = free_plan_estimate(busiest.0, busiest.1);
    Response::from_json(&json!({
        "days": days,
        "since": since,
        "turns": turns,
        "messages": messages,
        "failures": failures,
        "free_plan": {
            "estimate": true,
            "note": "an estimate: the busiest day's updates and turns times the per-message figures npm run bench measured; not Cloudflare's analytics",
            "busiest_day_use": estimate,
            "daily_limits": FREE_PLAN_DAILY,
        },
    }))
}
