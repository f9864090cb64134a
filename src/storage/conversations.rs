//! Conversations: the per-conversation row (session window, plan, consolidation watermark).
use crate::args;
use crate::storage::Db;
use agent_core::conversation::ConvKey;
use worker::Result;

pub async fn set_plan(db: &Db, conv: &ConvKey, plan: &str, now: i64) -> Result<()> {
    db.run(
        "INSERT INTO conversations (conv, chat_id, thread_id, plan, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (conv) DO UPDATE SET plan = excluded.plan, updated_at = excluded.updated_at",
        args![conv.to_string(), conv.chat_id, conv.thread_id, if plan.trim().is_empty() { None } else { Some(plan) }, now],
    )
    .await?;
    Ok(())
}
