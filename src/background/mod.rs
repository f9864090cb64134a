//! # background: work no person is waiting on
//!
//! [`queue`]: the queue consumer (retry jobs through their chat object, dead letters).
//! [`cron`]: the scheduled handler (consolidation fan-out, pruning of the tables that only
//! grow). [`consolidate`]: long-term memory jobs.
//!
//! Invariant: every handler here returns normally (a failed job is retried or dead-lettered,
//! a failed cron step is logged and the next run tries again).

pub mod consolidate;
pub mod cron;
pub mod queue;
