//! The synchronous API turn's loop, behind a port (`POST /api/v1/chat`): the turn is claimed
//! in one ask before any await, so two concurrent calls cannot both start one (a busy
//! conversation answers 409); the object stores the message and runs the turn; the turn ends
//! in the state whatever happened. And which running turn a Stop stops ([`ChatState::turn_to_stop`]).
//!
//! Invariants (INVARIANTS.md): "One turn at a time per conversation", "The state decides; the
//! object asks".

use super::port::StatePort;
use super::{ChatState, TurnRun};

/// What the chat object does for an API turn besides asking its state.
#[allow(async_fn_in_trait)] // the object runs on one thread (a Durable Object); no Send needed
pub trait ApiHost: StatePort {
    /// What the turn's run gives back (the edge's answer, turned into the HTTP reply there).
    type Answer;
    /// The conversation's key as text and a fresh nonce (for the turn's id).
    fn new_turn(&self) -> (String, u64);
    /// Stores the API's message and runs the turn here (held as the turn in flight while it
    /// runs); `Err`: the message could not be stored, no turn ran.
    async fn run(&self, turn: &TurnRun) -> Result<Self::Answer, String>;
}

/// How an API turn went.
#[derive(Debug, PartialEq)]
pub enum ApiTurn<A> {
    /// A turn or a plan is running: try again.
    Busy,
    /// The message could not be stored.
    NotStored(String),
    /// The turn ran.
    Ran { turn_id: String, answer: A },
}

/// An API turn (see the module doc).
pub async fn run<H: ApiHost>(host: &H) -> ApiTurn<H::Answer> {
    let now = host.now();
    let (conv, nonce) = host.new_turn();
    let Some(turn) = host.ask(|st, _| st.claim_api_turn(now, &conv, nonce)).await else { return ApiTurn::Busy };
    let result = host.run(&turn).await;
    host.ask(|st, _| st.end_turn(&turn.turn_id)).await;
    match result {
        Ok(answer) => ApiTurn::Ran { turn_id: turn.turn_id, answer },
        Err(e) => ApiTurn::NotStored(e),
    }
}

impl ChatState {
    /// The running turn a Stop for `draft_id` stops: the one whose drafts carry that id
    /// (`telegram::drafts::stops_turn`); none for another draft (a finished turn's, a late or
    /// repeated press).
    pub fn turn_to_stop(&self, draft_id: i64) -> Option<String> {
        self.turn().filter(|t| crate::telegram::drafts::stops_turn(&t.turn_id, draft_id)).map(|t| t.turn_id.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat_state::fake::{state_port_over_mem, Mem};
    use crate::chat_state::Signal;
    use crate::telegram::drafts::draft_id;
    use crate::telegram::gating::Trigger;
    use futures::executor::block_on;
    use std::cell::RefCell;


    /// A chat object in memory whose turn's run tries a second API call while it runs.
    #[derive(Default)]
    struct Fake {
        mem: Mem,
        store_fails: bool,
        during: RefCell<Option<String>>,
    }

    state_port_over_mem!(Fake);

    impl ApiHost for Fake {
        type Answer = &'static str;
        fn new_turn(&self) -> (String, u64) {
            ("7".into(), 1)
        }
        async fn run(&self, _turn: &TurnRun) -> Result<&'static str, String> {
            // A second call while this one runs: the same claim, refused.
            let second = self.mem.st.borrow_mut().claim_api_turn(5_001, "7", 2);
            *self.during.borrow_mut() = Some(format!("{:?}", second.map(|t| t.turn_id)));
            if self.store_fails {
                Err("D1 unavailable".into())
            } else {
                Ok("hello")
            }
        }
    }

    #[test]
    fn one_api_turn_at_a_time_and_the_turn_ends_whatever_happened() {
        let f = Fake::default();
        let ran = block_on(run(&f));
        assert!(matches!(ran, ApiTurn::Ran { answer: "hello", .. }));
        assert_eq!(f.during.borrow().as_deref(), Some("None"), "a concurrent call is busy");
        assert!(f.mem.st.borrow().turn().is_none(), "ended");
        let f = Fake { store_fails: true, ..Fake::default() };
        assert_eq!(block_on(run(&f)), ApiTurn::NotStored("D1 unavailable".into()));
        assert!(f.mem.st.borrow().turn().is_none(), "ended though nothing ran");
    }

    #[test]
    fn a_busy_conversation_claims_nothing() {
        let f = Fake::default();
        f.mem.st.borrow_mut().signal(&Signal { update_id: 1, target_message_id: Some(10), trigger: Trigger::Private, at_ms: 0 });
        let telegram_turn = f.mem.st.borrow_mut().begin_turn(1_000, "7", 9);
        assert_eq!(block_on(run(&f)), ApiTurn::Busy);
        assert_eq!(f.mem.st.borrow().turn().map(|t| t.turn_id.clone()), Some(telegram_turn.turn_id), "the running turn is untouched");
    }

    #[test]
    fn a_stop_stops_the_running_turn_whose_draft_it_names_and_nothing_else() {
        let mut st = ChatState::default();
        assert_eq!(st.turn_to_stop(1), None, "nothing runs");
        let turn = st.begin_turn(1_000, "7", 9);
        assert_eq!(st.turn_to_stop(draft_id(&turn.turn_id)), Some(turn.turn_id.clone()));
        assert_eq!(st.turn_to_stop(draft_id(&turn.turn_id) + 1), None, "another draft: a finished turn's");
    }
}
