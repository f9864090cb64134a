//! # background: work no person is waiting on
//!
//! [`queue`]: the queue consumer (retry jobs through their chat object, dead letters).
//! [`cron`]: the scheduled handler. [`consolidate`]: long-term memory jobs. [`retention`]:
//! pruning of tables that only grow.
//!
//! Invariant: every handler here returns normally (a failed job is retried or dead-lettered,
//! a failed cron step is logged and the next run tries again).

pub mod consolidate;
pub mod cron;
pub mod queue;
pub mod retention;
