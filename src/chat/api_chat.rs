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
use agent_core::chat_state::api_turn::{self, ApiHost, ApiTurn};
use agent_core::chat_state::TurnRun;
use agent_core::conversation::ConvKey;
use serde_json::json;

impl ChatObject {
    /// A synchronous API turn: the text is stored as a message, one turn runs (the core's loop,
    /// `chat_state::api_turn::run`, over this object), its messages come back instead of
    /// going to Telegram (and are stored as the bot's).
    pub(super) async fn api_chat(&self, ctx: &Ctx, text: &str, name: &str) -> (u16, serde_json::Value) {
        let Some((conv, _)) = self.conv() else { return (400, json!({"error": "no conversation"})) };
        let host = ApiCall { obj: self, ctx, conv, text, name };
        let (turn_id, result) = match api_turn::run(&host).await {
            ApiTurn::Busy => return (409, json!({"error": "this conversation is busy; try again"})),
            ApiTurn::NotStored(e) => return (503, json!({"error": e})),
            ApiTurn::Ran { turn_id, answer } => (turn_id, answer),
        };
        match result {
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
                if let Err(e) = storage::messages::record_api_replies(&ctx.db(), &conv, &turn_id, &texts, &ctx.cfg.bot_name, now_ms()).await {
                    worker::console_error!("api chat {conv}: replies not stored: {e}");
                }
                let _ = storage::turns::set_turn_status(&ctx.db(), &turn_id, TurnStatus::Done, None, now_ms()).await;
                (200, json!({"reply": texts.join("\n\n"), "messages": texts, "turn_id": turn_id}))
            }
            Ok(answer::Answer::NothingToDo | answer::Answer::Abandoned) => (200, json!({"reply": null, "messages": [], "turn_id": turn_id})),
            Err(answer::AnswerError::Transient { error, .. }) => (503, json!({"error": error})),
            Err(answer::AnswerError::Permanent { error }) => (502, json!({"error": error})),
        }
    }
}

/// The chat object as an API turn's port (`agent_core::chat_state::api_turn::ApiHost`).
struct ApiCall<'a> {
    obj: &'a ChatObject,
    ctx: &'a Ctx,
    conv: ConvKey,
    text: &'a str,
    name: &'a str,
}

state_port!(ApiCall);

impl ApiHost for ApiCall<'_> {
    type Answer = std::result::Result<answer::Answer, answer::AnswerError>;
    fn new_turn(&self) -> (String, u64) {
        (self.conv.to_string(), u64::from_le_bytes(crate::config::random_bytes::<8>()))
    }
    async fn run(&self, turn: &TurnRun) -> Result<Self::Answer, String> {
        // Held as this instance's turn in flight from the claim on: an alarm meanwhile does not
        // take it for a dead instance's.
        self.obj.running.borrow_mut().turn_begins(&turn.turn_id, None);
        let parts = vec![agent_core::conversation::Part::text(self.text)];
        let result = match storage::messages::record_api_message(&self.ctx.db(), &self.conv, self.name, &parts, now_ms()).await {
            Ok(_) => Ok(answer::answer_turn(self.ctx, &self.conv, turn, None, None).await),
            Err(e) => Err(e.to_string()),
        };
        self.obj.running.borrow_mut().turn_ends();
        result
    }
}
