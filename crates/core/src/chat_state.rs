//! The chat object's state machine: debounce, single-flight turns, plan progress, replanning.
//! The Durable Object stores a [`ChatState`] and asks it what to do; all decisions are here,
//! as functions of the state, the event and the time.
//!
//! Invariants:
//! - At most one turn per conversation exists at a time (`turn`), so there are never two model
//!   calls at once for the same chat.
//! - A burst of reply-asking messages gives one turn: each signal pushes the debounce deadline
//!   to `last + debounce`, capped at `first + debounce_max`.
//! - A signal that arrives while a plan is being carried out cancels the steps not yet done;
//!   one that arrives during the model call makes the result stale, and the turn is replanned
//!   (at most [`MAX_REPLANS`] times in a row, so a chatty group still gets answers).
//! - Every handler is safe to run twice (alarms run at least once): signals are deduplicated
//!   by update id, and [`ChatState::due`] derives what to do from the state alone.
//! - A turn whose instance died (not in flight in memory, not waiting for a retry) is
//!   recovered: its messages become pending again.

use crate::gating::Trigger;
use crate::plan::Step;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Replans in a row before a stale plan is carried out anyway.
pub const MAX_REPLANS: u32 = 2;
/// How long a turn may run before the watchdog alarm checks on it.
pub const TURN_WATCHDOG_MS: i64 = 120_000;
/// Update ids remembered for deduplication.
const SEEN_CAP: usize = 512;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    pub debounce_ms: i64,
    pub debounce_max_ms: i64,
}

