//! Private answers in groups (Bot API 10.2/10.3 ephemeral messages), the commands: a command
//! marked ephemeral in the menu (`core::telegram::commands::EPHEMERAL`: `/memory`, `/usage`,
//! ...) sent in a group reaches the bot as a message only its sender and the bot see
//! (`message_id` 0, `ephemeral_message_id`). Its answer goes to that person alone
//! (`bot::to_one_person`: replying within Telegram's 15 s window, or at any time when the bot is an
//! admin of the group), else as today: a message in the group, never showing more.
//!
//! Also: neither the command nor its ephemeral answer enters the group's history, prompts or
//! memories (nothing is stored but the outbox rows); Telegram does not guarantee delivery, so a
//! lost answer is simply lost: the person repeats the command, nothing is owed. An ephemeral
//! message that is not a private-answer command is acknowledged and ignored.

use super::to_one_person::{private_answer, Today};
use crate::config::{now_ms, Ctx};
use agent_core::conversation::InboundMessage;
use agent_core::telegram::api::ephemeral_in_window;
use agent_core::telegram::commands::{self, is_private_answer};


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
    let window = ephemeral_in_window(date, now_ms()).then_some(ephemeral_id);
    // As today: a message in the group (there is no visible message to reply to).
    private_answer(ctx, &conv, &key, &text, user, window, Today::Group).await;
}

