//! A schedule run's loop, behind a port: the alarm's `FireSchedules` (the chat's next run is
//! due). D1 holds the truth about schedules; the core decides what each due run does
//! (`chat::schedule::on_due`: fire, late or not, or skip beyond the lateness limit; then its
//! creator's gate, asked again now: fire, its text only, cancel, skip), starts a firing run
//! as a scheduled turn in the state before it is driven, and re-reads the next run at the end.
//! When D1 cannot be read or written the object looks again [`REREAD_MS`] later, never in a
//! loop.
//!
//! Invariants (INVARIANTS.md): "Schedules fire once, never lost", "The state decides; the
//! object asks". Also: one run per alarm; a run over the token budget is owed in the state
//! before it is claimed (a crash between sends its text and may fire the run once more;
//! never neither).

use super::port::StatePort;
use super::{turn_id, ScheduledRun, TurnRun};
use crate::access::authority::RunGate;
use crate::chat::schedule::{on_due, DueRun, Limits};
use crate::time_zone::TimeZones;
use serde::Deserialize;

/// How long to wait before looking again when the schedules cannot be read or written.
pub const REREAD_MS: i64 = 60_000;

/// A due run as the chat object reads it from D1.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DueSchedule {
    pub id: i64,
    pub text: String,
    pub timezone: String,
    pub repeat: Option<String>,
    pub next_run_ms: i64,
    pub creator_user_id: Option<i64>,
}

/// What a schedule run's loop needs from the chat object besides its state and clock.
#[allow(async_fn_in_trait)] // the object runs on one thread (a Durable Object); no Send needed
pub trait ScheduleHost: StatePort {
    /// The conversation's key as text and a fresh nonce (for a new turn's id).
    fn new_turn(&self) -> (String, u64);
    /// What is due at `now`, soonest first; `None`: D1 could not say.
    async fn due(&self, now: i64) -> Option<Vec<DueSchedule>>;
    /// Skips a run too late to be useful; false: not written.
    async fn skip(&self, due: &DueSchedule, late_ms: i64, next_ms: Option<i64>) -> bool;
    /// Asks the creator's access and budgets again and writes a cancel or a skip;
    /// `None`: that write failed.
    async fn gate(&self, due: &DueSchedule, next_ms: Option<i64>) -> Option<RunGate>;
    /// Claims `run` for `turn_id`: true if it is this turn's (or D1 cannot say: the text then
    /// goes out, never lost), false if another turn took it.
    async fn claim(&self, run: &ScheduledRun, turn_id: &str) -> bool;
    /// Drives the run's scheduled turn.
    async fn drive_turn(&self, turn: TurnRun);
    /// Sends the owed messages that are due.
    async fn send_owed_messages(&self);
    /// Re-reads the chat's next run into the state.
    async fn refresh(&self);
}

/// How a schedule run's loop ended (for the tests and the log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fired {
    /// A scheduled turn was started and driven.
    Turn(String),
    /// A run's own text was owed and sent, no model call.
    TextOnly(String),
    /// Nothing fired (none due, or each skipped or cancelled).
    Nothing,
    /// D1 could not be read or written: the object looks again later.
    LookAgain,
}

/// The alarm's `FireSchedules` (see the module doc).
pub async fn run<H: ScheduleHost>(host: &H, zones: &dyn TimeZones, limits: &Limits) -> Fired {
    let now = host.now();
    let fired = fire_first(host, zones, limits, now).await;
    if fired == Fired::LookAgain {
        host.ask(|st, _| st.set_next_schedule(Some(now + REREAD_MS))).await;
    } else {
        host.refresh().await;
    }
    fired
}

