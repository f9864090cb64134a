//! Carrying out a plan: due steps in order until the plan ends, waits, or a step must be
//! retried. Which message a step threads to and what a failed step does to the plan are the
//! core's rules (`agent_core::chat::plan::{default_reply_to, after_fatal}`).
//!
//! Invariants (INVARIANTS.md): "A cancelled step is never sent" (plan steps run under that
//! guard; a step carried out is recorded truthfully even if a new message cancelled the plan
//! while Telegram answered).

use super::ChatObject;
use agent_core::chat_state::job::StepRetry;
use crate::bot::{answer, deliver};
use crate::config::{now_ms, Ctx};
use agent_core::chat_state::effects::StepStart;
use agent_core::chat_state::ChatState;
use agent_core::conversation::{ChatKind, ConvKey};
use agent_core::chat::plan::{Step, StepOutcome};
use agent_core::chat::status::TurnStatus;
use agent_core::chat::plan::{after_fatal, default_reply_to, AfterFailure};

impl ChatObject {
    /// Carries out due plan steps in order until the plan ends, waits, or a step must be
    /// retried (returned). Stops as soon as a new message cancels the plan.
    pub(super) async fn advance(&self, ctx: &Ctx) -> Option<StepRetry> {
        if !self.running.borrow_mut().advance_begins() {
            return None;
        }
        // The re-check while the steps go out: an alarm meanwhile does not spin, and an
        // instance that starts after a restart takes the plan over within seconds.
        self.arm(ctx).await;
        let retry = self.advance_inner(ctx).await;
        self.running.borrow_mut().advance_ends();
        retry
    }

    async fn advance_inner(&self, ctx: &Ctx) -> Option<StepRetry> {
        let (conv, kind) = self.conv()?;
        let mut step_calls: Option<(String, Vec<Option<usize>>)> = None;
        let limits = Self::limits(ctx);
        // The step just carried out, to be marked done in the same write as the next step's
        // start (one write per step; the step's outcome is already in D1 and the outbox).
        let mut done: Option<(String, usize, i64)> = None;
        loop {
            // Enough for this invocation: the alarm (due now) carries on (the last step's done
            // is still written).
            let room = limits.room_for(ctx.meter.count(), STEP_COST);
            if !room && done.is_none() {
                return None;
            }
            let now = now_ms();
            let known = step_calls.as_ref().map(|(t, _)| t.clone());
            // One ask: the last step done, the due step, and its start when nothing is to be
            // read before it.
            let last = done.take();
            let (due, started) = self
                .update(|st| {
                    if let Some((turn_id, index, not_before)) = &last {
                        st.step_done(turn_id, *index, *not_before);
                    }
                    let due = DueStep::of(st, now, kind).filter(|_| room)?;
                    let ready = due.step_calls.is_some() || known.as_deref() == Some(due.turn_id.as_str());
                    let started = (ready && !matches!(due.step, Step::Wait { .. })).then(|| st.step_start(&due.turn_id, due.index, &limits));
                    Some((due, started))
                })
                .await?;
            if step_calls.as_ref().is_none_or(|(t, _)| *t != due.turn_id) {
                // Kept with the plan when this object's turn made it; else the turn's row.
                let calls = match due.step_calls.clone() {
                    Some(calls) => calls,
                    None => answer::step_calls(ctx, &due.turn_id).await,
                };
                step_calls = Some((due.turn_id.clone(), calls));
            }
            let calls = step_calls.as_ref().map(|(_, c)| c.clone()).unwrap_or_default();
            if let Step::Wait { seconds } = &due.step {
                let until = now.saturating_add(i64::from(*seconds).saturating_mul(1000));
                self.update(|st| st.step_done(&due.turn_id, due.index, until)).await;
                answer::record_step_outcome(ctx, &due.turn_id, &calls, due.index, &StepOutcome::Done).await;
                continue;
            }
            let result = self.send_step(ctx, &conv, &due, started).await?;
            match self.after_step(ctx, &due, &calls, result).await {
                Next::Done => done = Some((due.turn_id.clone(), due.index, now_ms())),
                Next::Stop => return None,
                Next::Retry(retry) => return Some(retry),
            }
        }
    }

