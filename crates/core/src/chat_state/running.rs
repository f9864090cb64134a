//! What the chat object holds in memory while work runs, as one value with named transitions:
//! the turn this instance drives (and its stop switch, `S`), whether it is carrying out plan
//! steps, and the rows the last turn loaded (`R`, the edge's cache handle: the next turn reads
//! only what is new). Memory only, by design: an instance that starts after a restart
//! holds nothing, so it takes over the dead one's stored work (`ChatState::take_over`), while
//! the instance that holds the work sees it held and only re-checks
//! (`ChatState::next_wake_here`).
//!
//! Invariants (INVARIANTS.md): "One turn at a time per conversation" (the turn in flight is
//! this value's; the stored turn is the state's).

/// The work this instance runs now.
#[derive(Debug)]
pub struct Running<S, R = ()> {
    turn: Option<InFlight<S>>,
    advancing: bool,
    rows: R,
}

#[derive(Debug)]
struct InFlight<S> {
    turn_id: String,
    /// The turn's stop switch, for a turn whose answer can be stopped (`None`: an API turn).
    switch: Option<S>,
}

impl<S, R: Default> Default for Running<S, R> {
    fn default() -> Self {
        Running { turn: None, advancing: false, rows: R::default() }
    }
}

impl<S: Clone, R: Clone> Running<S, R> {
    /// The handle of the rows the last turn loaded (shared: a turn fills it as it reads).
    pub fn rows(&self) -> R {
        self.rows.clone()
    }

    /// This instance starts driving `turn_id` (its stop switch, if it has one).
    pub fn turn_begins(&mut self, turn_id: &str, switch: Option<S>) {
        self.turn = Some(InFlight { turn_id: turn_id.to_string(), switch });
    }

    /// The turn this instance drove has its result (or failed): nothing is in flight.
    pub fn turn_ends(&mut self) {
        self.turn = None;
    }

    /// Whether this instance drives a turn now.
    pub fn in_flight(&self) -> bool {
        self.turn.is_some()
    }

    /// The stop switch of `turn_id` when this instance drives it (`None`: not here, or it has
    /// no switch).
    pub fn switch_of(&self, turn_id: &str) -> Option<S> {
        self.turn.as_ref().filter(|t| t.turn_id == turn_id).and_then(|t| t.switch.clone())
    }

    /// This instance starts carrying out plan steps. False when it already is (the caller
    /// leaves them to the one doing it).
    pub fn advance_begins(&mut self) -> bool {
        !std::mem::replace(&mut self.advancing, true)
    }

    /// The steps' run is over (done, waiting, or yielded).
    pub fn advance_ends(&mut self) {
        self.advancing = false;
    }

    /// Whether this instance is carrying out plan steps now.
    pub fn advancing(&self) -> bool {
        self.advancing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_in_flight_has_its_switch_until_it_ends() {
        let mut r: Running<u8> = Running::default();
        assert!(!r.in_flight());
        r.turn_begins("t1", Some(7));
        assert!(r.in_flight());
        assert_eq!(r.switch_of("t1"), Some(7));
        assert_eq!(r.switch_of("t0"), None, "another turn's Stop finds nothing");
        r.turn_ends();
        assert!(!r.in_flight());
        assert_eq!(r.switch_of("t1"), None, "a late Stop after the turn finds nothing");
        r.turn_begins("api", None);
        assert!(r.in_flight());
        assert_eq!(r.switch_of("api"), None, "an API turn has no switch");
    }

    #[test]
    fn the_rows_handle_is_the_same_for_every_turn() {
        let r: Running<u8, std::rc::Rc<std::cell::Cell<u32>>> = Running::default();
        r.rows().set(42); // the first turn loaded 42 rows
        assert_eq!(r.rows().get(), 42, "the next turn reads what the last one kept");
    }

    #[test]
    fn only_one_run_of_plan_steps_at_a_time() {
        let mut r: Running<u8> = Running::default();
        assert!(r.advance_begins());
        assert!(!r.advance_begins(), "a second run leaves the steps to the first");
        assert!(r.advancing());
        r.advance_ends();
        assert!(!r.advancing());
        assert!(r.advance_begins());
    }
}