async fn fire_first<H: ScheduleHost>(host: &H, zones: &dyn TimeZones, limits: &Limits, now: i64) -> Fired {
    let Some(due) = host.due(now).await else { return Fired::LookAgain };
    for row in due {
        match on_due(zones, row.next_run_ms, row.repeat.as_deref(), &row.timezone, now, limits) {
            DueRun::Skip { late_ms, next_ms } => {
                if !host.skip(&row, late_ms, next_ms).await {
                    return Fired::LookAgain; // still due in D1
                }
            }
            DueRun::Fire { late_ms, next_ms } => {
                let Some(gate) = host.gate(&row, next_ms).await else { return Fired::LookAgain };
                if matches!(gate, RunGate::Cancel(_) | RunGate::Skip) {
                    continue;
                }
                let run = ScheduledRun {
                    schedule_id: row.id,
                    due_ms: row.next_run_ms,
                    next_ms,
                    late_ms,
                    text: row.text,
                    timezone: row.timezone,
                    repeat: row.repeat,
                    creator_user_id: row.creator_user_id,
                };
                let (conv, nonce) = host.new_turn();
                if gate == RunGate::TextOnly {
                    return text_only(host, run, &conv, nonce, now).await;
                }
                // In the state first: from here a restart resumes this run (the turn claims it
                // in D1 on every attempt, idempotently).
                let schedule_id = run.schedule_id;
                let turn = host.ask(|st, _| st.begin_scheduled_turn(now, &conv, nonce, run)).await;
                host.log(&format!("chat {conv}: schedule #{schedule_id} fires (turn {})", turn.turn_id));
                let id = turn.turn_id.clone();
                host.drive_turn(turn).await;
                return Fired::Turn(id);
            }
        }
    }
    Fired::Nothing
}

