//! The queue consumer: retry jobs run (turns and sends through their chat object,
//! consolidation here), then are acked, requeued with backoff, or dead-lettered; dead letters
//! are recorded for the operator and the user gets one apology.
//!
//! Invariants:
//! - Every message is acked or retried individually and the handler always returns Ok (an Err
//!   would take down the instance and redeliver the whole batch).
//! - A batch is one invocation with one subrequest budget: a job that would not fit goes back
//!   on the queue as it is, for a fresh invocation.
//! - A dead letter is acked only after its chat object took it (200) and it was recorded.

use crate::config::{now_ms, random_unit, Ctx};
use crate::outbound::objects::{self, ChatRequest};
use crate::outbound::queues::{apply, enqueue, DeadLetter};
use crate::storage;
use agent_core::background::jobs::{max_attempts, next_move, Job, JobOutcome};
use worker::{MessageBatch, MessageExt, Result};

/// Subrequests kept free for one job (its own work plus requeueing the next).
const JOB_RESERVE: u32 = 12;
const BUSINESS_RESERVE: u32 = 24;

async fn run_job(ctx: &Ctx, job: &Job) -> JobOutcome {
    match job {
        Job::Turn { conv, .. } | Job::Step { conv, .. } => match objects::call(ctx, conv, &ChatRequest::Job(job.clone())).await {
            Ok(mut resp) if resp.status_code() == 200 => resp
                .json::<JobOutcome>()
                .await
                .unwrap_or(JobOutcome::Retry { error: "unreadable outcome".into(), after_ms: None }),
            Ok(resp) => JobOutcome::Retry { error: format!("chat object answered {}", resp.status_code()), after_ms: None },
            Err(e) => JobOutcome::Retry { error: format!("chat object unreachable: {e}"), after_ms: None },
        },
        Job::Consolidate { conv, .. } => super::consolidate::run(ctx, *conv).await,
        Job::Guest { .. } => crate::bot::guest::run(ctx, job).await,
        Job::Business { .. } => crate::bot::business::run(ctx, job).await,
    }
}

/// Tells the chat object about a dead letter (it gives up the turn and owes the user one
/// apology, idempotently), then records it for the operator (once: the failures table is
/// unique per job key). Returns false when either could not be done: the message is retried,
/// never acked unhandled.
async fn handle_dead(ctx: &Ctx, dead: &DeadLetter) -> bool {
    if matches!(dead.job, Job::Turn { .. } | Job::Step { .. }) {
        match objects::call(ctx, &dead.job.conv(), &ChatRequest::Dead(dead.job.clone())).await {
            Ok(resp) if resp.status_code() == 200 => {}
            Ok(resp) => {
                worker::console_error!("chat {} answered {} to its dead letter", dead.job.conv(), resp.status_code());
                return false;
            }
            Err(e) => {
                worker::console_error!("could not tell {} about its dead letter: {e}", dead.job.conv());
                return false;
            }
        }
    }
    // A guest job's placeholder gets its apology (or the dead letter comes again).
    if let Job::Guest { query_id, caller, data, .. } = &dead.job {
        let inline = agent_core::guest::GuestJob::from_data(data).map(|g| g.inline_message_id);
        if let Some(inline) = inline {
            if !crate::bot::guest::give_up(ctx, query_id, *caller, &inline, agent_core::guest::FAILED_TEXT).await {
                return false;
            }
        }
    }
    // A Business burst's owner is told a contact waits (or the dead letter comes again).
    if matches!(dead.job, Job::Business { .. }) && !crate::bot::business::give_up(ctx, &dead.job).await {
        return false;
    }
    let body = serde_json::to_string(&dead.job).unwrap_or_default();
    if let Err(e) = storage::failures::record_failure(&ctx.db(), "dead_letter", Some(&dead.job.key()), Some(&dead.job.conv()), &dead.error, Some(&body), now_ms()).await {
        worker::console_error!("could not record dead letter {}: {e}", dead.job.key());
        return false;
    }
    true
}

pub async fn consume(batch: MessageBatch<serde_json::Value>, ctx: &Ctx) -> Result<()> {
    let dead_queue = crate::config::env::is_dead_letter_queue(&ctx.env, &batch.queue());
    let messages = batch.messages()?;
    ctx.meter.queue_received(messages.len() as u32);
    for message in messages {
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
        // The whole batch is one invocation: when its budget is nearly spent, the job goes back
        // on the queue unchanged (same attempt) for a fresh invocation.
        // A Business job: a model call, its reads and writes, a send and the withdrawals.
        let reserve = if matches!(job, Job::Business { .. }) { BUSINESS_RESERVE } else { JOB_RESERVE };
        if ctx.meter.count() + reserve > crate::config::SUBREQUEST_BUDGET {
            match enqueue(ctx, &job, 1).await {
                Ok(()) => message.ack(),
                Err(_) => message.retry(),
            }
            continue;
        }
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
