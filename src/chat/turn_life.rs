//! A turn's life in the chat object: starting one when the debounce is over, driving it (the
//! bot answers it, `bot::answer`; or taking it over from a dead instance), and what follows: a plan to carry out, a retry job, or giving
//! up and apologising.
//!
//! Invariants (INVARIANTS.md): "Every waiting state has a deadline", "One apology, never
//! lost", "A scheduled turn keeps its place" (given up, the scheduled text is owed in the
//! state, the run claimed, the turn ended, so a later model answer never also goes out).

use super::ChatObject;
use crate::bot::{answer, deliver};
use crate::config::{now_ms, random_unit, Ctx};
use crate::storage;
use agent_core::background::jobs::{Job, JobOutcome};
use agent_core::chat::status::TurnStatus;
use agent_core::chat_state::effects::{turn_end, AfterTurn, Owed, Transient};
use agent_core::chat_state::{GivenUp, TurnRun};
use agent_core::conversation::ConvKey;

impl ChatObject {
    pub(super) async fn start_turn(&self, ctx: &Ctx) {
        let Some((conv, _)) = self.conv() else {
            worker::console_error!("a chat object without a conversation key was asked for a turn");
            self.update(|st| st.forget_burst()).await;
            return;
        };
        let nonce = u64::from_le_bytes(crate::config::random_bytes::<8>());
        // The single bot's turn, or the next persona's when a crew speaks here.
        let Some(turn) = self.begin_due_turn(ctx, &conv, nonce).await else { return };
        self.drive_turn(ctx, turn).await;
    }

    /// Drives a turn from the alarm (a new one, or one taken over from a dead instance): the bot
    /// answers it, then `after_turn`. If it fails transiently, its next attempt goes through
    /// the jobs queue.
    pub(super) async fn drive_turn(&self, ctx: &Ctx, turn: TurnRun) {
        let Some((conv, _)) = self.conv() else { return };
        let result = self.run_turn(ctx, &conv, &turn).await;
        let outcome = self.after_turn(ctx, &conv, &turn.turn_id, result).await;
        if let JobOutcome::Retry { error, after_ms } = outcome {
            let job = Job::Turn { conv, turn_id: turn.turn_id.clone(), attempt: turn.attempt };
            self.retry_or_give_up(ctx, job, error, after_ms).await;
        }
    }

    /// Runs a turn here (the bot answers it), holding it as this instance's turn in flight
    /// with its stop switch while it runs; armed first for the re-check, in case this instance
    /// dies mid-turn.
    pub(super) async fn run_turn(&self, ctx: &Ctx, conv: &ConvKey, turn: &TurnRun) -> std::result::Result<answer::Answer, answer::AnswerError> {
        let live = self.live(turn);
        self.running.borrow_mut().turn_begins(&turn.turn_id, Some(live.stop.clone()));
        worker::console_log!("turn {} runs (attempt {})", turn.turn_id, turn.attempt);
        self.arm(ctx).await;
        let rows = self.running.borrow().rows();
        let result = answer::answer_turn(ctx, conv, turn, Some(live), Some(&rows)).await;
        self.running.borrow_mut().turn_ends();
        result
    }

    /// Handles a turn's result. `Retry` means the turn now waits for a retry job, which the
    /// caller queues (the alarm) or asks the consumer to queue (a job).
    pub(super) async fn after_turn(
        &self,
        ctx: &Ctx,
        conv: &ConvKey,
        turn_id: &str,
        result: std::result::Result<answer::Answer, answer::AnswerError>,
    ) -> JobOutcome {
        match result {
            Ok(answer::Answer::Planned { steps, schedules_changed, step_calls }) => {
                // The state first (no await before it: the turn is not in flight any more, and
                // an alarm in between would take it for a dead one), then the schedules' hint.
                // A crew persona's answer also moves the cycle on (a pass sends nothing).
                let (finish, nothing_to_send) = self.finish_any_turn(ctx, turn_id, steps, step_calls).await;
                if schedules_changed {
                    self.refresh_schedules(ctx).await;
                }
                // What the answer means (`effects::turn_end`): silence on purpose is done (its
                // empty_reason recorded), a stale answer is replanned by the burst's own turn.
                let end = turn_end(finish, nothing_to_send);
                if let Some(status) = end.status {
                    let _ = storage::turns::set_turn_status(&ctx.db(), turn_id, status, None, now_ms()).await;
                }
                match end.then {
                    // A step's own retry goes on the queue as a step job.
                    AfterTurn::Advance => {
                        if let Some(retry) = self.advance(ctx).await {
                            self.queue_step_retry(ctx, retry).await;
                        }
                    }
                    AfterTurn::Replan => {
                        worker::console_log!("turn {turn_id}: new messages arrived during the model call; replanning");
                        // The stale answer's draft comes down; "Thinking…" (or typing) again.
                        if let Some((conv, kind)) = self.conv() {
                            crate::bot::stream::first_sign_soon(ctx, conv, kind, true);
                        }
                    }
                    AfterTurn::Nothing => {}
                }
                JobOutcome::Done
            }
            Ok(answer::Answer::Abandoned) => {
                // An early start a newer message abandoned (recorded as stale, its call charged):
                // the state already holds the burst for its own turn.
                worker::console_log!("turn {turn_id}: early start abandoned for a newer message; the burst gets its own turn");
                JobOutcome::Done
            }
            Ok(answer::Answer::NothingToDo) => {
                self.nothing_to_answer(ctx, turn_id).await;
                let _ = storage::turns::set_turn_status(&ctx.db(), turn_id, TurnStatus::Done, Some("nothing new".into()), now_ms()).await;
                JobOutcome::Done
            }
            Err(answer::AnswerError::Transient { error, after_ms }) => {
                let (lim, fallback_ms) = (Self::limits(ctx), ctx.cfg.schedule_limits.fallback_ms);
                if self.update(|st| st.turn_failed(turn_id, now_ms(), after_ms, fallback_ms, &lim)).await == Transient::FallBack {
                    // A reminder does not wait for the whole retry budget: its own text goes
                    // out now, and the turn is over, so no model-written version follows.
                    worker::console_warn!("turn {turn_id}: the scheduled run's model failed ({error}); sending its text");
                    self.give_up(ctx, turn_id, &format!("the model failed; the reminder's own text was sent: {error}")).await;
                    return JobOutcome::Done;
                }
                JobOutcome::Retry { error, after_ms }
            }
            Err(answer::AnswerError::Permanent { error }) => {
                worker::console_error!("turn {turn_id} failed for good: {error}");
                let _ = storage::failures::record_failure(&ctx.db(), "error", Some(&format!("turn:{turn_id}")), Some(conv), &error, None, now_ms()).await;
                self.give_up(ctx, turn_id, &error).await;
                JobOutcome::Done
            }
        }
    }

