//! Chats: the per-chat settings the operator sets (the model) and the mark that the bot may
//! no longer write there.

use crate::args;
use crate::storage::Db;
use worker::Result;

/// Sets (or clears, with `None`) a chat's model; whether the chat is on record.
pub async fn set_model(db: &Db, chat_id: i64, model: Option<&str>) -> Result<bool> {
    Ok(db.run("UPDATE chats SET model = ?2 WHERE chat_id = ?1", args![chat_id, model]).await? > 0)
}

/// Marks a chat as one the bot may not write to (until the chat writes again: the webhook's
/// chat upsert clears it).
pub async fn mark_blocked(db: &Db, chat_id: i64, reason: &str, now: i64) -> Result<()> {
    db.run("UPDATE chats SET blocked_at = ?2, blocked_reason = ?3 WHERE chat_id = ?1", args![chat_id, now, reason]).await?;
    Ok(())
}
