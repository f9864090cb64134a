//! The cron (`[triggers] crons` in wrangler.toml): queues one consolidation job per
//! conversation with new messages, then prunes what is past retention.

use crate::config::{now_ms, Ctx};
use crate::storage;

/// Runs the scheduled work; each step logs its own outcome and never fails the run.
pub async fn run(ctx: &Ctx, cron: &str) {
    match super::consolidate::enqueue_due(ctx).await {
        Ok(n) => worker::console_log!("cron {cron}: queued {n} consolidation jobs"),
        Err(e) => worker::console_error!("cron {cron}: could not queue consolidation: {e}"),
    }
    match storage::retention::prune(&ctx.db(), now_ms(), ctx.cfg.retention_days).await {
        Ok(pruned) if pruned.iter().any(|(_, n)| *n > 0) => worker::console_log!("cron {cron}: pruned {pruned:?}"),
        Ok(_) => {}
        Err(e) => worker::console_error!("cron {cron}: could not prune old rows: {e}"),
    }
}
