//! A running turn's one stop switch: what the person's Stop and an abandoned early start throw,
//! and what a model call waits on beside its work, woken by the switch itself (no timer looks
//! for it). It lives with the turn (the chat object keeps it in `chat_state::running::Running`
//! while the turn is in flight); the edge's streamed call (`outbound::gemini_stream`) aborts
//! its request when it is thrown.

use futures::future::{select, Either};
use std::cell::{Cell, RefCell};
use std::task::{Poll, Waker};

/// Why a turn's stop switch was thrown, which decides what becomes of what the model wrote so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The person pressed Stop (Telegram's Stop button): the answer so far is the answer,
    /// marked stopped; what of it is sent is `STOP_KEEPS`'s (`core::telegram::drafts::stopped_steps`).
    Person,
    /// An early start a newer message overtook (the chat object's `abandon_turn`): what it wrote is
    /// dropped, the call fails as `ModelError::Abandoned`.
    Abandoned,
}

/// A running turn's one stop switch: once thrown, its model call ends at once and it makes no
/// other. The chat object holds it with the turn in flight (`chat_state::running::Running`) and throws it (`chat/stop.rs` in the edge), for the person's Stop or an abandoned
/// early start; the first reason thrown is the one that holds.
#[derive(Default)]
pub struct Stop {
    reason: Cell<Option<StopReason>>,
    waiting: RefCell<Vec<Waker>>,
}

impl Stop {
    /// Throws the switch for `reason` (kept if it was thrown already): every wait on it ends.
    pub fn throw(&self, reason: StopReason) {
        if self.reason.get().is_none() {
            self.reason.set(Some(reason));
        }
        for w in self.waiting.borrow_mut().drain(..) {
            w.wake();
        }
    }

    pub fn is_thrown(&self) -> bool {
        self.reason.get().is_some()
    }

    /// Why it was thrown (`None`: it was not).
    pub fn reason(&self) -> Option<StopReason> {
        self.reason.get()
    }

    /// Resolves once the switch is thrown.
    pub async fn thrown(&self) {
        futures::future::poll_fn(|cx| {
            if self.is_thrown() {
                return Poll::Ready(());
            }
            let mut waiting = self.waiting.borrow_mut();
            if !waiting.iter().any(|w| w.will_wake(cx.waker())) {
                waiting.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }

    /// Resolves once `stop` is thrown; never without one.
    pub async fn thrown_if(stop: Option<&Stop>) {
        match stop {
            Some(stop) => stop.thrown().await,
            None => futures::future::pending().await,
        }
    }

    /// Runs `work` unless the switch is thrown first (`None`), which drops it.
    pub async fn unless_thrown<T>(stop: Option<&Stop>, work: impl std::future::Future<Output = T>) -> Option<T> {
        let thrown = Stop::thrown_if(stop);
        futures::pin_mut!(work, thrown);
        match select(work, thrown).await {
            Either::Left((out, _)) => Some(out),
            Either::Right(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_reason_thrown_holds_and_wakes_the_work_at_once() {
        let stop = Stop::default();
        assert!(!stop.is_thrown());
        stop.throw(StopReason::Abandoned);
        stop.throw(StopReason::Person);
        assert_eq!(stop.reason(), Some(StopReason::Abandoned));
        // Work that never ends is dropped once the switch is thrown; without one it runs.
        let never = futures::future::pending::<u8>();
        assert_eq!(futures::executor::block_on(Stop::unless_thrown(Some(&stop), never)), None);
        assert_eq!(futures::executor::block_on(Stop::unless_thrown(None, async { 7 })), Some(7));
    }
}
