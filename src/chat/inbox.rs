//! The object's inbox: an arrival (`outbound::objects::Arrival`), a reply-asking message or
//! reaction from the webhook. The object learns the conversation and what the arrival is
//! (`ArrivalFacts`), then runs the core's loop (`chat_state::arrival::run`) with itself as the
//! port (`Arriving`): access policy, commands and budgets first (none of them calls the
//! model), then the signal to the state machine, which debounces bursts and may cancel a plan
//! in progress. The first message of a burst gets a visible sign at once (`stream::first_sign`).
//!
//! Invariants (INVARIANTS.md): "Dedup" (here: the update's id is remembered in the state;
//! concurrent copies are handled once). Also: a refused or over-budget message is remembered
//! too, so a redelivery is not refused (and notified) twice.

use super::ChatObject;
use crate::outbound::objects::Arrival;
use crate::bot::{access, answer, commands};
use crate::config::Ctx;
use agent_core::chat_state::arrival::{self, ArrivalFacts, ArrivalHost, CommandFacts};
use agent_core::telegram::commands as core_commands;
use agent_core::conversation::{ChatKind, ConvKey};
use agent_core::telegram::gating::Trigger;
use agent_core::chat::plan::StepOutcome;
use agent_core::chat::status::TurnStatus;

impl ChatObject {
    /// Handles an arrival once, however many copies of it come in at the same time.
    pub(super) async fn take_arrival(&self, ctx: &Ctx, arrival: Arrival) {
        // Concurrent copies of one update: only the first is handled.
        if !self.handling.borrow_mut().insert(arrival.update_id) {
            return;
        }
        self.handle_arrival(ctx, &arrival).await;
        self.handling.borrow_mut().remove(&arrival.update_id);
    }

    async fn handle_arrival(&self, ctx: &Ctx, arrival: &Arrival) {
        let kind = arrival.message.as_ref().map(|m| m.chat.kind).or(arrival.reaction.as_ref().map(|r| r.chat.kind));
        // The key the object already knows (not `conv()`, which would warn that the kind is
        // unknown on a chat's very first message, before the kind below is remembered).
        let known = self.meta.borrow().as_ref().map(|m| m.conv);
        let conv = match (&arrival.message, &arrival.reaction, known) {
            (Some(m), _, _) => m.conv,
            (None, _, Some(c)) => c,
            (None, Some(r), None) => ConvKey::chat(r.chat.id),
            (None, None, None) => return,
        };
        self.remember_conv(conv, kind).await;
        let kind = kind.unwrap_or(ChatKind::Private);

        let (user_id, name, message_id) = match (&arrival.message, &arrival.reaction) {
            (Some(m), _) => (m.speaker.user_id, m.speaker.name.clone(), m.message_id),
            (None, Some(r)) => (r.speaker.user_id, r.speaker.name.clone(), r.message_id),
            _ => return,
        };
        let command = arrival.message.as_ref().and_then(|m| core_commands::parse(m, &arrival.bot_username).map(|cmd| (m, cmd)));
        let facts = ArrivalFacts {
            update_id: arrival.update_id,
            message_id,
            trigger: arrival.trigger,
            command: command.as_ref().map(|(m, cmd)| {
                // `/crew on|off` by an operator switches the crew here (`chat::crew`).
                let is_admin = m.speaker.user_id.is_some_and(|u| ctx.cfg.admin_user_ids.contains(&u));
                CommandFacts {
                    starts_over: matches!(cmd, core_commands::Command::New),
                    cancels_schedule: matches!(cmd, core_commands::Command::Cancel(Some(_))),
                    crew_switch: match cmd {
                        core_commands::Command::Crew(Some(on)) if is_admin && !ctx.cfg.crew.is_empty() => Some(*on),
                        _ => None,
                    },
                }
            }),
        };
        let host = Arriving { obj: self, ctx, arrival, conv, kind, user_id, name: &name, message_id, command };
        arrival::run(&host, &facts).await;
    }

    /// A newer message abandoned the early start `turn_id` (`ChatState::signal`): its model
    /// call stops now (it records itself as stale, its tokens charged), and the placeholder
    /// replaces whatever draft it showed, so nothing of it stays up; the burst's own turn follows.
    fn abandon_early_start(&self, ctx: &Ctx, conv: ConvKey, kind: ChatKind, turn_id: &str) {
        let here = self.abandon_turn(turn_id);
        worker::console_log!("turn {turn_id}: early start stopped here: {here}");
        crate::bot::stream::first_sign_soon(ctx, conv, kind, true);
    }

    /// Records the steps of a plan that a new message cancelled.
    pub(super) async fn record_cancelled(&self, ctx: &Ctx, turn_id: &str, from: usize) {
        let calls = answer::step_calls(ctx, turn_id).await;
        let cancelled: Vec<_> = (from..calls.len()).map(|index| (index, StepOutcome::Cancelled)).collect();
        answer::record_steps(ctx, turn_id, &calls, &cancelled, Some((TurnStatus::Done, Some(format!("cancelled from step {from}"))))).await;
    }
}

/// The chat object as an arrival's port (`agent_core::chat_state::arrival::ArrivalHost`):
/// `chat::Host`'s state and clock, and what the object does with this arrival.
struct Arriving<'a> {
    obj: &'a ChatObject,
    ctx: &'a Ctx,
    arrival: &'a Arrival,
    conv: ConvKey,
    kind: ChatKind,
    user_id: Option<i64>,
    name: &'a str,
    message_id: i64,
    command: Option<(&'a agent_core::conversation::InboundMessage, core_commands::Command)>,
}

state_port!(Arriving);

impl ArrivalHost for Arriving<'_> {
    async fn admit(&self) -> bool {
        access::admit(self.ctx, &self.conv, self.kind, self.user_id, self.name, self.arrival.access.as_deref(), self.message_id).await
    }
    async fn within_budget(&self) -> bool {
        access::within_budget(self.ctx, &self.conv, self.kind, self.user_id, self.message_id).await
    }
    async fn run_command(&self) {
        if let Some((m, cmd)) = &self.command {
            commands::run(self.ctx, &self.conv, m, cmd.clone()).await;
        }
    }
    async fn refresh_schedules(&self) {
        self.obj.refresh_schedules(self.ctx).await;
    }
    fn abandon_early_start(&self, turn_id: &str) {
        self.obj.abandon_early_start(self.ctx, self.conv, self.kind, turn_id);
    }
    fn first_sign(&self) {
        crate::bot::stream::first_sign_soon(self.ctx, self.conv, self.kind, self.arrival.trigger != Trigger::Reaction);
    }
    async fn record_cancelled(&self, turn_id: &str, from: usize) {
        self.obj.record_cancelled(self.ctx, turn_id, from).await;
    }
}