    /// Starts a visible step and carries it out under the guard. `None`: the plan is gone, or
    /// the step kept failing and the plan was given up.
    /// `started`: the step's start as the state said when it was found due, if it was started
    /// then; else (its calls were read first, an await) it is started here.
    async fn send_step(&self, ctx: &Ctx, conv: &ConvKey, due: &DueStep, started: Option<StepStart>) -> Option<std::result::Result<StepOutcome, deliver::StepError>> {
        let (turn_id, index) = (due.turn_id.clone(), due.index);
        let limits = Self::limits(ctx);
        let started = match started {
            Some(started) => started,
            // The step_calls read before was an await: the plan may be gone meanwhile.
            None => self.update(|st| st.step_start(&turn_id, index, &limits)).await,
        };
        match started {
            StepStart::Go => {}
            StepStart::Gone => return None,
            StepStart::GiveUp => {
                worker::console_error!("turn {turn_id} step {index} keeps failing; dropping the plan");
                self.give_up(ctx, &turn_id, "a step kept failing").await;
                return None;
            }
        }
        // Delivery asks this guard right before every Telegram call.
        let chat = self.chat.clone();
        let guard_turn = turn_id.clone();
        let guard = deliver::Guard::new(move || chat.borrow().as_ref().is_some_and(|st| st.is_current_step(&guard_turn, index)));
        let speaking = crate::bot::crew::speaking_for(ctx, &turn_id, self.conv().is_some_and(|(_, kind)| kind.is_group()));
        // `bot::image` carries out a picture step and hands every other step to delivery.
        Some(crate::bot::image::run_step(&speaking, &guard, conv, &turn_id, index, &due.step, due.default_reply).await)
    }

    /// What a step's result means for the plan.
    async fn after_step(&self, ctx: &Ctx, due: &DueStep, calls: &[Option<usize>], result: std::result::Result<StepOutcome, deliver::StepError>) -> Next {
        let (turn_id, index) = (due.turn_id.as_str(), due.index);
        match result {
            Err(deliver::StepError::Cancelled) => {
                worker::console_log!("turn {turn_id} step {index}: cancelled before it was sent");
                Next::Stop
            }
            Ok(outcome) => {
                // It was carried out (the guard held at the call); record that truthfully
                // even if a new message cancelled the plan while Telegram answered.
                let current = self.with(|st| st.is_current_step(turn_id, index)).await;
                if !current {
                    answer::record_step_outcome(ctx, turn_id, calls, index, &outcome).await;
                    return Next::Stop;
                }
                // Its outcome, for the model's later turns (nothing to write for a step that
                // answers no function call): the turn's row says `done` since its answer was
                // recorded, and its sends are recorded by their keys (a crash before the
                // state's write repeats the step, which finds them).
                answer::record_steps(ctx, turn_id, calls, &[(index, outcome)], None).await;
                Next::Done
            }
            Err(deliver::StepError::Yield) => {
                worker::console_log!("turn {turn_id} step {index}: continuing in the next invocation");
                Next::Stop
            }
            Err(deliver::StepError::Retry { error, after_ms }) => {
                worker::console_warn!("turn {turn_id} step {index}: {error}");
                let (now, lim) = (now_ms(), Self::limits(ctx));
                self.update(|st| st.step_failed(turn_id, index, 1, now, after_ms, &lim)).await;
                Next::Retry(StepRetry { turn_id: turn_id.to_string(), step: index, error, after_ms })
            }
            Err(deliver::StepError::Fatal { error, blocked }) => {
                worker::console_warn!("turn {turn_id} step {index} failed: {error}");
                let failed = [(index, StepOutcome::Failed { error: error.clone() })];
                match after_fatal(&due.step, blocked) {
                    AfterFailure::DropPlan => {
                        answer::record_steps(ctx, turn_id, calls, &failed, Some((TurnStatus::Failed, Some(error)))).await;
                        self.update(|st| st.drop_plan(turn_id)).await;
                        Next::Stop
                    }
                    AfterFailure::Skip => {
                        answer::record_steps(ctx, turn_id, calls, &failed, None).await;
                        Next::Done
                    }
                }
            }
        }
    }
}

/// Subrequests one plan step may cost (its outbox read, the send, the mark).
const STEP_COST: u32 = agent_core::chat_state::effects::OWED_SEND_COST;

/// The plan step due now, with the message it threads to by default.
struct DueStep {
    turn_id: String,
    index: usize,
    step: Step,
    default_reply: Option<i64>,
    /// The plan's step → function-call mapping, when the state has it.
    step_calls: Option<Vec<Option<usize>>>,
}

impl DueStep {
    fn of(st: &ChatState, now: i64, kind: ChatKind) -> Option<DueStep> {
        let p = st.plan().filter(|p| !p.waiting_job && now >= p.not_before_ms)?;
        let step = p.current()?.clone();
        let default_reply = default_reply_to(kind.is_group(), &p.steps, p.next, p.target_message_id);
        Some(DueStep { turn_id: p.turn_id.clone(), index: p.next, step, default_reply, step_calls: p.step_calls.clone() })
    }
}

/// What the plan does after a step.
enum Next {
    /// Carried out (or skipped): marked done with the next step's start, in one write.
    Done,
    Stop,
    Retry(StepRetry),
}
