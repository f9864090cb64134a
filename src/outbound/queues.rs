//! The queues: retry jobs (`JOBS`) and jobs that ran out of attempts (`DEAD_LETTERS`).

use crate::config::env::{DEAD_LETTERS, JOBS};
use crate::config::Ctx;
use agent_core::background::jobs::{Job, NextMove};
use serde::{Deserialize, Serialize};
use worker::{BatchMessageBuilder, MessageBuilder, Result};

/// What goes on the dead-letter queue: the job and its last error.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct DeadLetter {
    pub job: Job,
    pub error: String,
}

/// Puts a job on the jobs queue after `delay_secs`.
pub async fn enqueue(ctx: &Ctx, job: &Job, delay_secs: u32) -> Result<()> {
    ctx.meter.add(1);
    ctx.meter.queue_sent(1);
    let queue = ctx.env.queue(JOBS)?;
    queue.send(MessageBuilder::new(job.clone()).delay_seconds(delay_secs).build()).await
}

/// Puts several jobs on the jobs queue at once (one subrequest).
pub async fn enqueue_all(ctx: &Ctx, jobs: Vec<Job>) -> Result<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    ctx.meter.add(1);
    ctx.meter.queue_sent(jobs.len() as u32);
    ctx.env.queue(JOBS)?.send_batch(BatchMessageBuilder::new().messages(jobs).build()).await
}

/// Sends a job that ran out of attempts to the dead-letter queue.
pub async fn dead_letter(ctx: &Ctx, job: &Job, error: &str) -> Result<()> {
    ctx.meter.add(1);
    ctx.meter.queue_sent(1);
    let queue = ctx.env.queue(DEAD_LETTERS)?;
    queue.send(DeadLetter { job: job.clone(), error: error.to_string() }).await
}

/// Carries out a next move; returns false if it could not (then the message is retried).
pub async fn apply(ctx: &Ctx, next: NextMove) -> bool {
    let result = match &next {
        NextMove::Ack => Ok(()),
        NextMove::Requeue { job, delay_secs } => {
            worker::console_log!("job {} attempt {} in {delay_secs}s", job.key(), job.attempt());
            enqueue(ctx, job, *delay_secs).await
        }
        NextMove::DeadLetter { job, error } => {
            worker::console_warn!("job {} dead-lettered: {error}", job.key());
            dead_letter(ctx, job, error).await
        }
    };
    match result {
        Ok(()) => true,
        Err(e) => {
            worker::console_error!("could not queue the next move: {e}");
            false
        }
    }
}
