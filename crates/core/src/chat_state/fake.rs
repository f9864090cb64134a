//! What the event loops' native tests share: the timing and limits they run with, and the
//! chat object's state in memory ([`Mem`]), written the way the object writes it: an ask
//! writes whenever the state differs from what was last written (so also a change made in
//! memory only before it, like the alarm's count); a peek never writes.

use super::effects::Limits;
use super::{ChatState, Timing, JOB_GRACE_MS, TURN_WATCHDOG_MS};
use std::cell::{Cell, RefCell};

pub const T: Timing = Timing { debounce_ms: 1000, debounce_max_ms: 5000, watchdog_ms: TURN_WATCHDOG_MS, job_grace_ms: JOB_GRACE_MS, adaptive: None, early_start: false };
pub const L: Limits = Limits { max_turn_attempts: 3, max_send_attempts: 2, retry_base_ms: 2000, job_grace_ms: 300_000, subrequest_budget: 35, turn_start_max: 6 };

/// The object's state, its last written form, the writes so far and a clock.
pub struct Mem {
    pub st: RefCell<ChatState>,
    written: RefCell<String>,
    pub writes: Cell<u32>,
    pub now: Cell<i64>,
}

impl Default for Mem {
    fn default() -> Self {
        Mem { st: Default::default(), written: RefCell::new(super::stored(&ChatState::default())), writes: Cell::new(0), now: Cell::new(0) }
    }
}

impl Mem {
    pub fn ask<R>(&self, f: impl FnOnce(&mut ChatState, &Timing) -> R) -> R {
        let r = f(&mut self.st.borrow_mut(), &T);
        let now = super::stored(&self.st.borrow());
        if now != *self.written.borrow() {
            self.writes.set(self.writes.get() + 1);
            *self.written.borrow_mut() = now;
        }
        r
    }

    pub fn peek<R>(&self, f: impl FnOnce(&ChatState) -> R) -> R {
        f(&self.st.borrow())
    }

    /// What a test set up directly counts as written already.
    pub fn settle(&self) {
        *self.written.borrow_mut() = super::stored(&self.st.borrow());
    }
}

/// `StatePort` for a fake with a `mem: Mem` field.
macro_rules! state_port_over_mem {
    ($fake:ty) => {
        impl $crate::chat_state::port::StatePort for $fake {
            async fn ask<R>(&self, f: impl FnOnce(&mut $crate::chat_state::ChatState, &$crate::chat_state::Timing) -> R) -> R {
                self.mem.ask(f)
            }
            async fn peek<R>(&self, f: impl FnOnce(&$crate::chat_state::ChatState) -> R) -> R {
                self.mem.peek(f)
            }
            fn now(&self) -> i64 {
                self.mem.now.get()
            }
            fn log(&self, _line: &str) {}
        }
    };
}
pub(crate) use state_port_over_mem;
