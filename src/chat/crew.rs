//! Crew mode's cycle in the chat object: which crew speaks in this conversation, starting the
//! next persona's turn, what a persona's answer does to the cycle, and the chat's switch
//! (`/crew on|off`, `PUT /api/v1/chats/{id}/crew`). Who the personas are and gating a crew
//! message are `bot::crew`; the cycle's rules are `agent_core::crew`.
//!
//! Invariants (INVARIANTS.md): "Crew order survives everything", "A pass is silence,
//! failures skip", "Budgets" (here: a continuation turn is charged to the person whose message
//! started the cycle, like a message of theirs; over their budget, or the chat's, the bot's,
//! the cycle ends).

use super::ChatObject;
use crate::bot::access;
use crate::bot::crew::{self as bot_crew, configured};
use crate::config::{now_ms, Ctx};
use crate::storage;
use agent_core::chat_state::{Finish, TurnRun};
use agent_core::conversation::ConvKey;
use agent_core::crew::{self, End, Lineup};
use agent_core::telegram::gating::Trigger;
use agent_core::chat::plan::Step;

/// The configured crew as the state machine takes it (empty when there is none): a turn's
/// life is handed this value at each point and the state decides whether a turn is a persona's.
pub(super) fn lineup(ctx: &Ctx) -> Lineup {
    Lineup::of(&configured(ctx), ctx.cfg.crew_max_rounds)
}

impl ChatObject {
    /// The crew that speaks in this conversation, if one does (`ChatObject::crew_here`; the
    /// state is asked only when a crew is configured).
    async fn crew_lineup(&self, ctx: &Ctx) -> Option<Lineup> {
        if ctx.cfg.crew.is_empty() {
            return None;
        }
        let switch = self.with(|st| st.crew_switch()).await;
        let personas = configured(ctx);
        (self.crew_here(ctx, switch) == crew::Here::Speaks && !personas.is_empty()).then(|| Lineup::of(&personas, ctx.cfg.crew_max_rounds))
    }

    /// Starts the turn that is due: the next persona's when the crew speaks here, else the
    /// single bot's (`ChatState::begin_due_turn`).
    pub(super) async fn begin_due_turn(&self, ctx: &Ctx, conv: &ConvKey, nonce: u64) -> Option<TurnRun> {
        let lineup = self.crew_lineup(ctx).await;
        if lineup.is_some() && !self.continuation_within_budget(ctx, conv).await {
            return None;
        }
        let conv_s = conv.to_string();
        let now = now_ms();
        self.update(|st| st.begin_due_turn(now, &conv_s, nonce, lineup.as_ref(), &self.timing_for(ctx, st))).await
    }

    /// A continuation turn of a cycle (nobody asked just now) is the work of the person whose
    /// message started the cycle (none for a reaction): checked against and charged to their
    /// budget and the chat's and the bot's (`access::work_within_budget`). Over one, the cycle
    /// ends (`over_budget`) and no turn starts.
    async fn continuation_within_budget(&self, ctx: &Ctx, conv: &ConvKey) -> bool {
        let Some((target, trigger, key)) = self.with(|st| st.crew_continuation().zip(st.crew_charge_key())).await.map(|((t, g), k)| (t, g, k)) else { return true };
        let author = match target.filter(|_| trigger != Trigger::Reaction) {
            Some(id) => storage::access::author_of(&ctx.db(), conv.chat_id, id).await.unwrap_or_else(|e| {
                worker::console_warn!("crew: the cycle's author could not be read ({e}); the chat's budgets only");
                None
            }),
            None => None,
        };
        if access::work_within_budget(ctx, conv.chat_id, author, Some(&format!("crew:{conv}:{key}"))).await {
            return true;
        }
        if let Some(end) = self.update(|st| st.end_crew_cycle(End::OverBudget)).await {
            self.cycle_ended(end);
        }
        false
    }

    /// Ends a turn with the model's steps (`ChatState::finish_answer`): a persona's moves the
    /// cycle on (a pass sends nothing; without its own bot speaking, its display name leads its
    /// message), anyone else's as usual. `step_calls` stays with the plan. Returns the decision
    /// and whether nothing is to be sent.
    pub(super) async fn finish_any_turn(&self, ctx: &Ctx, turn_id: &str, steps: Vec<Step>, step_calls: Option<Vec<Option<usize>>>) -> (Finish, bool) {
        // Its own bot speaks only in groups (as `bot::crew::speaking_for` decides); else the header.
        let group = self.conv().is_some_and(|(_, kind)| kind.is_group());
        let crew = lineup(ctx);
        let mut persona = None;
        let answered = self
            .update(|st| {
                persona = st.turn_of(turn_id).and_then(|t| bot_crew::persona_of(ctx, t));
                let steps = match &persona {
                    Some(p) if !crew::is_pass(&steps) && !(group && crate::config::env::crew_bot_token(&ctx.env, &p.name).is_some()) => {
                        crew::with_display_name(steps, &p.display_name)
                    }
                    _ => steps,
                };
                st.finish_answer(turn_id, steps, step_calls, &crew, now_ms())
            })
            .await;
        if let (true, Finish::Execute, Some(p)) = (answered.passed, &answered.finish, &persona) {
            worker::console_log!("turn {turn_id}: {} passed", p.name);
        }
        if let Some(end) = answered.cycle_end {
            self.cycle_ended(end);
        }
        (answered.finish, answered.silent)
    }

    /// A turn with nothing to answer (`ChatState::nothing_to_answer`: a persona's first turn
    /// ends the cycle, a later one counts as a pass).
    pub(super) async fn nothing_to_answer(&self, ctx: &Ctx, turn_id: &str) {
        let crew = lineup(ctx);
        if let Some(end) = self.update(|st| st.nothing_to_answer(turn_id, &crew, now_ms())).await {
            self.cycle_ended(end);
        }
    }

    /// Says in the log that this conversation's crew cycle ended, and why (what an operator,
    /// and the tests, read).
    pub(super) fn cycle_ended(&self, end: End) {
        let conv = self.meta.borrow().as_ref().map(|m| m.conv.to_string()).unwrap_or_default();
        worker::console_log!("crew cycle ended in {conv}: {}", end.as_str());
    }

    /// Sets the chat's crew switch (`None`: follow `CREW_CHATS`).
    pub(super) async fn set_crew(&self, on: Option<bool>) -> bool {
        self.update(|st| st.set_crew_switch(on)).await;
        on.unwrap_or(false)
    }
}
