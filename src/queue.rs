//! The queue consumer: retry jobs run (turns and sends through their chat object,
//! consolidation here), then are acked, requeued with backoff, or dead-lettered; dead letters
//! are recorded for the operator and the user gets one apology.
//!
//! Invariant: every message is acked or retried individually and the handler always returns
//! Ok (an Err would take down the instance and redeliver the whole batch).

use crate::chat;
use crate::env::{now_ms, random_unit, Ctx, DEAD_LETTERS, DEAD_LETTER_QUEUE, JOBS};
use crate::store;
use agent_core::jobs::{max_attempts, next_move, Job, JobOutcome, NextMove};
use worker::{MessageBatch, MessageBuilder, MessageExt, Result};

/// Puts a job on the jobs queue after `delay_secs`.
pub async fn enqueue(ctx: &Ctx, job: &Job, delay_secs: u32) -> Result<()> {
    ctx.meter.add(1);
    let queue = ctx.env.queue(JOBS)?;
    queue.send(MessageBuilder::new(job.clone()).delay_seconds(delay_secs).build()).await
}

/// Sends a job that ran out of attempts to the dead-letter queue.
pub async fn dead_letter(ctx: &Ctx, job: &Job, error: &str) -> Result<()> {
    ctx.meter.add(1);
    let queue = ctx.env.queue(DEAD_LETTERS)?;
    queue.send(DeadLetter { job: job.clone(), error: error.to_string() }).await
}

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
pub struct DeadLetter {
    pub job: Job,
    pub error: String,
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

async fn run_job(ctx: &Ctx, job: &Job) -> JobOutcome {
    match job {
        Job::Turn { conv, .. } | Job::Step { conv, .. } => match chat::call_object(ctx, conv, "/job", job).await {
            Ok(mut resp) if resp.status_code() == 200 => resp
                .json::<JobOutcome>()
                .await
                .unwrap_or(JobOutcome::Retry { error: "unreadable outcome".into(), after_ms: None }),
            Ok(resp) => JobOutcome::Retry { error: format!("chat object answered {}", resp.status_code()), after_ms: None },
            Err(e) => JobOutcome::Retry { error: format!("chat object unreachable: {e}"), after_ms: None },
        },
        Job::Consolidate { conv, .. } => crate::consolidate::run(ctx, conv).await,
    }
}

/// Records a dead letter and tells the chat (once: the failures table is unique per job key).
async fn handle_dead(ctx: &Ctx, dead: &DeadLetter) -> bool {
    let body = serde_json::to_string(&dead.job).unwrap_or_default();
    let first = match store::record_failure(&ctx.db(), "dead_letter", Some(&dead.job.key()), Some(dead.job.conv()), &dead.error, Some(&body), now_ms()).await {
        Ok(first) => first,
        Err(e) => {
            worker::console_error!("could not record dead letter {}: {e}", dead.job.key());
            return false;
        }
    };
    if first && matches!(dead.job, Job::Turn { .. } | Job::Step { .. }) {
        if let Err(e) = chat::call_object(ctx, dead.job.conv(), "/dead", &dead.job).await {
            worker::console_error!("could not tell {} about its dead letter: {e}", dead.job.conv());
            return false;
        }
    }
    true
}

pub async fn consume(batch: MessageBatch<serde_json::Value>, ctx: &Ctx) -> Result<()> {
    let dead_queue = batch.queue() == DEAD_LETTER_QUEUE;
    for message in batch.messages()? {
        let body = message.body().clone();
        if dead_queue {
            // A dead letter is either ours ({job, error}) or a raw job the platform moved here
            // after the consumer itself kept failing.
            let dead = serde_json::from_value::<DeadLetter>(body.clone()).ok().or_else(|| {
                serde_json::from_value::<Job>(body).ok().map(|job| DeadLetter { job, error: "delivery failed repeatedly".into() })
            });
            match dead {
                Some(d) if !handle_dead(ctx, &d).await => message.retry(),
                _ => message.ack(),
            }
            continue;
        }
        let job: Job = match serde_json::from_value(body) {
            Ok(j) => j,
            Err(e) => {
                worker::console_error!("dropping an unreadable job: {e}");
                message.ack();
                continue;
            }
        };
        let outcome = run_job(ctx, &job).await;
        let max = max_attempts(&job, ctx.cfg.max_turn_attempts, ctx.cfg.max_send_attempts);
        if apply(ctx, next_move(&job, &outcome, max, ctx.cfg.retry_base_ms, random_unit())).await {
            message.ack();
        } else {
            message.retry();
        }
    }
    Ok(())
}