/// A reply-asking message (or reaction) handed to the chat object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Signal {
    pub update_id: i64,
    pub target_message_id: Option<i64>,
    pub trigger: Trigger,
    pub at_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    pub first_ms: i64,
    pub last_ms: i64,
    pub target_message_id: Option<i64>,
    pub trigger: Trigger,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRun {
    pub turn_id: String,
    pub started_ms: i64,
    /// The signal generation the turn saw when it started.
    pub generation: u64,
    pub target_message_id: Option<i64>,
    pub trigger: Trigger,
    pub attempt: u32,
    /// Failed, and a retry job is queued.
    pub waiting_retry: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanRun {
    pub turn_id: String,
    pub steps: Vec<Step>,
    /// Index of the next step to carry out.
    pub next: usize,
    pub not_before_ms: i64,
    /// A step failed and a retry job is queued.
    pub waiting_job: bool,
    pub target_message_id: Option<i64>,
    /// Times the current step has been started (a crash mid-step shows as a restart).
    #[serde(default)]
    pub step_starts: u32,
}

impl PlanRun {
    pub fn current(&self) -> Option<&Step> {
        self.steps.get(self.next)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ChatState {
    /// Reply-asking signals accepted so far.
    pub generation: u64,
    pub pending: Option<Pending>,
    pub turn: Option<TurnRun>,
    pub plan: Option<PlanRun>,
    /// Turns started, for turn ids.
    pub turns_started: u64,
    pub replans_in_row: u32,
    pub seen: VecDeque<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SignalOutcome {
    /// Already seen: nothing changes.
    Duplicate,
    /// Accepted; the plan of `turn_id` was cancelled from step `from` on, if one was running.
    Accepted { cancelled: Option<(String, usize)> },
}

/// What the alarm should do now.
#[derive(Debug, Clone, PartialEq)]
pub enum Due {
    StartTurn,
    AdvancePlan,
    Nothing,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Finish {
    /// Carry out the plan.
    Execute,
    /// Messages arrived during the model call: drop this plan and replan.
    Stale,
    /// The turn is no longer the current one (superseded); ignore the result.
    Superseded,
}

impl ChatState {
    /// Remembers an update id (bounded); false if it was already seen.
    pub fn mark_seen(&mut self, update_id: i64) -> bool {
        if self.seen.contains(&update_id) {
            return false;
        }
        self.seen.push_back(update_id);
        while self.seen.len() > SEEN_CAP {
            self.seen.pop_front();
        }
        true
    }

    /// Accepts a reply-asking signal.
    pub fn signal(&mut self, s: &Signal) -> SignalOutcome {
        if !self.mark_seen(s.update_id) {
            return SignalOutcome::Duplicate;
        }
        self.generation += 1;
        self.pending = Some(match self.pending.take() {
            Some(p) => Pending {
                first_ms: p.first_ms,
                last_ms: s.at_ms.max(p.last_ms),
                target_message_id: s.target_message_id.or(p.target_message_id),
                trigger: s.trigger,
            },
            None => Pending {
                first_ms: s.at_ms,
                last_ms: s.at_ms,
                target_message_id: s.target_message_id,
                trigger: s.trigger,
            },
        });
        let cancelled = self.plan.take().map(|p| (p.turn_id, p.next));
        SignalOutcome::Accepted { cancelled }
    }

    /// When the pending burst is ready for a turn.
    pub fn debounce_deadline(&self, t: &Timing) -> Option<i64> {
        self.pending.as_ref().map(|p| (p.last_ms + t.debounce_ms).min(p.first_ms + t.debounce_max_ms))
    }

    /// What to do at `now`. A turn that exists blocks everything else (a dead instance's turn
    /// is cleared by [`ChatState::recover_turn`], which the caller runs first).
    pub fn due(&self, now: i64, t: &Timing) -> Due {
        if self.turn.is_some() {
            return Due::Nothing;
        }
        if let Some(plan) = &self.plan {
            return if !plan.waiting_job && now >= plan.not_before_ms { Due::AdvancePlan } else { Due::Nothing };
        }
        match self.debounce_deadline(t) {
            Some(deadline) if now >= deadline => Due::StartTurn,
            _ => Due::Nothing,
        }
    }

    /// A turn recorded as running that this instance is not running: the instance that ran it
    /// died mid-turn (eviction, reset, deploy).
    pub fn orphaned(&self, in_flight: bool) -> bool {
        self.turn.as_ref().is_some_and(|t| !t.waiting_retry && !in_flight)
    }

    /// Takes over an orphaned turn: the same turn id (so a stored result is resumed, not asked
    /// for again), the next attempt, and everything pending since. Returns the turn to run.
    pub fn recover_turn(&mut self, now: i64, in_flight: bool) -> Option<TurnRun> {
        if !self.orphaned(in_flight) {
            return None;
        }
        let generation = self.generation;
        let pending = self.pending.take();
        let turn = self.turn.as_mut().expect("orphaned implies a turn");
        turn.attempt += 1;
        turn.started_ms = now;
        turn.generation = generation;
        if let Some(p) = pending {
            turn.target_message_id = p.target_message_id.or(turn.target_message_id);
        }
        Some(turn.clone())
    }

    /// The next time the alarm should fire, if any. `in_flight`: this instance runs the turn.
    pub fn next_wake(&self, t: &Timing, in_flight: bool) -> Option<i64> {
        if let Some(turn) = &self.turn {
            if self.orphaned(in_flight) {
                return Some(0); // recover at once
            }
            // A waiting turn is woken by its retry job; a running one by the watchdog.
            return (!turn.waiting_retry).then_some(turn.started_ms + TURN_WATCHDOG_MS);
        }
        if let Some(plan) = &self.plan {
            return (!plan.waiting_job).then_some(plan.not_before_ms);
        }
        self.debounce_deadline(t)
    }

    /// Starts a turn for the pending burst. The turn id is derived from the conversation and
    /// a counter, so it is stable across retries of this turn.
    pub fn begin_turn(&mut self, now: i64, conv: &str) -> TurnRun {
        let pending = self.pending.take();
        self.turns_started += 1;
        let turn = TurnRun {
            turn_id: format!("{conv}/{}", self.turns_started),
            started_ms: now,
            generation: self.generation,
            target_message_id: pending.as_ref().and_then(|p| p.target_message_id),
            trigger: pending.map(|p| p.trigger).unwrap_or(Trigger::Private),
            attempt: 1,
            waiting_retry: false,
        };
        self.turn = Some(turn.clone());
        turn
    }

    /// Resumes a waiting turn for its retry job; it now also answers anything pending.
    pub fn resume_turn(&mut self, turn_id: &str, attempt: u32, now: i64) -> Option<TurnRun> {
        let generation = self.generation;
        let pending = self.pending.take();
        let turn = self.turn.as_mut().filter(|t| t.turn_id == turn_id && t.waiting_retry)?;
        turn.waiting_retry = false;
        turn.attempt = attempt;
        turn.started_ms = now;
        turn.generation = generation;
        if let Some(p) = pending {
            turn.target_message_id = p.target_message_id.or(turn.target_message_id);
        }
        Some(turn.clone())
    }

    /// The model answered with `steps`. Decides whether to carry them out.
    pub fn finish_turn(&mut self, turn_id: &str, steps: Vec<Step>, now: i64) -> Finish {
        let Some(turn) = self.turn.as_ref().filter(|t| t.turn_id == turn_id) else {
            return Finish::Superseded;
        };
        let stale = self.generation != turn.generation;
        let target = turn.target_message_id;
        self.turn = None;
        if stale && self.replans_in_row < MAX_REPLANS {
            self.replans_in_row += 1;
            return Finish::Stale;
        }
        self.replans_in_row = 0;
        if !steps.is_empty() {
            self.plan = Some(PlanRun {
                turn_id: turn_id.to_string(),
                steps,
                next: 0,
                not_before_ms: now,
                waiting_job: false,
                target_message_id: target,
                step_starts: 0,
            });
        }
        Finish::Execute
    }

    /// The model call failed and a retry job was queued.
    pub fn turn_waiting(&mut self, turn_id: &str) {
        if let Some(t) = self.turn.as_mut().filter(|t| t.turn_id == turn_id) {
            t.waiting_retry = true;
        }
    }

    /// The turn is abandoned (dead-lettered or permanently failed).
    pub fn end_turn(&mut self, turn_id: &str) {
        if self.turn.as_ref().is_some_and(|t| t.turn_id == turn_id) {
            self.turn = None;
        }
    }

    /// The current step is done; the next may run at `not_before`.
    pub fn step_done(&mut self, turn_id: &str, step: usize, not_before: i64) {
        if let Some(plan) = self.plan.as_mut().filter(|p| p.turn_id == turn_id && p.next == step) {
            plan.next += 1;
            plan.not_before_ms = not_before;
            plan.waiting_job = false;
            plan.step_starts = 0;
            if plan.next >= plan.steps.len() {
                self.plan = None;
            }
        }
    }

    /// Records that the current step is being started; returns how many times it has been.
    /// A step that keeps being restarted (its instance keeps dying) must be given up.
    pub fn start_step(&mut self, turn_id: &str, step: usize) -> u32 {
        match self.plan.as_mut().filter(|p| p.turn_id == turn_id && p.next == step) {
            Some(plan) => {
                plan.step_starts += 1;
                plan.step_starts
            }
            None => 0,
        }
    }

    /// The current step failed transiently and a retry job was queued.
    pub fn step_waiting(&mut self, turn_id: &str, step: usize) {
        if let Some(plan) = self.plan.as_mut().filter(|p| p.turn_id == turn_id && p.next == step) {
            plan.waiting_job = true;
        }
    }

    /// A retry job for `step` of `turn_id` arrived: resume the plan if it still waits for it.
    pub fn resume_step(&mut self, turn_id: &str, step: usize) -> bool {
        match self.plan.as_mut().filter(|p| p.turn_id == turn_id && p.next == step && p.waiting_job) {
            Some(plan) => {
                plan.waiting_job = false;
                true
            }
            None => false,
        }
    }

    /// Drops the plan of `turn_id` (a step failed for good). Returns whether it was current.
    pub fn drop_plan(&mut self, turn_id: &str) -> bool {
        if self.plan.as_ref().is_some_and(|p| p.turn_id == turn_id) {
            self.plan = None;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timing = Timing { debounce_ms: 1000, debounce_max_ms: 5000 };

    fn sig(update_id: i64, at_ms: i64) -> Signal {
        Signal { update_id, target_message_id: Some(update_id * 10), trigger: Trigger::Private, at_ms }
    }

    fn send(text: &str) -> Step {
        Step::Send { text: text.into(), reply_to: None, no_link_preview: false }
    }

    #[test]
    fn a_burst_is_debounced_into_one_turn() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        s.signal(&sig(2, 100));
        s.signal(&sig(3, 200));
        assert_eq!(s.next_wake(&T, false), Some(1200));
        assert_eq!(s.due(1100, &T), Due::Nothing);
        assert_eq!(s.due(1200, &T), Due::StartTurn);
        let turn = s.begin_turn(1200, "c");
        assert_eq!(turn.target_message_id, Some(30), "the latest message is the target");
        assert_eq!(turn.turn_id, "c/1");
        assert_eq!(s.due(1300, &T), Due::Nothing, "never two turns at once");
    }

    #[test]
    fn debounce_is_capped_by_the_maximum_wait() {
        let mut s = ChatState::default();
        for i in 0..20 {
            s.signal(&sig(i, i * 900));
        }
        assert_eq!(s.next_wake(&T, false), Some(5000));
    }

    #[test]
    fn duplicate_signals_change_nothing() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let before = s.clone();
        assert_eq!(s.signal(&sig(1, 500)), SignalOutcome::Duplicate);
        assert_eq!(s, before);
    }

    #[test]
    fn a_new_message_cancels_the_rest_of_the_plan() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let turn = s.begin_turn(1000, "c");
        let steps = vec![send("one"), Step::Wait { seconds: 2 }, send("two")];
        assert_eq!(s.finish_turn(&turn.turn_id, steps, 1500), Finish::Execute);
        assert_eq!(s.due(1500, &T), Due::AdvancePlan);
        s.step_done(&turn.turn_id, 0, 1500);
        s.step_done(&turn.turn_id, 1, 3500);
        assert_eq!(s.due(2000, &T), Due::Nothing);
        let out = s.signal(&sig(2, 2500));
        assert_eq!(out, SignalOutcome::Accepted { cancelled: Some((turn.turn_id.clone(), 2)) });
        assert!(s.plan.is_none());
        assert_eq!(s.next_wake(&T, false), Some(3500), "replans after the debounce");
    }

    #[test]
    fn a_message_during_the_model_call_makes_the_plan_stale() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let t1 = s.begin_turn(1000, "c");
        s.signal(&sig(2, 1200));
        assert_eq!(s.finish_turn(&t1.turn_id, vec![send("old")], 2000), Finish::Stale);
        assert!(s.plan.is_none());
        assert_eq!(s.due(2200, &T), Due::StartTurn);
        // After MAX_REPLANS stale results in a row, the plan is carried out anyway.
        for i in 0..MAX_REPLANS {
            let t = s.begin_turn(3000, "c");
            s.signal(&sig(10 + i as i64, 3100));
            let f = s.finish_turn(&t.turn_id, vec![send("x")], 3200);
            if i + 1 < MAX_REPLANS {
                assert_eq!(f, Finish::Stale);
            } else {
                assert_eq!(f, Finish::Execute);
            }
        }
    }

    #[test]
    fn a_dead_turn_is_recovered_and_a_live_one_is_not() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let t = s.begin_turn(1000, "c");
        assert!(s.recover_turn(2000, true).is_none());
        assert_eq!(s.next_wake(&T, true), Some(1000 + TURN_WATCHDOG_MS));
        // The instance died: a new message arrives at a fresh instance.
        s.signal(&sig(2, 1500));
        assert_eq!(s.next_wake(&T, false), Some(0), "recovered at once, not at the watchdog");
        let r = s.recover_turn(2000, false).unwrap();
        assert_eq!(r.turn_id, t.turn_id, "the same turn, so a stored result is resumed");
        assert_eq!(r.attempt, 2);
        assert_eq!(r.target_message_id, Some(20), "and it answers the newer message too");
        assert!(s.pending.is_none());
        assert_eq!(s.finish_turn(&t.turn_id, vec![send("hi")], 3000), Finish::Execute);
    }

    #[test]
    fn retries_keep_the_turn_and_absorb_new_messages() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let t = s.begin_turn(1000, "c");
        s.turn_waiting(&t.turn_id);
        assert!(s.recover_turn(2000, false).is_none(), "a waiting turn is not dead");
        assert_eq!(s.next_wake(&T, false), None);
        s.signal(&sig(2, 3000));
        assert_eq!(s.due(10_000, &T), Due::Nothing, "no second turn while one waits");
        let resumed = s.resume_turn(&t.turn_id, 2, 20_000).unwrap();
        assert_eq!(resumed.target_message_id, Some(20));
        assert!(s.pending.is_none());
        assert_eq!(s.finish_turn(&t.turn_id, vec![send("hi")], 21_000), Finish::Execute);
        assert!(s.resume_turn(&t.turn_id, 3, 22_000).is_none(), "a finished turn is not resumed");
    }

    #[test]
    fn failed_steps_wait_for_their_job() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let t = s.begin_turn(1000, "c");
        s.finish_turn(&t.turn_id, vec![send("a"), send("b")], 1000);
        s.step_waiting(&t.turn_id, 0);
        assert!(s.plan.as_ref().unwrap().waiting_job);
        assert_eq!(s.due(5000, &T), Due::Nothing);
        assert_eq!(s.start_step(&t.turn_id, 0), 1);
        assert_eq!(s.start_step(&t.turn_id, 0), 2, "a restart of the same step counts");
        assert!(!s.resume_step(&t.turn_id, 1), "not the waiting step");
        assert!(s.resume_step(&t.turn_id, 0));
        assert!(!s.resume_step(&t.turn_id, 0), "resumed once");
        s.step_done(&t.turn_id, 0, 5000);
        assert!(!s.resume_step(&t.turn_id, 0), "a done step's job is not wanted");
        s.step_done(&t.turn_id, 1, 5000);
        assert!(s.plan.is_none());
    }
}
