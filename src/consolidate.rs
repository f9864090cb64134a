//! Memory consolidation jobs (cron fan-out). Not built yet: jobs are acknowledged.

use crate::env::Ctx;
use agent_core::jobs::JobOutcome;

pub async fn run(_ctx: &Ctx, conv: &str) -> JobOutcome {
    worker::console_log!("consolidation of {conv} is not implemented yet");
    JobOutcome::Done
}
