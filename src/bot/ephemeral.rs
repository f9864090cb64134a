//! Private answers in groups (Bot API 10.2/10.3 ephemeral messages): a command marked
//! ephemeral in the menu (`core::telegram::commands::EPHEMERAL`: `/memory`, `/usage`, ...) sent
//! in a group reaches the bot as a message only its sender and the bot see (`message_id` 0,
//! `ephemeral_message_id`). Its answer goes to that person alone
//! (`ephemeral_message_parameters`, replying to the `ephemeral_message_id`) while Telegram's
//! 15 s window is open; else, or when Telegram refuses the ephemeral answer, it goes as today:
//! a message in the group, never showing more than today's answer.
//!
//! Also: neither the command nor its ephemeral answer enters the group's history, prompts or
//! memories (nothing is stored but the outbox row, keyed by the update); Telegram does not
//! guarantee delivery, so a lost answer is simply lost: the person repeats the command. An
//! ephemeral message that is not a private-answer command is acknowledged and ignored.

use crate::config::{now_ms, Ctx};
use crate::storage::outbox;
use agent_core::conversation::{ConvKey, InboundMessage};
use agent_core::format::{render_reply, split::TELEGRAM_LIMIT};
use agent_core::telegram::api::{ephemeral_in_window, EphemeralMessageParameters};
use agent_core::telegram::commands::{self, is_private_answer};
use serde_json::json;

/// Handles an ephemeral message `m` (`ephemeral_id`, sent at `date` seconds) of update
/// `update_id`. The caller acknowledges the update whatever happens here.
pub async fn handle(ctx: &Ctx, update_id: i64, m: &InboundMessage, ephemeral_id: i64, date: i64, bot_username: &str) {
    let (Some(user), Some(cmd)) = (m.speaker.user_id, commands::parse(m, bot_username)) else {
        worker::console_log!("ignoring ephemeral message {ephemeral_id} in {}: not a command", m.chat.id);
        return;
    };
    if !is_private_answer(&cmd) || !m.chat.kind.is_group() {
        worker::console_log!("ignoring ephemeral message {ephemeral_id} in {}: no private answer", m.chat.id);
        return;
    }
    let conv = m.conv;
    let text = match crate::bot::commands::answer(ctx, &conv, m, cmd).await {
        Ok(t) => t,
        Err(e) => {
            worker::console_error!("ephemeral command failed in {conv}: {e}");
            "Sorry, that didn't work. Please try again in a moment.".to_string()
        }
    };
    let key = format!("eph:{}:{update_id}", conv.chat_id);
    if ephemeral_in_window(date, now_ms()) {
        match send_ephemeral(ctx, &conv, &key, &text, user, ephemeral_id).await {
            Ok(()) => return,
            Err(e) => worker::console_warn!("the ephemeral answer in {conv} was refused ({e}); answering as before"),
        }
    }
    // As today: a message in the group (there is no visible message to reply to).
    if let Err(e) = crate::bot::deliver::send_text(ctx, &conv, &format!("{key}/group"), &text, None, None).await {
        worker::console_error!("command reply failed in {conv}: {}", e.message());
    }
}

/// Sends `text` to `user` alone, once (outbox key `key`); `Err` when Telegram refused it.
async fn send_ephemeral(ctx: &Ctx, conv: &ConvKey, key: &str, text: &str, user: i64, ephemeral_id: i64) -> Result<(), String> {
    let db = ctx.db();
    let chunks = render_reply(text, TELEGRAM_LIMIT);
    let done = outbox::of_step(&db, key).await.map_err(|e| e.to_string())?;
    for (i, chunk) in chunks.iter().enumerate() {
        let chunk_key = format!("{key}/{i}");
        if done.iter().any(|r| r.key == chunk_key && r.status == "sent") {
            continue;
        }
        let body = json!({
            "chat_id": conv.chat_id,
            "text": chunk.html,
            "parse_mode": "HTML",
            "ephemeral_message_parameters": EphemeralMessageParameters { receiver_user_id: user },
            "reply_parameters": { "ephemeral_message_id": ephemeral_id },
        });
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
