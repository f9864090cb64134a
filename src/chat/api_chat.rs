//! The synchronous API chat (`POST /api/v1/chat`): the text is stored as a message, one turn
//! runs, and its messages come back instead of going to Telegram (stored as the bot's).
//!
//! Invariants (INVARIANTS.md): "One turn at a time per conversation": the turn is claimed in
//! one step, before any await, so two concurrent calls cannot both start one; a busy
//! conversation answers 409.

use super::ChatObject;
use crate::bot::answer;
use crate::config::{now_ms, Ctx};
use crate::storage;
use agent_core::chat::plan::Step;
use agent_core::chat::status::TurnStatus;

impl ChatObject {
    /// A synchronous API turn: the text is stored as a message, one turn runs, its messages come
    /// back instead of going to Telegram (and are stored as the bot's).
    pub(super) async fn api_chat(&self, ctx: &Ctx, text: &str, name: &str) -> (u16, serde_json::Value) {
        use serde_json::json;
        let Some((conv, _)) = self.conv() else { return (400, json!({"error": "no conversation"})) };
        let now = now_ms();
        let conv_s = conv.to_string();
        let nonce = u64::from_le_bytes(crate::config::random_bytes::<8>());
        // Checked and claimed in one step, before any await: two concurrent calls cannot both
        // start a turn.
        let claimed = self.update(|st| st.claim_api_turn(now, &conv_s, nonce)).await;
        let Some(turn) = claimed else {
            return (409, json!({"error": "this conversation is busy; try again"}));
        };
        self.running.borrow_mut().turn_begins(&turn.turn_id, None);
        let parts = vec![agent_core::conversation::Part::text(text)];
        if let Err(e) = storage::messages::record_api_message(&ctx.db(), &conv, name, &parts, now).await {
            self.running.borrow_mut().turn_ends();
            self.update(|st| st.end_turn(&turn.turn_id)).await;
            return (503, json!({"error": e.to_string()}));
        }
        let result = answer::answer_turn(ctx, &conv, &turn, None, None).await;
        self.running.borrow_mut().turn_ends();
        self.update(|st| st.end_turn(&turn.turn_id)).await;
        let answer = match result {
            Ok(answer::Answer::Planned { steps, schedules_changed, .. }) => {
                if schedules_changed {
                    self.refresh_schedules(ctx).await;
                }
                let texts: Vec<String> = steps
                    .iter()
                    .filter_map(|s| match s {
                        Step::Send { text, .. } => Some(text.clone()),
                        _ => None,
                    })
                    .collect();
                if let Err(e) = storage::messages::record_api_replies(&ctx.db(), &conv, &turn.turn_id, &texts, &ctx.cfg.bot_name, now_ms()).await {
                    worker::console_error!("api chat {conv}: replies not stored: {e}");
                }
                let _ = storage::turns::set_turn_status(&ctx.db(), &turn.turn_id, TurnStatus::Done, None, now_ms()).await;
                (200, json!({"reply": texts.join("\n\n"), "messages": texts, "turn_id": turn.turn_id}))
            }
            Ok(answer::Answer::NothingToDo | answer::Answer::Abandoned) => (200, json!({"reply": null, "messages": [], "turn_id": turn.turn_id})),
            Err(answer::AnswerError::Transient { error, .. }) => (503, json!({"error": error})),
            Err(answer::AnswerError::Permanent { error }) => (502, json!({"error": error})),
        };
        answer
    }
}
