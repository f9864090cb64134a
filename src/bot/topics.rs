//! Topics in private chats (Bot API 9.3/9.4): each topic is its own conversation already
//! (`core::telegram::normalize` keys a topic message by its thread, and replies and drafts carry
//! it). Here: a topic whose name Telegram marks as implicit gets a short name from its first
//! message (`editForumTopic`), once: the outbox row `topic:{chat}:{thread}/name` (step
//! `topic:{chat}:{thread}`: a step's rows are found by their keys' prefix) records the try,
//! and a refused rename (the topic gone, renaming not allowed) is logged and not tried again.

use crate::config::{now_ms, Ctx};
use crate::storage::outbox;
use agent_core::conversation::ConvKey;
use serde_json::json;

/// Names the topic `thread` of private chat `chat` as `name`, unless that was tried before.
pub async fn name_once(ctx: &Ctx, chat: i64, thread: i64, name: &str) {
    let db = ctx.db();
    let step = format!("topic:{chat}:{thread}");
    let key = format!("{step}/name");
    let conv = ConvKey { chat_id: chat, thread_id: Some(thread) };
    let body = json!({ "chat_id": chat, "message_thread_id": thread, "name": name });
    let pending = outbox::Pending { key: &key, step_key: &step, conv: &conv, method: "editForumTopic", body: &body.to_string() };
    match outbox::of_step_recording(&db, &step, &pending, now_ms()).await {
        Ok(rows) if rows.is_empty() => {}
        Ok(_) => return,
        Err(e) => {
            worker::console_warn!("topic {conv}: the rename could not be recorded ({e}); not renamed");
            return;
        }
    }
    let recorded = match ctx.telegram().call("editForumTopic", &body).await {
        Ok(_) => outbox::record_sent_unstored(&db, &key, 0, now_ms()).await,
        Err(e) => {
            worker::console_warn!("topic {conv}: Telegram refused the rename ({e}); it keeps its name");
            outbox::record_failed(&db, &key, &e.to_string()).await
        }
    };
    if let Err(e) = recorded {
        worker::console_error!("outbox {key}: the rename's result was not recorded: {e}");
    }
}
