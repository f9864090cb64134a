//! The object's inbox: an arrival (`outbound::objects::Arrival`), a reply-asking message or
//! reaction from the webhook. Access policy,
//! commands and budgets come first (none of them calls the model); then the signal goes to
//! the state machine, which debounces bursts and may cancel a plan in progress. The first
//! message of a burst gets a visible sign at once (`stream::first_sign`).
//!
//! Invariants (INVARIANTS.md): "Dedup" (here: the update's id is remembered in the state;
//! concurrent copies are handled once). Also: a refused or over-budget message is remembered
//! too, so a redelivery is not refused (and notified) twice.

use super::ChatObject;
use crate::outbound::objects::Arrival;
use crate::bot::{access, answer, commands};
use crate::config::{now_ms, Ctx};
use agent_core::chat_state::{ChatState, Signal, SignalOutcome};
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
        // Redelivered: the signal is already in; nothing else is done again.
        if self.with(|st| st.has_seen(arrival.update_id)).await {
            return;
        }
        if !access::admit(ctx, &conv, kind, user_id, &name, arrival.access.as_deref(), message_id).await {
            // Remember the update so a redelivery does not refuse (and notify) twice.
            self.update(|st| st.mark_seen(arrival.update_id)).await;
            return;
        }
        if let Some(m) = &arrival.message {
            if let Some(cmd) = core_commands::parse(m, &arrival.bot_username) {
                let is_new = matches!(cmd, core_commands::Command::New);
                let cancels = matches!(cmd, core_commands::Command::Cancel(Some(_)));
                // `/crew on|off` by an operator switches the crew here (`chat::crew`).
                let is_admin = m.speaker.user_id.is_some_and(|u| ctx.cfg.admin_user_ids.contains(&u));
                if let (core_commands::Command::Crew(Some(on)), true) = (&cmd, is_admin && !ctx.cfg.crew.is_empty()) {
                    self.set_crew(Some(*on)).await;
                }
                self.update(|st| command_seen(st, arrival.update_id, is_new)).await;
                commands::run(ctx, &conv, m, cmd).await;
                if cancels {
                    self.refresh_schedules(ctx).await;
                }
                return;
            }
        }
        // Model budgets (per person, chat and bot): over one, no turn and one notice per window.
        if !access::within_budget(ctx, &conv, kind, user_id, message_id).await {
            self.update(|st| st.mark_seen(arrival.update_id)).await;
            return;
        }
        // The debounce runs on this object's clock: when it learned of the message. (Telegram
        // sends a chat's updates one at a time, each after the previous one was acknowledged,
        // so under load the gap it sees between messages is at least the acknowledgement time.)
        let signal = Signal { update_id: arrival.update_id, target_message_id: Some(message_id), trigger: arrival.trigger, at_ms: now_ms() };
        match self.update(|st| st.signal(&signal)).await {
            SignalOutcome::Duplicate => {}
            SignalOutcome::Accepted { cancelled, abandoned } => {
                if let Some(turn_id) = abandoned {
                    self.abandon_early_start(ctx, conv, kind, &turn_id);
                }
                // The first message of a burst, no turn running: show the bot is on it now.
                if self.with(ChatState::burst_just_began).await {
                    crate::bot::stream::first_sign_soon(ctx, conv, kind, arrival.trigger != Trigger::Reaction);
                }
                if let Some((turn_id, from)) = cancelled {
                    self.record_cancelled(ctx, &turn_id, from).await;
                }
            }
        }
    }

    /// A newer message abandoned the early start `turn_id` (`ChatState::signal`): its model
    /// call stops now (it records itself as stale, its tokens charged), and the placeholder
    /// replaces whatever draft it showed, so nothing of it stays up; the burst's own turn follows.
    fn abandon_early_start(&self, ctx: &Ctx, conv: ConvKey, kind: ChatKind, turn_id: &str) {
        let here = self.abandon_turn(turn_id);
        worker::console_log!("turn {turn_id}: early start abandoned for a newer message (stopped here: {here})");
        crate::bot::stream::first_sign_soon(ctx, conv, kind, true);
    }

    /// Records the steps of a plan that a new message cancelled.
    pub(super) async fn record_cancelled(&self, ctx: &Ctx, turn_id: &str, from: usize) {
        worker::console_log!("turn {turn_id}: plan cancelled from step {from} by a new message");
        let calls = answer::step_calls(ctx, turn_id).await;
        let cancelled: Vec<_> = (from..calls.len()).map(|index| (index, StepOutcome::Cancelled)).collect();
        answer::record_steps(ctx, turn_id, &calls, &cancelled, Some((TurnStatus::Done, Some(format!("cancelled from step {from}"))))).await;
    }
}

/// A command's update is seen; `/new` also starts over: the old session's burst, plan and crew
/// cycle are forgotten.
fn command_seen(st: &mut ChatState, update_id: i64, is_new: bool) {
    st.mark_seen(update_id);
    if is_new {
        st.start_over();
    }
}
