//! Retry jobs and dead letters that reach the object: a turn's or a step's next attempt, the
//! queueing of a step's retry, and giving up when a job ran out of attempts.
//!
//! Invariants (INVARIANTS.md): "Every waiting state has a deadline" (a step retry that
//! cannot be queued comes back through the alarm at its deadline). Also: a job for work that
//! finished or was superseded meanwhile does nothing.

use super::{ChatObject, StepRetry};
use crate::config::{now_ms, random_unit, Ctx};
use crate::outbound::queues;
use crate::storage;
use agent_core::background::jobs::{max_attempts, next_move, Job, JobOutcome, NextMove};
use agent_core::chat_state::effects::job_deadline;

impl ChatObject {
    /// Queues the retry of a failed step (see [`Self::retry_or_give_up`]).
    pub(super) async fn queue_step_retry(&self, ctx: &Ctx, retry: StepRetry) {
        let Some((conv, _)) = self.conv() else { return };
        let job = Job::Step { conv, turn_id: retry.turn_id, step: retry.step, attempt: 1 };
        self.retry_or_give_up(ctx, job, retry.error, retry.after_ms).await;
    }

    /// Queues the next attempt of work that failed in this object (a turn run from the alarm,
    /// or a step), or, when it ran out of attempts, gives it up: the user is told now and the
    /// dead letter is the operator's record (written here if the queue cannot take it). A
    /// retry that cannot be queued comes back through the alarm at the work's deadline.
    pub(super) async fn retry_or_give_up(&self, ctx: &Ctx, job: Job, error: String, after_ms: Option<u64>) {
        let max = max_attempts(&job, ctx.cfg.max_turn_attempts, ctx.cfg.max_send_attempts);
        match next_move(&job, &JobOutcome::Retry { error, after_ms }, max, ctx.cfg.retry_base_ms, random_unit()) {
            NextMove::DeadLetter { job, error } => {
                if let Job::Turn { turn_id, .. } | Job::Step { turn_id, .. } = &job {
                    self.give_up(ctx, turn_id, &error).await;
                }
                if !queues::apply(ctx, NextMove::DeadLetter { job: job.clone(), error: error.clone() }).await {
                    let body = serde_json::to_string(&job).unwrap_or_default();
                    let conv = job.conv();
                    let _ = storage::failures::record_failure(&ctx.db(), "dead_letter", Some(&job.key()), Some(&conv), &error, Some(&body), now_ms()).await;
                }
            }
            next => {
                if !queues::apply(ctx, next).await {
                    worker::console_error!("job {}: retry not queued; the alarm takes it over at its deadline", job.key());
                }
            }
        }
    }

    pub(super) async fn job(&self, ctx: &Ctx, job: Job) -> JobOutcome {
        let Some((conv, _)) = self.conv() else { return JobOutcome::Done };
        match job {
            Job::Turn { turn_id, attempt, .. } => {
                let Some(turn) = self.update(|st| st.resume_turn(&turn_id, attempt, now_ms())).await else {
                    return JobOutcome::Done; // finished or superseded meanwhile
                };
                let result = self.run_turn(ctx, &conv, &turn).await;
                self.after_turn(ctx, &conv, &turn_id, result).await
            }
            Job::Step { turn_id, step, attempt, .. } => {
                if !self.update(|st| st.resume_step(&turn_id, step)).await {
                    return JobOutcome::Done;
                }
                let outcome = match self.advance(ctx).await {
                    Some(retry) if retry.turn_id == turn_id && retry.step == step => {
                        // The consumer backs off by this job's attempt: so does the deadline.
                        let deadline = job_deadline(now_ms(), attempt, retry.after_ms, &Self::limits(ctx));
                        self.update(|st| st.step_waiting(&turn_id, step, deadline)).await;
                        JobOutcome::Retry { error: retry.error, after_ms: retry.after_ms }
                    }
                    Some(other) => {
                        self.queue_step_retry(ctx, other).await;
                        JobOutcome::Done
                    }
                    None => JobOutcome::Done,
                };
                outcome
            }
            Job::Consolidate { .. } | Job::Guest { .. } => JobOutcome::Done,
        }
    }

    pub(super) async fn dead(&self, ctx: &Ctx, job: Job) {
        match &job {
            Job::Turn { turn_id, .. } | Job::Step { turn_id, .. } => {
                self.give_up(ctx, turn_id, "gave up after the last attempt").await;
            }
            Job::Consolidate { .. } | Job::Guest { .. } => {}
        }
    }
}
