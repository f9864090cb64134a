//! Queueing the next attempt of work that failed in the object (a turn, a step), or giving it
//! up when it ran out of attempts. The jobs themselves, when they come back, and their dead
//! letters are the core's loop (`chat_state::job`, over `chat::Host`).
//!
//! Invariants (INVARIANTS.md): "Every waiting state has a deadline" (a step retry that
//! cannot be queued comes back through the alarm at its deadline).

use super::ChatObject;
use agent_core::chat_state::job::StepRetry;
use crate::config::{now_ms, random_unit, Ctx};
use crate::outbound::queues;
use crate::storage;
use agent_core::background::jobs::{max_attempts, next_move, Job, JobOutcome, NextMove};

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
}
