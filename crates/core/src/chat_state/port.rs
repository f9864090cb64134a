//! The chat object as its events' loops see it: its state and the clock. Each event's loop
//! ([`super::alarm`], [`super::arrival`], [`super::job`], [`super::schedule_due`],
//! [`super::api_turn`]) takes a host that is this port plus
//! the event's own outbound work; the chat object implements them over its storage, and the
//! loops' native tests over a fake in memory.
//!
//! Invariants (INVARIANTS.md): "The state decides; the object asks".

use super::{ChatState, Timing};

/// The state and the clock, as every event's loop needs them.
#[allow(async_fn_in_trait)] // the object runs on one thread (a Durable Object); no Send needed
pub trait StatePort {
    /// Asks the state, with the timing for it; the object writes it once if it changed.
    async fn ask<R>(&self, f: impl FnOnce(&mut ChatState, &Timing) -> R) -> R;
    /// Reads the state; never a write (not even of what changed in memory before).
    async fn peek<R>(&self, f: impl FnOnce(&ChatState) -> R) -> R;
    /// The clock (ms).
    fn now(&self) -> i64;
    /// A line for the operator's log.
    fn log(&self, line: &str);
}
