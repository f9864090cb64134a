//! Answers that concern one person in a group (an ephemeral command's answer, a refusal, a
//! pairing message, a budget notice on their own hour) go to that person alone where Telegram
//! allows it (`core::telegram::private_answer`: replying to their ephemeral message within
//! 15 s, or at any time when the bot is an admin of the group), else exactly as today
//! ([`Today`]: the group message, or nothing).
//!
//! Whether the bot is an admin: `getChatMember` about itself, kept in the isolate's memory for
//! ten minutes ([`bot_is_admin`]), asked only when such an answer is about to go with no reply
//! window open (a cold path: notices go at most once per window); nothing is written to D1 for
//! it, so the chatter path costs no row. A send Telegram refuses (the bot was demoted
//! meanwhile) falls back to today's answer once and marks the chat "not an admin".
//!
//! Invariants (INVARIANTS.md): "Ephemeral exchanges stay out of the record" (an ephemeral
//! message is marked sent in the outbox, `tg_message_id` 0, and never stored as a bot
//! message). Also: a refused first chunk falls back once (a redelivery finds it failed and
//! falls back the same way, the group message deduplicated by its own key); a chunk left
//! pending (a crash between the send and its record) counts as sent: it may have arrived.

use crate::config::{now_ms, Ctx};
use crate::storage::outbox;
use agent_core::conversation::ConvKey;
use agent_core::format::{render_reply, split::TELEGRAM_LIMIT};
use agent_core::telegram::api::EphemeralMessageParameters;
use agent_core::telegram::private_answer::{self as pa, is_admin_status, AdminCache, Route};
use serde_json::json;
use std::cell::RefCell;

thread_local! {
    /// The bot's admin status per group, as last learnt (`AdminCache`: ten minutes).
    static ADMIN: RefCell<AdminCache> = RefCell::new(AdminCache::default());
}

/// What an answer concerning one person is today, where it cannot go to them alone.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Today {
    /// A message in the group (the same text).
    Group,
    /// Nothing (a refusal or a pairing message in a group).
    Nothing,
}

/// Sends `text` (Markdown) about `user` in group `conv` to that person alone where Telegram
/// allows it (`reply_in_window`: their ephemeral message while its window is open), else as
/// `today`; once, under outbox key `key` (the group message under `{key}/group`).
pub async fn private_answer(ctx: &Ctx, conv: &ConvKey, key: &str, text: &str, user: i64, reply_in_window: Option<i64>, today: Today) {
    let admin = if pa::needs_admin(reply_in_window) { Some(bot_is_admin(ctx, conv.chat_id).await) } else { None };
    if let Route::Ephemeral { reply_to } = pa::route(reply_in_window, admin) {
        match send_ephemeral(ctx, conv, key, text, user, reply_to).await {
            Ok(()) => return,
            Err(e) => {
                worker::console_warn!("the private answer in {conv} was refused ({e}); answering as before");
                if reply_to.is_none() {
                    ADMIN.with(|a| a.borrow_mut().set(conv.chat_id, false, now_ms()));
                }
            }
        }
    }
    if today == Today::Group {
        if let Err(e) = crate::bot::deliver::send_text(ctx, conv, &format!("{key}/group"), text, None, None).await {
            worker::console_error!("the answer in {conv} failed: {}", e.message());
        }
    }
}

/// Whether the bot is an admin of group `chat`: as learnt within ten minutes, else asked
/// (`getChatMember` about itself). A failed ask counts as "no" (today's answer) for the time.
pub async fn bot_is_admin(ctx: &Ctx, chat: i64) -> bool {
    let now = now_ms();
    if let Some(known) = ADMIN.with(|a| a.borrow().get(chat, now)) {
        return known;
    }
    let body = json!({ "chat_id": chat, "user_id": ctx.secrets.bot_id() });
    let admin = match ctx.telegram().call("getChatMember", &body).await {
        Ok(member) => member.get("status").and_then(|s| s.as_str()).is_some_and(is_admin_status),
        Err(e) => {
            worker::console_warn!("chat {chat}: the bot's own status is unknown ({e}); answering as before");
            false
        }
    };
    ADMIN.with(|a| a.borrow_mut().set(chat, admin, now));
    admin
}

/// Sends `text` to `user` alone, once (outbox key `key`); `Err` when Telegram refused it (or
/// refused it before: a redelivery falls back as the first try did). A row left pending (a
/// crash between the send and its record) counts as sent: it may have arrived.
async fn send_ephemeral(ctx: &Ctx, conv: &ConvKey, key: &str, text: &str, user: i64, reply_to: Option<i64>) -> Result<(), String> {
    let db = ctx.db();
    let chunks = render_reply(text, TELEGRAM_LIMIT);
    let done = outbox::of_step(&db, key).await.map_err(|e| e.to_string())?;
    for (i, chunk) in chunks.iter().enumerate() {
        let chunk_key = format!("{key}/{i}");
        match done.iter().find(|r| r.key == chunk_key).map(|r| r.status.as_str()) {
            Some("failed") if i == 0 => return Err("refused before".to_string()),
            Some("failed") => return Ok(()),
            Some(_) => continue,
            None => {}
        }
        let mut body = json!({
            "chat_id": conv.chat_id,
            "text": chunk.html,
            "parse_mode": "HTML",
            "ephemeral_message_parameters": EphemeralMessageParameters { receiver_user_id: user },
        });
        if let Some(id) = reply_to {
            body["reply_parameters"] = json!({ "ephemeral_message_id": id });
        }
        if let Some(thread) = conv.thread_id {
            body["message_thread_id"] = json!(thread);
        }
        let pending = outbox::Pending { key: &chunk_key, step_key: key, conv, method: "sendMessage", body: &body.to_string() };
        outbox::record_pending(&db, &pending, now_ms()).await.map_err(|e| e.to_string())?;
        match ctx.telegram().message_call("sendMessage", &body).await {
            Ok(id) => {
                if let Err(e) = outbox::record_sent_unstored(&db, &chunk_key, id, now_ms()).await {
                    worker::console_error!("outbox {chunk_key}: sent but not recorded: {e}");
                }
            }
            // The first chunk refused: the whole answer goes as before. A later one: the rest
            // is lost (the person repeats the command), never shown to the group.
            Err(e) if i == 0 => {
                let _ = outbox::record_failed(&db, &chunk_key, &e.to_string()).await;
                return Err(e.to_string());
            }
            Err(e) => {
                let _ = outbox::record_failed(&db, &chunk_key, &e.to_string()).await;
                return Ok(());
            }
        }
    }
    Ok(())
}