    /// Ends a turn or plan that cannot be completed, and tells the user (once): the apology is
    /// owed in the state first (`ChatState::give_up_any`), so it is sent even if this
    /// invocation cannot. A crew persona's turn is skipped instead (one apology only if every
    /// persona failed); a scheduled run that is no longer this turn's is owed nothing.
    pub(super) async fn give_up(&self, ctx: &Ctx, turn_id: &str, error: &str) {
        let still_ours = self.scheduled_run_still_ours(ctx, turn_id).await;
        let crew = super::crew::lineup(ctx);
        let now = now_ms();
        let given = self.update(|st| st.give_up_any(turn_id, &crew, still_ours, now)).await;
        if let GivenUp::Persona { .. } = given {
            worker::console_warn!("crew: turn {turn_id} failed and is skipped: {error}");
        }
        if let Err(e) = storage::turns::set_turn_status(&ctx.db(), turn_id, TurnStatus::Dead, Some(error.to_string()), now_ms()).await {
            worker::console_error!("turn {turn_id}: could not record that it was given up: {e}");
        }
        match given {
            GivenUp::Persona { cycle_end } => {
                if let Some(end) = cycle_end {
                    self.cycle_ended(end);
                }
                if cycle_end == Some(agent_core::crew::End::AllFailed) {
                    worker::console_error!("crew: every persona failed; the chat gets one apology");
                    self.send_owed_messages(ctx).await;
                }
            }
            GivenUp::NothingOwed => {}
            GivenUp::Owed => {
                self.send_owed_messages(ctx).await;
                // A schedule the failed turn created or cancelled is not lost from the alarm either.
                self.refresh_schedules(ctx).await;
            }
        }
    }

    /// Whether a scheduled turn being given up still holds its run: claimed by it now (so the
    /// run cannot fire again after its text is sent) or before. True for an ordinary turn, and
    /// when D1 cannot say (the text then goes out: never lost, at worst twice).
    async fn scheduled_run_still_ours(&self, ctx: &Ctx, turn_id: &str) -> bool {
        let run = self.with(|st| st.scheduled_run_of(turn_id)).await;
        let Some(run) = run else { return true };
        match storage::schedules::claim(&ctx.db(), run.schedule_id, run.due_ms, run.next_ms, turn_id, now_ms()).await {
            Ok(ours) => ours,
            Err(e) => {
                worker::console_error!("turn {turn_id}: schedule #{} could not be claimed before giving up: {e}", run.schedule_id);
                true
            }
        }
    }

    /// Sends the owed messages that are due (apologies, and scheduled runs' own texts), while
    /// they fit in this invocation: the core's loop (`chat_state::alarm::send_owed_messages`).
    pub(super) async fn send_owed_messages(&self, ctx: &Ctx) {
        agent_core::chat_state::alarm::send_owed_messages(&super::Host { obj: self, ctx }, &Self::limits(ctx)).await;
    }

    /// Sends turn `turn_id`'s owed message and says how it went: one the chat can never
    /// receive (blocked) is `Never`, one that cannot go now (Telegram busy, out of room) waits.
    pub(super) async fn deliver_owed(&self, ctx: &Ctx, turn_id: &str, text: &str) -> Owed {
        let Some((conv, _)) = self.conv() else { return Owed::Never };
        let key = format!("{turn_id}/apology");
        match deliver::send_text(ctx, &conv, &key, text, None, Some(turn_id)).await {
            Ok(_) => Owed::Sent,
            Err(e @ deliver::StepError::Fatal { .. }) => {
                worker::console_error!("turn {turn_id}: the apology cannot be sent: {}", e.message());
                Owed::Never
            }
            Err(e) => {
                worker::console_warn!("turn {turn_id}: the apology waits ({})", e.message());
                match e {
                    deliver::StepError::Retry { after_ms, .. } => Owed::Retry { after_ms, jitter: random_unit() },
                    _ => Owed::OutOfRoom, // the next invocation has a fresh budget
                }
            }
        }
    }
}
