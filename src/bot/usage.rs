//! `/usage` at the edge: this chat's model usage (priced by `agent_core::usage`) and where the
//! chat and the asking person stand against the budgets (`agent_core::limits`).

use crate::config::Ctx;
use crate::storage;

/// `/usage`: this chat's totals and the budgets (with the asking person's figure).
pub async fn chat_usage_text(ctx: &Ctx, chat_id: i64, user_id: Option<i64>) -> worker::Result<String> {
    let now = crate::config::now_ms();
    // All time, in a few rows per model: one per stretch between two price changes.
    let boundaries = agent_core::gemini::prices::boundaries(&ctx.cfg.prices);
    let rows = storage::usage::totals(&ctx.db(), Some(chat_id), 0, storage::usage::Grouping::PricePeriods(&boundaries)).await?;
    let rows: Vec<_> = rows.into_iter().map(|r| r.usage).collect();
    let mut out = agent_core::usage::chat_totals_text(&ctx.cfg, &rows, now);
    // Crew mode: the same totals per persona.
    let personas = storage::usage::persona_totals(&ctx.db(), Some(chat_id), 0, &boundaries).await?;
    if !personas.is_empty() {
        let rows: Vec<(String, agent_core::usage::ModelUsage)> = personas.into_iter().map(|p| (p.persona, p.usage)).collect();
        out.push_str(&agent_core::crew::usage_by_persona_text(&ctx.cfg, &rows, now));
    }
    let used = super::access::budget_usage(ctx, chat_id, user_id).await?;
    out.push_str("\n\nBudgets:\n");
    out.push_str(&agent_core::limits::describe(&ctx.cfg.budgets, &used));
    Ok(out)
}
