//! The cron (`[triggers] crons` in wrangler.toml): re-arms chat objects whose next schedule
//! run has passed without firing (a lost alarm never loses a reminder), queues one
//! consolidation job per conversation with new messages, ends guest placeholders whose answer
//! never went out (`bot::guest::sweep`), prunes what is past retention, then withdraws
//! Business suggestions past Telegram's 24 hours (`bot::business::expire`, as far as the
//! invocation's subrequests allow).

use crate::config::{now_ms, Ctx};
use crate::outbound::objects::{self, ChatRequest};
use crate::storage;

/// Runs the scheduled work; each step logs its own outcome and never fails the run.
pub async fn run(ctx: &Ctx, cron: &str) {
    match rearm_overdue_schedules(ctx).await {
        Ok(0) => {}
        Ok(n) => worker::console_warn!("cron {cron}: {n} chats had a schedule overdue (a lost alarm?); re-armed"),
        Err(e) => worker::console_error!("cron {cron}: could not check schedules: {e}"),
    }
    match super::consolidate::enqueue_due(ctx).await {
        Ok(n) => worker::console_log!("cron {cron}: queued {n} consolidation jobs"),
        Err(e) => worker::console_error!("cron {cron}: could not queue consolidation: {e}"),
    }
    let ended = crate::bot::guest::sweep(ctx).await;
    if ended > 0 {
        worker::console_log!("cron {cron}: {ended} guest placeholders ended with an apology");
    }
    match storage::retention::prune(&ctx.db(), now_ms(), ctx.cfg.retention_days).await {
        Ok(pruned) if pruned.iter().any(|(_, n)| *n > 0) => worker::console_log!("cron {cron}: pruned {pruned:?}"),
        Ok(_) => {}
        Err(e) => worker::console_error!("cron {cron}: could not prune old rows: {e}"),
    }
    // Last: it stops where the invocation's subrequests run short.
    match crate::bot::business::expire(ctx).await {
        Ok(0) => {}
        Ok(n) => worker::console_log!("cron {cron}: {n} Business suggestions past Telegram's 24 hours withdrawn"),
        Err(e) => worker::console_error!("cron {cron}: could not withdraw expired Business suggestions: {e}"),
    }
}

/// Schedules this late (past their run) without firing count as overdue: their object's alarm
/// was lost. Earlier than that the alarm is about to fire them itself.
const OVERDUE_AFTER_MS: i64 = 60_000;
/// Chat objects re-armed per cron run at most (the rest in the next run).
const REARM_PER_RUN: i64 = 50;

/// Tells each chat object with an overdue schedule to re-read it; the object fires it (once:
/// the run is claimed in D1) or skips it if it is too late.
async fn rearm_overdue_schedules(ctx: &Ctx) -> worker::Result<usize> {
    let convs = storage::schedules::overdue(&ctx.db(), now_ms() - OVERDUE_AFTER_MS, REARM_PER_RUN).await?;
    let mut n = 0;
    for conv in convs {
        match objects::notify(ctx, &conv, &ChatRequest::Schedules).await {
            Ok(()) => n += 1,
            Err(e) => worker::console_error!("cron: chat {conv} could not be re-armed: {e}"),
        }
    }
    Ok(n)
}