/// Over the token budget: the run's text goes out as it was set, with no model call. Owed in
/// the state before the run is claimed, then claimed, then sent like an apology (at most once).
async fn text_only<H: ScheduleHost>(host: &H, run: ScheduledRun, conv: &str, nonce: u64, now: i64) -> Fired {
    let id = turn_id(conv, now, nonce);
    host.log(&format!("chat {conv}: schedule #{} fires over the token budget: its text, no model call", run.schedule_id));
    host.ask(|st, _| st.owe_text(&id, run.text.clone(), now)).await;
    if !host.claim(&run, &id).await {
        host.ask(|st, _| st.apology_done(&id)).await;
        return Fired::Nothing;
    }
    host.send_owed_messages().await;
    Fired::TextOnly(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::policy::Refusal;
    use crate::chat_state::fake::{state_port_over_mem, Mem, L as OWED, T};
    use crate::time_zone::UtcOnly;
    use futures::executor::block_on;
    use std::cell::{Cell, RefCell};
    use std::collections::VecDeque;

    const LIM: Limits = Limits { max_active: 25, min_repeat_minutes: 5, max_late_ms: 3_600_000, fallback_ms: 600_000 };
    const NOW: i64 = 10_000_000;

    /// A chat object in memory: the state, D1's due runs and its answers, the gates, and what
    /// was done, in order.
    struct Fake {
        mem: Mem,
        due: Option<Vec<DueSchedule>>,
        gates: RefCell<VecDeque<Option<RunGate>>>,
        skip_fails: bool,
        claimed_by_another: bool,
        done: RefCell<Vec<String>>,
        nonce: Cell<u64>,
    }

    impl Default for Fake {
        fn default() -> Self {
            let mem = Mem::default();
            mem.now.set(NOW);
            Fake { mem, due: None, gates: Default::default(), skip_fails: false, claimed_by_another: false, done: Default::default(), nonce: Cell::new(0) }
        }
    }

    state_port_over_mem!(Fake);

    impl ScheduleHost for Fake {
        fn new_turn(&self) -> (String, u64) {
            self.nonce.set(self.nonce.get() + 1);
            ("42".into(), self.nonce.get())
        }
        async fn due(&self, _now: i64) -> Option<Vec<DueSchedule>> {
            self.due.clone()
        }
        async fn skip(&self, due: &DueSchedule, late_ms: i64, _next_ms: Option<i64>) -> bool {
            self.done.borrow_mut().push(format!("skip #{} ({} min late)", due.id, late_ms / 60_000));
            !self.skip_fails
        }
        async fn gate(&self, due: &DueSchedule, _next_ms: Option<i64>) -> Option<RunGate> {
            self.done.borrow_mut().push(format!("gate #{}", due.id));
            self.gates.borrow_mut().pop_front().unwrap_or(Some(RunGate::Fire))
        }
        async fn claim(&self, run: &ScheduledRun, _turn_id: &str) -> bool {
            // The text is owed in the state before the run is claimed: a crash between sends
            // it (and may fire the run once more), never neither.
            let owed = self.mem.st.borrow().clone().next_owed(NOW, 0, &OWED).is_some();
            self.done.borrow_mut().push(format!("claim #{} (owed: {owed})", run.schedule_id));
            !self.claimed_by_another
        }
        async fn drive_turn(&self, turn: TurnRun) {
            let id = turn.scheduled.map(|r| r.schedule_id);
            self.done.borrow_mut().push(format!("drive #{}", id.unwrap_or(0)));
        }
        async fn send_owed_messages(&self) {
            let owed = self.mem.st.borrow_mut().next_owed(NOW, 0, &OWED);
            self.done.borrow_mut().push(format!("send {}", owed.map(|(_, t)| t).unwrap_or_default()));
        }
        async fn refresh(&self) {
            self.done.borrow_mut().push("refresh".into());
        }
    }

    fn due(id: i64, late_ms: i64) -> DueSchedule {
        DueSchedule { id, text: format!("reminder {id}"), timezone: "UTC".into(), repeat: None, next_run_ms: NOW - late_ms, creator_user_id: Some(5) }
    }

    fn with_due(rows: Vec<DueSchedule>) -> Fake {
        Fake { due: Some(rows), ..Fake::default() }
    }

    #[test]
    fn a_due_run_starts_its_scheduled_turn_in_the_state_before_it_is_driven_one_per_alarm() {
        let f = with_due(vec![due(1, 60_000), due(2, 0)]);
        let fired = block_on(run(&f, &UtcOnly, &LIM));
        assert!(matches!(fired, Fired::Turn(_)));
        assert_eq!(*f.done.borrow(), ["gate #1", "drive #1", "refresh"], "#2 waits for the next alarm");
        let st = f.mem.st.borrow();
        let turn = st.turn().expect("the scheduled turn is in the state");
        assert_eq!(turn.scheduled.as_ref().map(|r| (r.schedule_id, r.late_ms)), Some((1, 60_000)));
    }

    #[test]
    fn a_run_too_late_is_skipped_and_a_refused_one_cancelled_then_the_next_fires() {
        let f = with_due(vec![due(1, 2 * 3_600_000), due(2, 0), due(3, 0)]);
        f.gates.borrow_mut().push_back(Some(RunGate::Cancel(Refusal::Blocked)));
        assert!(matches!(block_on(run(&f, &UtcOnly, &LIM)), Fired::Turn(_)));
        assert_eq!(*f.done.borrow(), ["skip #1 (120 min late)", "gate #2", "gate #3", "drive #3", "refresh"]);
    }

    #[test]
    fn a_run_over_the_token_budget_is_owed_claimed_and_sent_as_its_own_text() {
        let f = with_due(vec![due(1, 0)]);
        f.gates.borrow_mut().push_back(Some(RunGate::TextOnly));
        assert!(matches!(block_on(run(&f, &UtcOnly, &LIM)), Fired::TextOnly(_)));
        assert_eq!(*f.done.borrow(), ["gate #1", "claim #1 (owed: true)", "send ⏰ reminder 1", "refresh"]);
        assert!(f.mem.st.borrow().turn().is_none(), "no model call");
        // Claimed by another turn meanwhile: its text is owed no more, nothing is sent.
        let f = Fake { claimed_by_another: true, ..with_due(vec![due(1, 0)]) };
        f.gates.borrow_mut().push_back(Some(RunGate::TextOnly));
        assert_eq!(block_on(run(&f, &UtcOnly, &LIM)), Fired::Nothing);
        assert_eq!(*f.done.borrow(), ["gate #1", "claim #1 (owed: true)", "refresh"]);
        assert_eq!(f.mem.st.borrow_mut().next_owed(NOW, 0, &OWED), None);
    }

    #[test]
    fn when_d1_cannot_say_the_object_looks_again_a_minute_later_never_in_a_loop() {
        for f in [Fake::default(), Fake { skip_fails: true, ..with_due(vec![due(1, 2 * 3_600_000)]) }, with_due(vec![due(1, 0)])] {
            f.gates.borrow_mut().push_back(None); // the gate's write failed (the third case)
            assert_eq!(block_on(run(&f, &UtcOnly, &LIM)), Fired::LookAgain);
            assert!(!f.done.borrow().iter().any(|d| d == "refresh" || d.starts_with("drive")));
            assert_eq!(f.mem.st.borrow().next_wake(&T, false, NOW), Some(NOW + REREAD_MS));
        }
    }
}
