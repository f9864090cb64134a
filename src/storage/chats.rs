//! Chats: the per-chat settings the operator sets (the model) and the mark that the bot may
//! no longer write there.

use crate::args;
use crate::storage::Db;
use worker::Result;

/// Sets (or clears, with `None`) a chat's model; whether the chat is on record.
pub async fn set_model(db: &Db, chat_id: i64, model: Option<&str>) -> Result<bool> {
    Ok(db.run("UPDATE chats SET model = ?2 WHERE chat_id = ?1", args![chat_id, model]).await? > 0)
}
