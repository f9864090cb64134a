//! Model usage and cost: totals from `model_calls`, priced with the configured table, and
//! where the chat and the person stand against the budgets (`agent_core::limits`).

use crate::args;
use crate::config::Ctx;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
pub struct UsageRow {
    pub model: String,
    pub calls: i64,
    pub prompt_tokens: i64,
    pub candidates_tokens: i64,
    pub thoughts_tokens: i64,
    pub cached_tokens: i64,
}

/// Cost in USD of a usage row (thinking tokens are billed as output).
pub fn cost(ctx: &Ctx, r: &UsageRow) -> Option<f64> {
    let (input, output) = ctx.cfg.price(&r.model)?;
    Some((r.prompt_tokens as f64 * input + (r.candidates_tokens + r.thoughts_tokens) as f64 * output) / 1e6)
}

pub async fn chat_usage(ctx: &Ctx, chat_id: i64) -> worker::Result<Vec<UsageRow>> {
    ctx.db()
        .all(
            "SELECT model, COUNT(*) AS calls, SUM(prompt_tokens) AS prompt_tokens, SUM(candidates_tokens) AS candidates_tokens,
               SUM(thoughts_tokens) AS thoughts_tokens, SUM(cached_tokens) AS cached_tokens
             FROM model_calls WHERE chat_id = ?1 GROUP BY model ORDER BY model",
            args![chat_id],
        )
        .await
}

/// `/usage`: this chat's totals and the budgets (with the asking person's figure).
pub async fn chat_usage_text(ctx: &Ctx, chat_id: i64, user_id: Option<i64>) -> worker::Result<String> {
    let mut out = chat_totals_text(ctx, chat_id).await?;
    let used = super::access::budget_usage(ctx, chat_id, user_id).await?;
    out.push_str("\n\nBudgets:\n");
    out.push_str(&agent_core::limits::describe(&ctx.cfg.budgets, &used));
    Ok(out)
}

async fn chat_totals_text(ctx: &Ctx, chat_id: i64) -> worker::Result<String> {
    let rows = chat_usage(ctx, chat_id).await?;
    if rows.is_empty() {
        return Ok("No model calls in this chat yet.".to_string());
    }
    let mut out = String::from("Model usage in this chat:");
    let mut total = 0.0;
    for r in &rows {
        out.push_str(&format!(
            "\n{}: {} calls, {} input + {} output tokens ({} thinking, {} cached)",
            r.model,
            r.calls,
            r.prompt_tokens,
            r.candidates_tokens + r.thoughts_tokens,
            r.thoughts_tokens,
            r.cached_tokens
        ));
        if let Some(c) = cost(ctx, r) {
            total += c;
            out.push_str(&format!(", ${c:.4}"));
        }
    }
    out.push_str(&format!("\nEstimated cost: ${total:.4}"));
    Ok(out)
}

#[derive(Debug, Clone, Deserialize)]
pub struct TotalRow {
    pub chat_id: Option<i64>,
    pub day: String,
    #[serde(flatten)]
    pub usage: UsageRow,
}

/// Totals per chat, per day (UTC) and per model since `since_ms`.
pub async fn totals(ctx: &Ctx, since_ms: i64) -> worker::Result<Vec<TotalRow>> {
    ctx.db()
        .all(
            "SELECT chat_id, strftime('%Y-%m-%d', created_at / 1000, 'unixepoch') AS day, model, COUNT(*) AS calls,
               SUM(prompt_tokens) AS prompt_tokens, SUM(candidates_tokens) AS candidates_tokens,
               SUM(thoughts_tokens) AS thoughts_tokens, SUM(cached_tokens) AS cached_tokens
             FROM model_calls WHERE created_at >= ?1
             GROUP BY chat_id, day, model ORDER BY day DESC, chat_id, model LIMIT 1000",
            args![since_ms],
        )
        .await
}
