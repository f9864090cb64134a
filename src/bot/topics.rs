//! Topics in private chats (Bot API 9.3/9.4): each topic is its own conversation already
//! (`core::telegram::normalize` keys a topic message by its thread, and replies and drafts carry
//! it). Here: a topic whose name Telegram marks as implicit gets a short name from its first
//! message (`editForumTopic`), once: the outbox row `topic:{chat}:{thread}/name` (step
//! `topic:{chat}:{thread}`: a step's rows are found by their keys' prefix) records the try,
//! and a refused rename (the topic gone, renaming not allowed) is logged and not tried again.
//! And `/new` in a private chat with topics opens a fresh topic ([`open`],
//! `core::telegram::new_topic`) instead of resetting the current conversation.

use crate::config::{now_ms, Ctx};
use crate::storage::outbox;
use agent_core::conversation::{ChatKind, ConvKey};
use agent_core::telegram::new_topic;
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

/// Whether `/new` in a chat of `kind` opens a fresh topic (`NEW_OPENS_TOPIC`, a private chat,
/// the bot's topics on as `getMe` says; a failed getMe: no).
pub async fn new_opens_topic(ctx: &Ctx, kind: ChatKind) -> bool {
    if !new_topic::opens_topic(ctx.cfg.new_opens_topic, kind, true) {
        return false;
    }
    match ctx.telegram().me().await {
        Ok(me) => new_topic::opens_topic(true, kind, me.has_topics_enabled),
        Err(e) => {
            worker::console_warn!("getMe failed ({e}); /new resets the conversation");
            false
        }
    }
}

/// Opens a fresh topic in private chat `chat` for the `/new` of message `message_id`, with the
/// placeholder name (named later from its first message, `name_once`), and greets the person
/// in it: each once (outbox step `newtopic:{chat}:{message_id}`: `/create` holds the topic's
/// thread id, the greeting goes under `…:greet`). Returns the thread; `Err` when Telegram
/// refused the topic, or it was tried before without a known result (nothing is opened twice).
pub async fn open(ctx: &Ctx, chat: i64, message_id: i64) -> Result<i64, String> {
    let db = ctx.db();
    let step = format!("newtopic:{chat}:{message_id}");
    let key = format!("{step}/create");
    let conv = ConvKey::chat(chat);
    let body = json!({ "chat_id": chat, "name": new_topic::PLACEHOLDER_NAME });
    let pending = outbox::Pending { key: &key, step_key: &step, conv: &conv, method: "createForumTopic", body: &body.to_string() };
    let rows = outbox::of_step_recording(&db, &step, &pending, now_ms()).await.map_err(|e| e.to_string())?;
    let thread = match rows.iter().find(|r| r.key == key) {
        Some(r) if r.status == "sent" => r.tg_message_id.ok_or("no thread recorded")?,
        Some(r) => return Err(format!("tried before ({})", r.status)),
        None => match ctx.telegram().call("createForumTopic", &body).await {
            Ok(v) => {
                let topic: new_topic::CreatedTopic = serde_json::from_value(v).map_err(|e| format!("unexpected ForumTopic: {e}"))?;
                if let Err(e) = outbox::record_sent_unstored(&db, &key, topic.message_thread_id, now_ms()).await {
                    worker::console_error!("outbox {key}: the topic was opened but not recorded: {e}");
                }
                topic.message_thread_id
            }
            Err(e) => {
                let _ = outbox::record_failed(&db, &key, &e.to_string()).await;
                return Err(e.to_string());
            }
        },
    };
    let topic = ConvKey { chat_id: chat, thread_id: Some(thread) };
    if let Err(e) = crate::bot::deliver::send_text(ctx, &topic, &format!("{step}:greet"), new_topic::GREETING, None, None).await {
        worker::console_warn!("topic {topic}: the greeting did not go ({})", e.message());
    }
    Ok(thread)
}
