//! `GET /api/v1/costs`: model usage per chat, day and model over a period, priced at each
//! day's price (`agent_core::usage::cost`), with the budgets and where a chat and a person stand, and (crew
//! mode) the costs per persona.

use super::{bad_request, query, query_i64};
use crate::bot::access;
use crate::config::{now_ms, Ctx};
use crate::storage;
use serde_json::{json, Value};
use worker::{Response, Result, Url};

pub async fn get(ctx: &Ctx, url: &Url) -> Result<Response> {
    let period = query(url, "period").unwrap_or_else(|| "all".into());
    let now = now_ms();
    let since = match period.as_str() {
        "today" => now - now.rem_euclid(86_400_000),
        "week" => now - 7 * 86_400_000,
        "all" => 0,
        _ => return bad_request("period must be today, week or all"),
    };
    let rows = storage::usage::totals(&ctx.db(), None, since, storage::usage::Grouping::Day).await?;
    let chat = query_i64(url, "chat_id");
    let user = query_i64(url, "user_id");
    let used = access::budget_usage(ctx, chat.unwrap_or(0), user).await?;
    let b = ctx.cfg.budgets;
    let budgets = json!({
        "user_turns_per_hour": b.user_turns_per_hour,
        "chat_tokens_per_day": b.chat_tokens_per_day,
        "global_tokens_per_day": b.global_tokens_per_day,
        "global_tokens_today": used.global_tokens_today,
        "chat_tokens_today": chat.map(|_| used.chat_tokens_today),
        "user_turns_last_hour": user.map(|_| used.user_turns_last_hour),
    });
    let mut total = 0.0;
    let items: Vec<Value> = rows
        .iter()
        .map(|r| {
            let cost = agent_core::usage::cost(&ctx.cfg, &r.usage, now);
            total += cost.unwrap_or(0.0);
            json!({
                "chat_id": r.chat_id,
                "day": r.usage.day,
                "model": r.usage.model,
                "calls": r.usage.calls,
                "prompt_tokens": r.usage.prompt_tokens,
                "output_tokens": r.usage.candidates_tokens,
                "thinking_tokens": r.usage.thoughts_tokens,
                "cached_tokens": r.usage.cached_tokens,
                "cached_share": agent_core::usage::cached_share(&r.usage),
                "search_queries": r.usage.search_queries,
                "image_tokens": r.usage.image_tokens,
                "cost_usd": cost,
            })
        })
        .collect();
    let all: Vec<_> = rows.iter().map(|r| r.usage.clone()).collect();
    let cached_share = agent_core::usage::total_cached_share(&all);
    let by_persona = by_persona(ctx, chat, since, now).await?;
    Response::from_json(&json!({"period": period, "since": since, "rows": items, "total_cost_usd": total, "cached_share": cached_share, "budgets": budgets, "by_persona": by_persona}))
}

/// Crew mode: calls, tokens and cost per persona (of `chat` when given), over the period.
async fn by_persona(ctx: &Ctx, chat: Option<i64>, since: i64, now: i64) -> Result<Value> {
    let mut out = serde_json::Map::new();
    let boundaries = agent_core::gemini::prices::boundaries(&ctx.cfg.prices);
    for r in storage::usage::persona_totals(&ctx.db(), chat, since, &boundaries).await? {
        let cost = agent_core::usage::cost(&ctx.cfg, &r.usage, now).unwrap_or(0.0);
        let entry = out.entry(r.persona).or_insert_with(|| json!({"calls": 0, "prompt_tokens": 0, "output_tokens": 0, "image_tokens": 0, "cost_usd": 0.0}));
        let add = |v: &mut Value, k: &str, n: f64| v[k] = json!(v[k].as_f64().unwrap_or(0.0) + n);
        add(entry, "calls", r.usage.calls as f64);
        add(entry, "prompt_tokens", r.usage.prompt_tokens as f64);
        add(entry, "output_tokens", r.usage.candidates_tokens as f64);
        add(entry, "image_tokens", r.usage.image_tokens as f64);
        add(entry, "cost_usd", cost);
    }
    Ok(Value::Object(out))
}
