//! The chat object's state machine: debounce, single-flight turns, plan progress, replanning.
//! The Durable Object stores a [`ChatState`] and asks it what to do; all decisions are here,
//! as functions of the state, the event and the time.
//!
//! Invariants (INVARIANTS.md): "One turn at a time per conversation", "The state decides;
//! the object asks", "Every waiting state has a deadline" ([`ChatState::turn_waiting`]'s /
//! [`ChatState::step_waiting`]'s deadline), "The alarm never loops" ([`ChatState::next_wake`]),
//! "Turn ids never repeat" (the start time and a random nonce the caller passes in; the
//! counter is only a statistic), "One apology, never lost", "A cancelled step is never sent"
//! ([`ChatState::is_current_step`]), "Bursts", "A scheduled turn keeps its place" (a
//! [`ScheduledRun`] in the state, and a turn committed by [`ChatState::commit_turn`]), "Early
//! start, at most one abandoned a burst" ([`TurnRun::early_until_ms`], [`Pending::early_spent`]).
//!
//! Also:
//! - A burst's signals each push the debounce deadline to `last + debounce`, capped at
//!   `first + debounce_max`.
//! - A signal that arrives while a plan is being carried out cancels the steps not yet done;
//!   one that arrives during the model call makes the result stale, and the turn is replanned
//!   (at most [`MAX_REPLANS`] times in a row, so a chatty group still gets answers).
//! - Every handler is safe to run twice (alarms run at least once): signals are deduplicated
//!   by update id, and [`ChatState::due`] derives what to do from the state alone.
//! - A recovered turn's messages become pending again.
//! - The one alarm also serves the chat's schedules: `next_schedule_ms` (a hint read from D1,
//!   which holds the truth) competes with the debounce deadline, earliest first, and a due
//!   schedule waits for a running turn or plan (never two model calls at once).
//! - A committed turn (allowed only while no newer message came) leaves newer messages
//!   pending for their own turn right after, and a retry of it answers nothing newer than its
//!   first attempt saw (`committed_upto`).

mod crew_cycle;
pub mod alarm;
pub mod api_turn;
pub mod arrival;
pub mod job;
pub mod port;
pub mod schedule_due;
pub mod effects;
#[cfg(test)]
mod fake;
pub mod running;

pub use crew_cycle::{Answered, GivenUp};

use crate::telegram::gating::Trigger;
use crate::chat::plan::Step;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

pub use crate::chat::schedule::ScheduledRun;

/// Replans in a row before a stale plan is carried out anyway.
pub const MAX_REPLANS: u32 = 2;
/// How long a turn may run before the watchdog alarm checks on it (the default of
/// [`Timing::watchdog_ms`]).
pub const TURN_WATCHDOG_MS: i64 = 120_000;
/// How long past its expected delay a retry job may be late before it counts as lost (the
/// default of [`Timing::job_grace_ms`]).
pub const JOB_GRACE_MS: i64 = 300_000;
/// How long an owed apology is tried before it is given up: a day after it was first owed.
/// Until then it is retried with backoff (at most five minutes apart, or Telegram's
/// `retry_after`) however many attempts that takes; a chat that blocked the bot drops it at
/// once (the edge's fatal send error).
pub const APOLOGY_DEADLINE_MS: i64 = 86_400_000;
/// While this instance has work in flight (a turn it runs, a plan step it carries out), the
/// alarm is a short re-check this far ahead, not the due time nor the watchdog: an instance
/// that starts again after a restart finds the dead one's work within seconds, and an alarm
/// that comes while the work runs here neither takes it over nor fires again at once (no
/// spin); the work re-arms when it ends.
pub const RECHECK_MS: i64 = 3_000;
/// Update ids remembered for deduplication.
const SEEN_CAP: usize = 512;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    pub debounce_ms: i64,
    pub debounce_max_ms: i64,
    /// A running turn is checked on this long after it started.
    pub watchdog_ms: i64,
    /// A retry job later than its expected time by this much is presumed lost.
    pub job_grace_ms: i64,
    /// The adaptive debounce (`crate::chat::debounce`); `None`: the fixed `debounce_ms`.
    pub adaptive: Option<crate::chat::debounce::Policy>,
    /// A burst's first message starts its turn at once (`debounce::starts_early`).
    pub early_start: bool,
}

impl Timing {
    pub fn new(debounce_ms: i64, debounce_max_ms: i64) -> Self {
        Timing { debounce_ms, debounce_max_ms, watchdog_ms: TURN_WATCHDOG_MS, job_grace_ms: JOB_GRACE_MS, adaptive: None, early_start: false }
    }
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
    /// Messages in the burst so far (0 when stored by an older version).
    #[serde(default)]
    pub count: u32,
    /// The burst's early start was abandoned: its turn waits the quiet window (at most one
    /// abandoned early start a burst).
    #[serde(default)]
    pub early_spent: bool,
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
    /// When a waiting turn's job counts as lost (the object then takes the turn over).
    #[serde(default)]
    pub wait_deadline_ms: Option<i64>,
    /// A scheduled run: the turn answers it, not people's messages.
    #[serde(default)]
    pub scheduled: Option<ScheduledRun>,
    /// A crew persona's turn (`core::crew`; the persona is in the turn id).
    #[serde(default)]
    pub crew: Option<crate::crew_state::CrewTurn>,
    /// Part of the answer already went out as a message while it streamed
    /// ([`ChatState::commit_turn`]): newer messages no longer make it stale, they get their
    /// own turn after its plan.
    #[serde(default)]
    pub committed: bool,
    /// The newest message seq the committed answer saw: a retry of the turn answers nothing
    /// newer (newer messages get their own turn).
    #[serde(default)]
    pub committed_upto: Option<i64>,
    /// An early start (`chat::debounce::starts_early`): the turn began with the burst's first
    /// message, before its quiet window ended at this time. Until then a newer message abandons
    /// it ([`ChatState::signal`]), nothing of it may go out ([`ChatState::commit_turn`]) and
    /// its model port hands the turn nothing (no tool runs, no plan).
    #[serde(default)]
    pub early_until_ms: Option<i64>,
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
    /// When the step's retry job counts as lost (the object then retries the step itself).
    #[serde(default)]
    pub job_deadline_ms: Option<i64>,
    /// The plan of a scheduled run: people's messages do not cancel it.
    #[serde(default)]
    pub scheduled: Option<ScheduledRun>,
    /// The plan of a committed turn (its first chunk went out while streaming): people's
    /// messages do not cancel it either, so no half answer is left.
    #[serde(default)]
    pub committed: bool,
    /// Which function call each step came from (for the steps' outcome records), when the turn
    /// that made the plan ran in this object; `None` (a resumed plan, an older state): the
    /// turn's row in D1 has it.
    #[serde(default)]
    pub step_calls: Option<Vec<Option<usize>>>,
}

impl TurnRun {
    /// A scheduled run or a committed answer (part of it went out while streaming) keeps its
    /// place: it never goes stale, people's messages do not cancel its plan, and messages
    /// that came meanwhile wait for their own turn right after it.
    pub fn keeps_its_place(&self) -> bool {
        self.scheduled.is_some() || self.committed
    }
}

impl PlanRun {
    pub fn current(&self) -> Option<&Step> {
        self.steps.get(self.next)
    }

    /// The plan of a turn that [kept its place](TurnRun::keeps_its_place).
    pub fn keeps_its_place(&self) -> bool {
        self.scheduled.is_some() || self.committed
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ChatState {
    /// Reply-asking signals accepted so far.
    pub(crate) generation: u64,
    pub(crate) pending: Option<Pending>,
    pub(crate) turn: Option<TurnRun>,
    pub(crate) plan: Option<PlanRun>,
    /// Turns started (a statistic; turn ids do not depend on it).
    pub(crate) turns_started: u64,
    pub(crate) replans_in_row: u32,
    pub(crate) seen: VecDeque<i64>,
    /// Apologies owed to the user, oldest first.
    #[serde(default)]
    pub(crate) apologies: Vec<Apology>,
    /// Alarms handled (a statistic, so tests and operators can see an alarm storm); written
    /// with the state's next change, so an instance that ends may lose its last few.
    #[serde(default)]
    pub(crate) alarms: u64,
    /// The chat's next schedule run as last read from D1 (`schedules`), if any.
    #[serde(default)]
    pub(crate) next_schedule_ms: Option<i64>,
    /// What the chat's bursts look like, for the adaptive debounce (`crate::chat::debounce`).
    #[serde(default)]
    pub(crate) burst: crate::chat::debounce::Burstiness,
    /// Crew mode: the chat's switch, the speaking pointer and the running cycle (`core::crew`).
    #[serde(default)]
    pub(crate) crew: Option<crate::crew_state::CrewState>,
}

/// An apology the user is owed for a turn that could not be answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Apology {
    pub turn_id: String,
    pub attempts: u32,
    pub not_before_ms: i64,
    /// A scheduled run that could not be worded: its text is sent instead of the apology.
    #[serde(default)]
    pub text: Option<String>,
    /// When it was first owed (None in state stored before this field: the next failed
    /// attempt starts its day).
    #[serde(default)]
    pub owed_at_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SignalOutcome {
    /// Already seen: nothing changes.
    Duplicate,
    /// Accepted; the plan of `turn_id` was cancelled from step `from` on, if one was running;
    /// `abandoned`: the early start this message abandoned (its model call is to be stopped).
    Accepted { cancelled: Option<(String, usize)>, abandoned: Option<String> },
}

/// What the alarm should do now.
#[derive(Debug, Clone, PartialEq)]
pub enum Due {
    StartTurn,
    AdvancePlan,
    /// A schedule of the chat is due (read D1 and fire it).
    Schedules,
    Nothing,
}

/// The stored state as loaded: what the object runs on, and what went wrong reading it.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub state: ChatState,
    /// The stored state could not be read; the object starts afresh (and logs this).
    pub error: Option<String>,
}

/// The state as the object stores it: JSON text, which crosses into storage as one string
/// rather than as a JS object built field by field (issue 17, section 2).
pub fn stored(state: &ChatState) -> String {
    serde_json::to_string(state).unwrap_or_default()
}

/// Reads the stored state. Nothing stored is a new chat; a value that does not decode is an
/// explicit error the caller logs and recovers from (a fresh state; turn ids cannot collide
/// with the lost state's because they are not derived from a counter).
pub fn load(stored: Option<serde_json::Value>) -> Loaded {
    match stored {
        None | Some(serde_json::Value::Null) => Loaded { state: ChatState::default(), error: None },
        // Stored as JSON text (see [`stored`]); older objects stored the value itself.
        Some(serde_json::Value::String(text)) => match serde_json::from_str::<ChatState>(&text) {
            Ok(state) => Loaded { state, error: None },
            Err(e) => Loaded { state: ChatState::default(), error: Some(format!("stored chat state unreadable: {e}")) },
        },
        // (Read from its text, as the newer form is: one reader of the state, not two.)
        Some(v) => match serde_json::from_str::<ChatState>(&v.to_string()) {
            Ok(state) => Loaded { state, error: None },
            Err(e) => Loaded { state: ChatState::default(), error: Some(format!("stored chat state unreadable: {e}")) },
        },
    }
}

/// A turn id that no other turn of any conversation has: the conversation, the start time and
/// a random nonce. Stable across the retries of one turn (it is stored in the turn).
pub fn turn_id(conv: &str, now: i64, nonce: u64) -> String {
    format!("{conv}/{now}-{:08x}", nonce & 0xffff_ffff)
}

/// The conversation and the turn of a turn's send step's key or of one of its chunks' keys
/// (`<conv>/<ms>-<nonce>[~persona]/<step>[/...]`, the step a number), by which such a chunk's
/// message is found again: among its conversation's messages after the turn's `upto_seq`
/// (migration 0038). `None` for any other key (a command's, a notice's, a turn's apology,
/// whose turn may have no row): those chunks keep the indexed key.
pub fn chunk_anchor(key: &str) -> Option<(&str, &str)> {
    let (conv, rest) = key.split_once('/')?;
    let (turn, step) = rest.split_once('/')?;
    let (ms, nonce) = turn.split_once('-')?;
    let nonce = nonce.split_once('~').map_or(nonce, |(n, _)| n);
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let ok = crate::conversation::ConvKey::parse(conv).is_some()
        && digits(ms)
        && nonce.len() == 8
        && nonce.bytes().all(|b| b.is_ascii_hexdigit())
        && step.starts_with(|c: char| c.is_ascii_digit());
    ok.then(|| (conv, &key[..conv.len() + 1 + turn.len()]))
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

/// A job expected by `deadline` is lost at `now`. A wait stored without a deadline (by an
/// older version) is treated as lost at once, so no chat waits forever.
fn job_lost(deadline: Option<i64>, now: i64) -> bool {
    deadline.is_none_or(|d| now >= d)
}

impl ChatState {
    /// The turn running (or waiting for its retry job), if any.
    pub fn turn(&self) -> Option<&TurnRun> {
        self.turn.as_ref()
    }

    /// The running turn if it is `turn_id`.
    pub fn turn_of(&self, turn_id: &str) -> Option<&TurnRun> {
        self.turn.as_ref().filter(|t| t.turn_id == turn_id)
    }

    /// People's burst waiting for its turn, if any.
    pub fn pending(&self) -> Option<&Pending> {
        self.pending.as_ref()
    }

    /// The plan being carried out, if any.
    pub fn plan(&self) -> Option<&PlanRun> {
        self.plan.as_ref()
    }

    /// Whether update `update_id` was already taken in (a redelivery).
    pub fn has_seen(&self, update_id: i64) -> bool {
        self.seen.contains(&update_id)
    }

    /// Whether the last signal began a burst while no turn runs: the moment for a first sign.
    pub fn burst_just_began(&self) -> bool {
        self.turn.is_none() && self.pending.as_ref().is_some_and(|p| p.count == 1)
    }

    /// Whether `turn` is still the one to answer: no newer message came since it started, or
    /// it [keeps its place](TurnRun::keeps_its_place) (a scheduled run; an answer committed
    /// while it streamed). A turn's drafts stop once this is false.
    pub fn still_current(&self, turn: &TurnRun) -> bool {
        turn.scheduled.is_some() || self.generation == turn.generation || self.turn_of(&turn.turn_id).is_some_and(|t| t.committed)
    }

    /// The scheduled run that turn `turn_id` (running, or carrying out its plan) answers.
    pub fn scheduled_run_of(&self, turn_id: &str) -> Option<ScheduledRun> {
        let from_turn = self.turn_of(turn_id).and_then(|t| t.scheduled.clone());
        from_turn.or_else(|| self.plan.as_ref().filter(|p| p.turn_id == turn_id).and_then(|p| p.scheduled.clone()))
    }

    /// How often the apology owed for `turn_id` was tried (1 when none is owed).
    pub fn apology_attempts(&self, turn_id: &str) -> u32 {
        self.apologies.iter().find(|a| a.turn_id == turn_id).map_or(1, |a| a.attempts)
    }

    /// Counts an alarm handled (a statistic).
    pub fn count_alarm(&mut self) {
        self.alarms += 1;
    }

    /// Forgets the pending burst (it can have no turn: the object does not know its chat).
    pub fn forget_burst(&mut self) {
        self.pending = None;
    }

    /// `/new`: the conversation starts over. The pending burst, the plan being carried out and
    /// a crew cycle are forgotten (a turn running now finishes; its plan is the old session's).
    pub fn start_over(&mut self) {
        self.pending = None;
        self.plan = None;
        if let Some(crew) = self.crew.as_mut() {
            crew.cycle = None;
        }
    }

    /// Claims a turn for a synchronous API call, in one step: `None` while a turn or a plan
    /// runs (the caller answers "busy"). The API's message is the whole input: anything
    /// pending is dropped.
    pub fn claim_api_turn(&mut self, now: i64, conv: &str, nonce: u64) -> Option<TurnRun> {
        if self.turn.is_some() || self.plan.is_some() {
            return None;
        }
        self.pending = None;
        Some(self.begin_turn(now, conv, nonce))
    }
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
        self.burst.message_at(s.at_ms);
        let abandoned = self.abandon_early_start(s.at_ms);
        self.pending = Some(match self.pending.take() {
            Some(p) => Pending {
                first_ms: p.first_ms,
                last_ms: s.at_ms.max(p.last_ms),
                target_message_id: s.target_message_id.or(p.target_message_id),
                trigger: s.trigger,
                count: p.count.saturating_add(1),
                early_spent: p.early_spent,
            },
            None => Pending {
                first_ms: s.at_ms,
                last_ms: s.at_ms,
                target_message_id: s.target_message_id,
                trigger: s.trigger,
                count: 1,
                early_spent: false,
            },
        });
        let cancelled = if self.plan.as_ref().is_some_and(|p| !p.keeps_its_place()) {
            self.plan.take().map(|p| (p.turn_id, p.next))
        } else {
            None
        };
        SignalOutcome::Accepted { cancelled, abandoned: abandoned.map(|t| t.turn_id) }
    }

    /// A message at `at_ms` came within the running early start's quiet window: that turn is
    /// given up (nothing of it went out: it may not commit nor plan before the window ends) and
    /// its burst is pending again, as a burst of its first message and this one, spent for
    /// early starts, so the ordinary debounced turn answers the whole burst. The turn returned
    /// is the one to stop.
    fn abandon_early_start(&mut self, at_ms: i64) -> Option<TurnRun> {
        let early = self.turn.as_ref().is_some_and(|t| t.early_until_ms.is_some_and(|until| at_ms < until) && !t.keeps_its_place());
        if !early {
            return None;
        }
        let turn = self.turn.take()?;
        let first_ms = turn.started_ms.min(at_ms);
        self.pending = Some(match self.pending.take() {
            Some(p) => Pending { first_ms: p.first_ms.min(first_ms), count: p.count.saturating_add(1), early_spent: true, ..p },
            None => Pending { first_ms, last_ms: first_ms, target_message_id: turn.target_message_id, trigger: turn.trigger, count: 1, early_spent: true },
        });
        Some(turn)
    }

    /// When the pending burst is ready for a turn.
    /// A burst that may start early ([`Pending::early_spent`] not yet, one message so far) is
    /// ready at once.
    pub fn debounce_deadline(&self, t: &Timing) -> Option<i64> {
        let policy = t.adaptive.unwrap_or(crate::chat::debounce::Policy::Fixed(t.debounce_ms));
        self.pending.as_ref().map(|p| match Self::may_start_early(p, t) {
            true => p.first_ms,
            false => crate::chat::debounce::deadline(policy, &self.burst, p.first_ms, p.last_ms, p.count, t.debounce_max_ms),
        })
    }

    /// Whether burst `p` starts its turn early: early starts are on here (`Timing::early_start`),
    /// it is one message so far and no early start of it was abandoned.
    fn may_start_early(p: &Pending, t: &Timing) -> bool {
        t.early_start && p.count == 1 && !p.early_spent
    }

    /// The end of the quiet window of the pending burst's early start, if its turn starting at
    /// `now` is one (the window not over yet).
    pub(crate) fn early_window(&self, t: &Timing, now: i64) -> Option<i64> {
        let p = self.pending.as_ref().filter(|p| Self::may_start_early(p, t))?;
        let policy = t.adaptive.unwrap_or(crate::chat::debounce::Policy::Fixed(t.debounce_ms));
        let until = p.first_ms + crate::chat::debounce::quiet_ms(policy, &self.burst, 1);
        (until > now).then_some(until)
    }

    /// What to do at `now`. A turn that exists blocks everything else (a dead instance's turn
    /// is cleared by [`ChatState::recover_turn`], which the caller runs first).
    pub fn due(&self, now: i64, t: &Timing) -> Due {
        if self.turn.is_some() {
            return Due::Nothing;
        }
        if let Some(plan) = &self.plan {
            let ready = if plan.waiting_job { job_lost(plan.job_deadline_ms, now) } else { now >= plan.not_before_ms };
            return if ready { Due::AdvancePlan } else { Due::Nothing };
        }
        // A crew cycle goes on with its next persona (people's messages start a new one).
        if self.crew_continues() {
            return Due::StartTurn;
        }
        // People's burst and the chat's next schedule: whichever is due first.
        let burst = self.debounce_deadline(t).filter(|d| now >= *d);
        let schedule = self.next_schedule_ms.filter(|s| now >= *s);
        match (burst, schedule) {
            (Some(b), Some(s)) if s < b => Due::Schedules,
            (Some(_), _) => Due::StartTurn,
            (None, Some(_)) => Due::Schedules,
            (None, None) => Due::Nothing,
        }
    }

    /// Records the chat's next schedule run, as just read from D1.
    pub fn set_next_schedule(&mut self, next: Option<i64>) {
        self.next_schedule_ms = next;
    }

    /// Starts the turn of a due schedule's run (claimed by the caller). People's pending
    /// messages stay pending: they get their own turn afterwards.
    pub fn begin_scheduled_turn(&mut self, now: i64, conv: &str, nonce: u64, run: ScheduledRun) -> TurnRun {
        self.turns_started += 1;
        let turn = TurnRun {
            turn_id: turn_id(conv, now, nonce),
            started_ms: now,
            generation: self.generation,
            target_message_id: None,
            trigger: Trigger::Schedule,
            attempt: 1,
            waiting_retry: false,
            wait_deadline_ms: None,
            scheduled: Some(run),
            crew: None,
            committed: false,
            committed_upto: None,
            early_until_ms: None,
        };
        self.turn = Some(turn.clone());
        turn
    }

    /// A turn recorded as running that this instance is not running: the instance that ran it
    /// died mid-turn (eviction, reset, deploy).
    /// A waiting turn whose retry job is past its deadline is orphaned too (the job was lost).
    pub fn orphaned(&self, in_flight: bool, now: i64) -> bool {
        self.turn.as_ref().is_some_and(|t| !in_flight && (!t.waiting_retry || job_lost(t.wait_deadline_ms, now)))
    }

    /// Takes over an orphaned turn: the same turn id (so a stored result is resumed, not asked
    /// for again), the next attempt, and everything pending since. Returns the turn to run.
    pub fn recover_turn(&mut self, now: i64, in_flight: bool) -> Option<TurnRun> {
        if !self.orphaned(in_flight, now) {
            return None;
        }
        let generation = self.generation;
        let pending = if self.turn.as_ref().is_some_and(TurnRun::keeps_its_place) { None } else { self.pending.take() };
        let turn = self.turn.as_mut()?;
        turn.attempt += 1;
        turn.started_ms = now;
        turn.generation = generation;
        turn.waiting_retry = false;
        turn.wait_deadline_ms = None;
        if let Some(p) = pending {
            turn.target_message_id = p.target_message_id.or(turn.target_message_id);
        }
        Some(turn.clone())
    }

    /// The next time the alarm should fire, if any. `in_flight`: this instance runs the turn.
    /// A time at or before `now` is returned only when the alarm then has work (recovery, a
    /// due step, a due turn, an owed apology), so the alarm never loops.
    pub fn next_wake(&self, t: &Timing, in_flight: bool, now: i64) -> Option<i64> {
        let apology = self.apologies.iter().map(|a| a.not_before_ms).min();
        let main = if let Some(turn) = &self.turn {
            if self.orphaned(in_flight, now) {
                Some(now) // recover at once
            } else if turn.waiting_retry {
                // Woken by its retry job; if the job is lost, by the deadline.
                Some(turn.wait_deadline_ms.unwrap_or(now + t.job_grace_ms))
            } else {
                // Running here: the watchdog, which only checks. Past it (a slow model call),
                // the next check is one period later, never in the past.
                let watchdog = turn.started_ms.saturating_add(t.watchdog_ms);
                Some(if watchdog > now { watchdog } else { now.saturating_add(t.watchdog_ms) })
            }
        } else if let Some(plan) = &self.plan {
            Some(if plan.waiting_job { plan.job_deadline_ms.unwrap_or(now + t.job_grace_ms) } else { plan.not_before_ms })
        } else if self.crew_continues() {
            Some(now)
        } else {
            match (self.debounce_deadline(t), self.next_schedule_ms) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        };
        match (main, apology) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// [`ChatState::next_wake`] as this instance sees it: while it runs the turn (`in_flight`)
    /// or carries out a plan step (`advancing`), the short re-check ([`RECHECK_MS`]) instead:
    /// whoever holds the work is this instance's memory, so an instance that starts again
    /// (a restart or deploy killed the one that held it) holds nothing and takes the work
    /// over at that re-check, while the holder's own alarm sees it held and only re-checks.
    pub fn next_wake_here(&self, t: &Timing, in_flight: bool, advancing: bool, now: i64) -> Option<i64> {
        if self.busy_here(in_flight, advancing) {
            // A watchdog set shorter than the re-check (tests) re-checks that often.
            return Some(now.saturating_add(RECHECK_MS.min(t.watchdog_ms.max(1))));
        }
        self.next_wake(t, in_flight, now)
    }

    /// Whether this instance holds the state's work: it runs the stored turn (`in_flight`, not
    /// waiting for a retry job) or carries out the plan (`advancing`).
    pub fn busy_here(&self, in_flight: bool, advancing: bool) -> bool {
        (in_flight && self.turn.as_ref().is_some_and(|t| !t.waiting_retry)) || (advancing && self.plan.is_some())
    }

    /// Starts a turn for the pending burst. `nonce` is random: the turn id never repeats (see
    /// [`turn_id`]) and is stable across retries of this turn.
    pub fn begin_turn(&mut self, now: i64, conv: &str, nonce: u64) -> TurnRun {
        let pending = self.pending.take();
        self.turns_started += 1;
        let turn = TurnRun {
            turn_id: turn_id(conv, now, nonce),
            started_ms: now,
            generation: self.generation,
            target_message_id: pending.as_ref().and_then(|p| p.target_message_id),
            trigger: pending.map(|p| p.trigger).unwrap_or(Trigger::Private),
            attempt: 1,
            waiting_retry: false,
            wait_deadline_ms: None,
            scheduled: None,
            crew: None,
            committed: false,
            committed_upto: None,
            early_until_ms: None,
        };
        self.turn = Some(turn.clone());
        turn
    }

    /// Resumes a waiting turn for its retry job; it now also answers anything pending.
    pub fn resume_turn(&mut self, turn_id: &str, attempt: u32, now: i64) -> Option<TurnRun> {
        let generation = self.generation;
        let turn = self.turn.as_mut().filter(|t| t.turn_id == turn_id && t.waiting_retry)?;
        let pending = if turn.keeps_its_place() { None } else { self.pending.take() };
        turn.waiting_retry = false;
        turn.wait_deadline_ms = None;
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
        let stale = self.generation != turn.generation && !turn.keeps_its_place();
        let target = turn.target_message_id;
        let scheduled = turn.scheduled.clone();
        let committed = turn.committed;
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
                job_deadline_ms: None,
                scheduled,
                committed,
                step_calls: None,
            });
        }
        Finish::Execute
    }

    /// Keeps the step → function-call mapping with the plan `turn_id` just made (so carrying
    /// it out needs no D1 read for it).
    pub fn keep_step_calls(&mut self, turn_id: &str, calls: Vec<Option<usize>>) {
        if let Some(p) = self.plan.as_mut().filter(|p| p.turn_id == turn_id) {
            p.step_calls = Some(calls);
        }
    }

    /// The running turn's answer is about to go out in part while it streams (its first
    /// chunk). Allowed only while the turn is current and no newer message came (else the
    /// turn goes stale and is replanned as usual: nothing may go out); from then on the turn
    /// is committed: it is carried out whatever arrives, and newer messages wait for their own
    /// turn. `upto_seq`: the newest message the answer saw (a retry sees nothing newer; the
    /// first commit's stays). Returns whether the chunk may go out.
    /// An early start may not commit before its quiet window is over (`now`): a newer message
    /// may still abandon it.
    pub fn commit_turn(&mut self, turn_id: &str, upto_seq: i64, now: i64) -> bool {
        let generation = self.generation;
        let Some(turn) = self.turn.as_mut().filter(|t| t.turn_id == turn_id && !t.waiting_retry) else { return false };
        if turn.early_until_ms.is_some_and(|until| now < until) {
            return false;
        }
        if !turn.keeps_its_place() && turn.generation != generation {
            return false;
        }
        turn.committed = true;
        turn.committed_upto.get_or_insert(upto_seq);
        true
    }

    /// The model call failed and a retry job was queued; if it has not come by `deadline_ms`
    /// it counts as lost and the object takes the turn over.
    pub fn turn_waiting(&mut self, turn_id: &str, deadline_ms: i64) {
        if let Some(t) = self.turn.as_mut().filter(|t| t.turn_id == turn_id) {
            t.waiting_retry = true;
            t.wait_deadline_ms = Some(deadline_ms);
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
            plan.job_deadline_ms = None;
            plan.step_starts = 0;
            if plan.next >= plan.steps.len() {
                self.plan = None;
            }
        }
    }

    /// Records that the current step is being started; returns how many times it has been,
    /// or `None` when it is no longer the current step (cancelled or done meanwhile: do not
    /// carry it out). A step that keeps being restarted (its instance keeps dying) must be
    /// given up.
    pub fn start_step(&mut self, turn_id: &str, step: usize) -> Option<u32> {
        let plan = self.plan.as_mut().filter(|p| p.turn_id == turn_id && p.next == step && !p.waiting_job)?;
        plan.step_starts += 1;
        Some(plan.step_starts)
    }

    /// Whether `step` of `turn_id` is still the step to carry out. The edge asks this after
    /// every await of a step, and sends nothing once it is false.
    pub fn is_current_step(&self, turn_id: &str, step: usize) -> bool {
        self.plan.as_ref().is_some_and(|p| p.turn_id == turn_id && p.next == step && !p.waiting_job)
    }

    /// The current step failed transiently and a retry job was queued; if it has not come by
    /// `deadline_ms` it counts as lost and the object retries the step itself.
    pub fn step_waiting(&mut self, turn_id: &str, step: usize, deadline_ms: i64) {
        if let Some(plan) = self.plan.as_mut().filter(|p| p.turn_id == turn_id && p.next == step) {
            plan.waiting_job = true;
            plan.job_deadline_ms = Some(deadline_ms);
        }
    }

    /// A step whose retry job is past its deadline: the object takes it over. Returns whether
    /// it did.
    pub fn take_over_lost_step(&mut self, now: i64) -> bool {
        match self.plan.as_mut().filter(|p| p.waiting_job && job_lost(p.job_deadline_ms, now)) {
            Some(plan) => {
                plan.waiting_job = false;
                plan.job_deadline_ms = None;
                plan.not_before_ms = now;
                true
            }
            None => false,
        }
    }

    /// The turn cannot be answered: end it, drop its plan, and owe the user one apology (once
    /// per turn, however often this is called). A turn that is no longer here (it finished, or
    /// was given up before) is owed nothing: a late dead letter never apologises for a reply
    /// that went out.
    /// A scheduled run's text is owed instead of the apology: a reminder is never lost.
    pub fn give_up(&mut self, turn_id: &str, now: i64) {
        // A scheduled plan that already sent part of its message was not lost: the usual
        // apology covers the rest.
        let scheduled = self.turn.as_ref().filter(|t| t.turn_id == turn_id).and_then(|t| t.scheduled.clone()).or_else(|| {
            self.plan
                .as_ref()
                .filter(|p| p.turn_id == turn_id && !p.steps.iter().take(p.next).any(|s| matches!(s, Step::Send { .. })))
                .and_then(|p| p.scheduled.clone())
        });
        let had_turn = self.turn.as_ref().is_some_and(|t| t.turn_id == turn_id);
        let had_plan = self.drop_plan(turn_id);
        self.end_turn(turn_id);
        if (had_turn || had_plan) && !self.apologies.iter().any(|a| a.turn_id == turn_id) {
            let text = scheduled.map(|s| s.text);
            self.apologies.push(Apology { turn_id: turn_id.to_string(), attempts: 0, not_before_ms: now, text, owed_at_ms: Some(now) });
        }
    }

    /// Owes a scheduled run's text without a turn (the chat or the bot is over its token
    /// budget: the reminder goes out as it was set, with no model call). Sent like an apology,
    /// under `turn_id`, at most once.
    pub fn owe_text(&mut self, turn_id: &str, text: String, now: i64) {
        if !self.apologies.iter().any(|a| a.turn_id == turn_id) {
            self.apologies.push(Apology { turn_id: turn_id.to_string(), attempts: 0, not_before_ms: now, text: Some(text), owed_at_ms: Some(now) });
        }
    }

    /// The owed apology to send at `now`, if any (counts the attempt): its turn, and the
    /// scheduled text to send instead when it was a scheduled run.
    pub fn apology_due(&mut self, now: i64) -> Option<(String, Option<String>)> {
        let a = self.apologies.iter_mut().find(|a| a.not_before_ms <= now)?;
        a.attempts += 1;
        Some((a.turn_id.clone(), a.text.clone()))
    }

    /// The apology for `turn_id` was sent (or can never be: the chat blocked the bot).
    pub fn apology_done(&mut self, turn_id: &str) {
        self.apologies.retain(|a| a.turn_id != turn_id);
    }

    /// Sending the apology failed or had to wait: try again after `delay_ms`, until
    /// [`APOLOGY_DEADLINE_MS`] after it was first owed. Returns false when it is given up.
    pub fn apology_later(&mut self, turn_id: &str, now: i64, delay_ms: i64) -> bool {
        let Some(a) = self.apologies.iter_mut().find(|a| a.turn_id == turn_id) else { return false };
        let owed_at = *a.owed_at_ms.get_or_insert(now);
        if now.saturating_sub(owed_at) >= APOLOGY_DEADLINE_MS {
            self.apology_done(turn_id);
            return false;
        }
        a.not_before_ms = now.saturating_add(delay_ms.max(0));
        true
    }

    /// A retry job for `step` of `turn_id` arrived: resume the plan if it still waits for it.
    pub fn resume_step(&mut self, turn_id: &str, step: usize) -> bool {
        match self.plan.as_mut().filter(|p| p.turn_id == turn_id && p.next == step && p.waiting_job) {
            Some(plan) => {
                plan.waiting_job = false;
                plan.job_deadline_ms = None;
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

    #[test]
    fn a_turn_steps_chunk_keys_have_an_anchor_and_no_other_key_has() {
        let t = turn_id("-100123:7", 1_780_000_000_000, 0xabc);
        assert_eq!(chunk_anchor(&format!("{t}/0")), Some(("-100123:7", t.as_str())));
        assert_eq!(chunk_anchor(&format!("{t}/2/1r")), Some(("-100123:7", t.as_str())));
        let crew = format!("{}~critic", turn_id("42", 1_780_000_000_000, 1));
        assert_eq!(chunk_anchor(&format!("{crew}/1/0")), Some(("42", crew.as_str())));
        for other in [format!("{t}/apology/0"), format!("{t}"), "cmd:42:7/0".into(), "refusal:42:7/group/0".into(), "notify:abc/0".into(), "42/group/0".into(), format!("x{t}/0")] {
            assert_eq!(chunk_anchor(&other), None, "{other}");
        }
    }

    const T: Timing = Timing { debounce_ms: 1000, debounce_max_ms: 5000, watchdog_ms: TURN_WATCHDOG_MS, job_grace_ms: JOB_GRACE_MS, adaptive: None, early_start: false };

    fn sig(update_id: i64, at_ms: i64) -> Signal {
        Signal { update_id, target_message_id: Some(update_id * 10), trigger: Trigger::Private, at_ms }
    }

    fn send(text: &str) -> Step {
        Step::Send { text: text.into(), reply_to: None, no_link_preview: false }
    }

    /// A private chat with the adaptive window: early starts on.
    const EARLY: Timing = Timing {
        debounce_ms: 0,
        debounce_max_ms: 8000,
        watchdog_ms: TURN_WATCHDOG_MS,
        job_grace_ms: JOB_GRACE_MS,
        adaptive: Some(crate::chat::debounce::Policy::Adaptive { group: false }),
        early_start: true,
    };

    #[test]
    fn a_lone_message_starts_its_turn_at_once_and_carries_its_quiet_window() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 1000));
        assert_eq!(s.due(1000, &EARLY), Due::StartTurn, "no waiting for the quiet window");
        assert_eq!(s.next_wake(&EARLY, false, 1000), Some(1000));
        let t = s.begin_due_turn(1005, "c", 1, None, &EARLY).unwrap();
        let window = 1000 + crate::chat::debounce::PRIVATE_QUIET_MS;
        assert_eq!(t.early_until_ms, Some(window));
        assert_eq!(s.turn().unwrap().early_until_ms, Some(window), "stored with the turn");
        // Nothing may go out while a newer message could still abandon it.
        assert!(!s.commit_turn(&t.turn_id, 5, window - 1));
        assert!(s.commit_turn(&t.turn_id, 5, window), "its window over: it is the burst's answer");
    }

    #[test]
    fn without_early_starts_the_burst_waits_its_window_as_before() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 1000));
        let off = Timing { early_start: false, ..EARLY };
        assert_eq!(s.due(1000, &off), Due::Nothing);
        let t = s.begin_due_turn(1400, "c", 1, None, &off).unwrap();
        assert_eq!(t.early_until_ms, None);
    }

    #[test]
    fn a_second_message_within_the_window_abandons_the_early_start_once() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 1000));
        let early = s.begin_due_turn(1000, "c", 1, None, &EARLY).unwrap();
        let out = s.signal(&sig(2, 1100));
        assert_eq!(out, SignalOutcome::Accepted { cancelled: None, abandoned: Some(early.turn_id.clone()) });
        assert!(s.turn().is_none(), "the early start is gone: its result would be superseded");
        assert_eq!(s.finish_turn(&early.turn_id, vec![send("half")], 1200), Finish::Superseded);
        let p = s.pending().unwrap();
        assert_eq!((p.first_ms, p.count, p.early_spent), (1000, 2, true), "the whole burst waits, spent for early starts");
        // The ordinary debounced turn: it waits the burst's window, not at once.
        let deadline = s.debounce_deadline(&EARLY).unwrap();
        assert!(deadline >= 1100 + crate::chat::debounce::BURST_QUIET_MS, "{deadline}");
        assert_eq!(s.due(1200, &EARLY), Due::Nothing);
        // More messages: still one burst, no second early start.
        s.signal(&sig(3, 1300));
        let d = s.debounce_deadline(&EARLY).unwrap();
        let t = s.begin_due_turn(d, "c", 2, None, &EARLY).unwrap();
        assert_eq!(t.early_until_ms, None, "never a second early start in one burst");
        assert_eq!(t.target_message_id, Some(30), "it answers the newest message");
        assert_eq!(s.signal(&sig(4, d + 1)), SignalOutcome::Accepted { cancelled: None, abandoned: None }, "an ordinary turn is never abandoned");
    }

    #[test]
    fn a_message_after_the_window_leaves_the_early_start_as_the_answer() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 1000));
        let t = s.begin_due_turn(1000, "c", 1, None, &EARLY).unwrap();
        let after = 1000 + crate::chat::debounce::PRIVATE_QUIET_MS;
        assert_eq!(s.signal(&sig(2, after)), SignalOutcome::Accepted { cancelled: None, abandoned: None });
        assert!(s.turn_of(&t.turn_id).is_some(), "a new burst: the running turn goes stale as before, never abandoned");
        assert_eq!(s.pending().map(|p| (p.count, p.early_spent)), Some((1, false)));
    }

    #[test]
    fn a_committed_or_redelivered_early_start_is_not_abandoned() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 1000));
        let t = s.begin_due_turn(1000, "c", 1, None, &EARLY).unwrap();
        assert_eq!(s.signal(&sig(1, 1100)), SignalOutcome::Duplicate, "a redelivery abandons nothing");
        assert!(s.turn_of(&t.turn_id).is_some());
        // A committed turn (its window over) keeps its place whatever the clock says.
        s.turn.as_mut().unwrap().committed = true;
        assert_eq!(s.signal(&sig(2, 1100)), SignalOutcome::Accepted { cancelled: None, abandoned: None });
    }

    #[test]
    fn an_early_start_state_round_trips_and_older_states_read_as_not_early() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 1000));
        s.begin_due_turn(1000, "c", 1, None, &EARLY).unwrap();
        s.signal(&sig(2, 1100));
        let back = load(Some(serde_json::Value::String(stored(&s)))).state;
        assert_eq!(back, s);
        let old = r#"{"generation":1,"pending":{"first_ms":5,"last_ms":5,"target_message_id":null,"trigger":"private","count":1},"turn":null,"plan":null,"turns_started":0,"replans_in_row":0,"seen":[1]}"#;
        let old = load(Some(serde_json::Value::String(old.into())));
        assert_eq!(old.error, None);
        assert!(!old.state.pending().unwrap().early_spent);
    }

    #[test]
    fn an_api_turn_is_claimed_in_one_step_and_only_when_nothing_runs() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let t = s.claim_api_turn(10, "c", 1).expect("nothing runs: claimed");
        assert!(s.pending().is_none(), "the API's message is the whole input");
        assert_eq!(s.claim_api_turn(11, "c", 2), None, "a turn runs: busy");
        s.finish_turn(&t.turn_id, vec![send("a")], 12);
        assert_eq!(s.claim_api_turn(13, "c", 3), None, "a plan runs: busy");
    }

    #[test]
    fn starting_over_forgets_the_burst_the_plan_and_the_crew_cycle_but_not_the_switch() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let t = s.begin_turn(10, "c", 1);
        s.finish_turn(&t.turn_id, vec![send("a"), send("b")], 20);
        s.signal(&sig(2, 30));
        s.set_crew_switch(Some(true));
        s.crew.as_mut().unwrap().cycle = Some(crate::crew_state::Cycle { generation: 2, target_message_id: None, trigger: Trigger::Private, taken: 1, quiet_in_row: 0, failed_in_row: 0, current: None, note: None });
        s.start_over();
        assert!(s.pending().is_none() && s.plan().is_none());
        assert!(s.crew.as_ref().unwrap().cycle.is_none());
        assert_eq!(s.crew_switch(), Some(true));
        assert_eq!(s.due(1_000_000, &T), Due::Nothing);
    }

    #[test]
    fn a_turn_stays_current_until_a_newer_message_unless_it_keeps_its_place() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let t = s.begin_turn(10, "c", 1);
        assert!(s.still_current(&t) && !t.keeps_its_place());
        s.signal(&sig(2, 20));
        assert!(!s.still_current(&t), "a newer message came");
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let t = s.begin_turn(10, "c", 1);
        assert!(s.commit_turn(&t.turn_id, 5, 0));
        s.signal(&sig(2, 20));
        assert!(s.still_current(&t) && s.turn().unwrap().keeps_its_place(), "committed: it keeps its place");
        assert!(s.pending().is_some(), "the newer message waits for its own turn");
    }

    #[test]
    fn work_in_flight_here_is_rechecked_in_seconds_never_at_once_nor_at_the_watchdog() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let turn = s.begin_turn(1000, "c", 1);
        // Running here: a re-check a few seconds on, not the 2-minute watchdog.
        assert_eq!(s.next_wake_here(&T, true, false, 1000), Some(1000 + RECHECK_MS));
        assert_eq!(s.next_wake(&T, true, 1000), Some(1000 + TURN_WATCHDOG_MS));
        // An instance that starts again holds nothing: the dead one's turn is due at once.
        assert_eq!(s.next_wake_here(&T, false, false, 2000), Some(2000));
        assert!(s.recover_turn(2000, false).is_some());
        // A plan step being carried out here: its due time is now, yet the alarm does not spin.
        s.finish_turn(&turn.turn_id, vec![send("a"), send("b")], 3000);
        assert_eq!(s.next_wake(&T, false, 3000), Some(3000));
        assert_eq!(s.next_wake_here(&T, false, true, 3000), Some(3000 + RECHECK_MS));
        // However long it runs, and whatever the turn flag says, a step being carried out here
        // is never "due now": the alarm never fires in a loop while it runs (the e2e test in
        // alarm.test.js forces the race with new messages arriving).
        for at in [3000, 3001, 3500, 60_000] {
            for in_flight in [false, true] {
                let wake = s.next_wake_here(&T, in_flight, true, at).unwrap();
                assert!(wake > at && wake <= at + RECHECK_MS, "at {at} (in flight {in_flight}): woke at {wake}");
            }
        }
        // Not advancing any more: due now again.
        assert!(s.next_wake_here(&T, false, false, 60_000).is_some_and(|w| w <= 60_000));
    }

    #[test]
    fn a_burst_is_debounced_into_one_turn() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        s.signal(&sig(2, 100));
        s.signal(&sig(3, 200));
        assert_eq!(s.next_wake(&T, false, 0), Some(1200));
        assert_eq!(s.due(1100, &T), Due::Nothing);
        assert_eq!(s.due(1200, &T), Due::StartTurn);
        let turn = s.begin_turn(1200, "c", 7);
        assert_eq!(turn.target_message_id, Some(30), "the latest message is the target");
        assert_eq!(turn.turn_id, "c/1200-00000007");
        assert_eq!(s.due(1300, &T), Due::Nothing, "never two turns at once");
    }

    #[test]
    fn debounce_is_capped_by_the_maximum_wait() {
        let mut s = ChatState::default();
        for i in 0..20 {
            s.signal(&sig(i, i * 900));
        }
        assert_eq!(s.next_wake(&T, false, 0), Some(5000));
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
        let turn = s.begin_turn(1000, "c", 7);
        let steps = vec![send("one"), Step::Wait { seconds: 2 }, send("two")];
        assert_eq!(s.finish_turn(&turn.turn_id, steps, 1500), Finish::Execute);
        assert_eq!(s.due(1500, &T), Due::AdvancePlan);
        s.step_done(&turn.turn_id, 0, 1500);
        s.step_done(&turn.turn_id, 1, 3500);
        assert_eq!(s.due(2000, &T), Due::Nothing);
        let out = s.signal(&sig(2, 2500));
        assert_eq!(out, SignalOutcome::Accepted { cancelled: Some((turn.turn_id.clone(), 2)), abandoned: None });
        assert!(s.plan.is_none());
        assert_eq!(s.next_wake(&T, false, 0), Some(3500), "replans after the debounce");
    }

    #[test]
    fn a_message_during_the_model_call_makes_the_plan_stale() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let t1 = s.begin_turn(1000, "c", 7);
        s.signal(&sig(2, 1200));
        assert_eq!(s.finish_turn(&t1.turn_id, vec![send("old")], 2000), Finish::Stale);
        assert!(s.plan.is_none());
        assert_eq!(s.due(2200, &T), Due::StartTurn);
        // After MAX_REPLANS stale results in a row, the plan is carried out anyway.
        for i in 0..MAX_REPLANS {
            let t = s.begin_turn(3000, "c", 7);
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
        let t = s.begin_turn(1000, "c", 7);
        assert!(s.recover_turn(2000, true).is_none());
        assert_eq!(s.next_wake(&T, true, 0), Some(1000 + TURN_WATCHDOG_MS));
        // The instance died: a new message arrives at a fresh instance.
        s.signal(&sig(2, 1500));
        assert_eq!(s.next_wake(&T, false, 1600), Some(1600), "recovered at once, not at the watchdog");
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
        let t = s.begin_turn(1000, "c", 7);
        s.turn_waiting(&t.turn_id, 50_000);
        assert!(s.recover_turn(2000, false).is_none(), "a waiting turn is not dead");
        assert_eq!(s.next_wake(&T, false, 2000), Some(50_000), "woken by the job, or by its deadline");
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
        let t = s.begin_turn(1000, "c", 7);
        s.finish_turn(&t.turn_id, vec![send("a"), send("b")], 1000);
        s.step_waiting(&t.turn_id, 0, 60_000);
        assert!(s.plan.as_ref().unwrap().waiting_job);
        assert_eq!(s.due(5000, &T), Due::Nothing);
        assert_eq!(s.start_step(&t.turn_id, 0), None, "a waiting step is not started");
        assert!(!s.resume_step(&t.turn_id, 1), "not the waiting step");
        assert!(s.resume_step(&t.turn_id, 0));
        assert_eq!(s.start_step(&t.turn_id, 0), Some(1));
        assert_eq!(s.start_step(&t.turn_id, 0), Some(2), "a restart of the same step counts");
        assert!(!s.resume_step(&t.turn_id, 0), "resumed once");
        s.step_done(&t.turn_id, 0, 5000);
        assert!(!s.resume_step(&t.turn_id, 0), "a done step's job is not wanted");
        s.step_done(&t.turn_id, 1, 5000);
        assert!(s.plan.is_none());
    }

    #[test]
    fn a_waiting_turn_whose_job_is_lost_is_taken_over_at_its_deadline() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let t = s.begin_turn(1000, "c", 1);
        s.turn_waiting(&t.turn_id, 10_000);
        assert!(!s.orphaned(false, 9_999), "before the deadline the job may still come");
        assert_eq!(s.next_wake(&T, false, 2000), Some(10_000));
        // New messages do not start a second turn, but the deadline still holds.
        s.signal(&sig(2, 3000));
        assert_eq!(s.due(9_000, &T), Due::Nothing);
        let r = s.recover_turn(10_000, false).expect("the lost job's turn is taken over");
        assert_eq!(r.turn_id, t.turn_id);
        assert_eq!(r.attempt, 2);
        assert_eq!(r.target_message_id, Some(20));
        assert!(!s.turn.as_ref().unwrap().waiting_retry);
        // The lost job turning up late finds nothing to resume.
        assert!(s.resume_turn(&t.turn_id, 2, 11_000).is_none());
    }

    #[test]
    fn a_wait_stored_without_a_deadline_is_not_a_wait_forever() {
        // State written by the version before deadlines: waiting, no deadline.
        let json = serde_json::json!({
            "generation": 1, "pending": null, "turns_started": 1, "replans_in_row": 0, "seen": [1],
            "turn": {"turn_id": "c/1", "started_ms": 0, "generation": 1, "target_message_id": 5,
                     "trigger": "private", "attempt": 1, "waiting_retry": true},
            "plan": null
        });
        let loaded = load(Some(json));
        assert_eq!(loaded.error, None);
        let mut s = loaded.state;
        assert!(s.orphaned(false, 1));
        assert!(s.recover_turn(1, false).is_some());
    }

    #[test]
    fn a_lost_step_job_is_taken_over_at_its_deadline() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let t = s.begin_turn(1000, "c", 1);
        s.finish_turn(&t.turn_id, vec![send("a")], 1000);
        s.step_waiting(&t.turn_id, 0, 20_000);
        assert_eq!(s.next_wake(&T, false, 5000), Some(20_000));
        assert_eq!(s.due(19_999, &T), Due::Nothing);
        assert!(!s.take_over_lost_step(19_999));
        assert_eq!(s.due(20_000, &T), Due::AdvancePlan);
        assert!(s.take_over_lost_step(20_000));
        assert_eq!(s.start_step(&t.turn_id, 0), Some(1));
        assert!(!s.resume_step(&t.turn_id, 0), "the late job finds the step taken over");
    }

    #[test]
    fn a_live_turn_past_its_watchdog_never_arms_the_alarm_in_the_past() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        s.begin_turn(1000, "c", 1);
        let wd = T.watchdog_ms;
        assert_eq!(s.next_wake(&T, true, 1000), Some(1000 + wd));
        // The model call is still running long after the watchdog: every wake is in the future
        // and the alarm has nothing to do, so it must not be due again at once.
        for now in [1000 + wd, 1000 + wd + 1, 1000 + 5 * wd + 17] {
            let wake = s.next_wake(&T, true, now).unwrap();
            assert!(wake > now, "wake {wake} at now {now}");
            assert_eq!(wake, now + wd, "one watchdog period later");
            assert_eq!(s.due(now, &T), Due::Nothing);
            assert!(s.recover_turn(now, true).is_none());
        }
    }

    #[test]
    fn turn_ids_never_repeat_even_after_the_state_is_lost() {
        let mut a = ChatState::default();
        a.signal(&sig(1, 0));
        let first = a.begin_turn(1000, "c", 0xdead_beef);
        // The stored state is lost: a fresh state starts its counter again.
        let mut b = ChatState::default();
        b.signal(&sig(2, 0));
        let second = b.begin_turn(1000, "c", 0x0bad_cafe);
        assert_ne!(first.turn_id, second.turn_id, "same time, different nonce");
        let third = b.begin_turn(1001, "c", 0xdead_beef);
        assert_ne!(first.turn_id, third.turn_id, "same nonce, different time");
        assert!(first.turn_id.starts_with("c/"));
    }

    #[test]
    fn a_state_that_does_not_decode_is_an_error_not_a_silent_reset() {
        let loaded = load(Some(serde_json::json!({"generation": "not a number"})));
        assert!(loaded.error.as_deref().is_some_and(|e| e.contains("unreadable")));
        assert_eq!(loaded.state, ChatState::default());
        assert_eq!(load(None), Loaded { state: ChatState::default(), error: None });
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let back = load(Some(serde_json::to_value(&s).unwrap()));
        assert_eq!(back, Loaded { state: s.clone(), error: None });
        // Stored as text (what the object writes now) it reads back the same; broken text is
        // an error too.
        assert_eq!(load(Some(serde_json::Value::String(stored(&s)))), Loaded { state: s, error: None });
        assert!(load(Some(serde_json::Value::String("{\"generation\":".into()))).error.is_some());
    }

    #[test]
    fn a_plan_keeps_its_step_calls_and_an_older_state_reads_without_them() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let t = s.begin_turn(1000, "c", 1);
        s.finish_turn(&t.turn_id, vec![send("a"), Step::Wait { seconds: 1 }, send("b")], 1000);
        assert_eq!(s.plan.as_ref().unwrap().step_calls, None, "unknown until the edge keeps them");
        s.keep_step_calls("another turn", vec![Some(9)]);
        assert_eq!(s.plan.as_ref().unwrap().step_calls, None, "only for the plan's own turn");
        s.keep_step_calls(&t.turn_id, vec![Some(0), Some(1), None]);
        assert_eq!(s.plan.as_ref().unwrap().step_calls, Some(vec![Some(0), Some(1), None]));
        assert_eq!(load(Some(serde_json::Value::String(stored(&s)))).state, s, "kept across a restart");
        // A state written before the field existed: the plan loads, its calls unknown (D1 has them).
        let mut old = serde_json::to_value(&s).unwrap();
        old["plan"].as_object_mut().unwrap().remove("step_calls");
        let back = load(Some(old));
        assert_eq!(back.error, None);
        assert_eq!(back.state.plan.unwrap().step_calls, None);
    }

    #[test]
    fn a_cancelled_step_is_not_current_and_cannot_be_started_or_marked_done() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let t = s.begin_turn(1000, "c", 1);
        s.finish_turn(&t.turn_id, vec![send("a"), send("b")], 1000);
        assert_eq!(s.start_step(&t.turn_id, 0), Some(1));
        assert!(s.is_current_step(&t.turn_id, 0));
        // An await later, a new message has cancelled the plan.
        s.signal(&sig(2, 1100));
        assert!(!s.is_current_step(&t.turn_id, 0));
        assert_eq!(s.start_step(&t.turn_id, 0), None);
        s.step_done(&t.turn_id, 0, 1200);
        assert!(s.plan.is_none(), "done over cancelled changes nothing");
    }

    #[test]
    fn an_owed_apology_stays_owed_until_sent_and_is_owed_once() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let t = s.begin_turn(1000, "c", 1);
        s.give_up(&t.turn_id, 2000);
        s.give_up(&t.turn_id, 2500);
        assert!(s.turn.is_none());
        assert_eq!(s.apologies.len(), 1, "one apology per turn");
        assert_eq!(s.next_wake(&T, false, 2000), Some(2000));
        assert_eq!(s.apology_due(2000).map(|a| a.0), Some(t.turn_id.clone()));
        // The send yielded (budget) or failed: it stays owed, later.
        assert!(s.apology_later(&t.turn_id, 2000, 1000));
        assert_eq!(s.apology_due(2500), None);
        assert_eq!(s.next_wake(&T, false, 2500), Some(3000));
        assert!(s.apology_due(3000).is_some());
        s.apology_done(&t.turn_id);
        assert_eq!(s.next_wake(&T, false, 3000), None);
        // A turn that is gone (finished, or already given up) is owed nothing more.
        s.give_up(&t.turn_id, 4000);
        assert!(s.apologies.is_empty(), "a late dead letter does not apologise again");
        // Until it goes out, however many attempts that takes, but not forever: a day after
        // it was owed it is given up (five-minute retries for a day are 288 attempts).
        s.signal(&sig(9, 0));
        s.begin_turn(0, "c", 2);
        let x = s.turn.as_ref().unwrap().turn_id.clone();
        s.give_up(&x, 1_000);
        let mut now = 1_000;
        for _ in 0..200 {
            assert!(s.apology_due(now).is_some());
            assert!(s.apology_later(&x, now, 300_000), "still owed at {now}");
            now += 300_000;
        }
        assert!(s.apology_due(1_000 + APOLOGY_DEADLINE_MS - 1).is_some());
        assert!(s.apology_later(&x, 1_000 + APOLOGY_DEADLINE_MS - 1, 1), "still owed just before its day is over");
        assert!(s.apology_due(1_000 + APOLOGY_DEADLINE_MS).is_some());
        assert!(!s.apology_later(&x, 1_000 + APOLOGY_DEADLINE_MS, 10), "given up a day after it was owed");
        assert!(s.apologies.is_empty());
    }

    fn run(id: i64, due_ms: i64) -> ScheduledRun {
        ScheduledRun { schedule_id: id, due_ms, next_ms: None, late_ms: 0, text: "call mum".into(), timezone: "UTC".into(), repeat: None, creator_user_id: Some(5) }
    }

    #[test]
    fn a_schedule_shares_the_one_alarm_with_the_debounce_earliest_first() {
        let mut s = ChatState::default();
        s.set_next_schedule(Some(10_000));
        assert_eq!(s.next_wake(&T, false, 0), Some(10_000));
        assert_eq!(s.due(9_999, &T), Due::Nothing);
        assert_eq!(s.due(10_000, &T), Due::Schedules);
        // A burst due earlier than the schedule goes first, and the reverse.
        s.signal(&sig(1, 500));
        assert_eq!(s.next_wake(&T, false, 0), Some(1_500));
        assert_eq!(s.due(20_000, &T), Due::StartTurn, "the burst was due first");
        s.set_next_schedule(Some(1_000));
        assert_eq!(s.due(20_000, &T), Due::Schedules, "the schedule was due first");
        s.set_next_schedule(Some(30_000));
        assert_eq!(s.due(20_000, &T), Due::StartTurn);
        // Never while a turn runs: single flight.
        let t = s.begin_turn(20_000, "c", 1);
        assert_eq!(s.due(40_000, &T), Due::Nothing);
        s.finish_turn(&t.turn_id, vec![send("a")], 40_000);
        assert_eq!(s.due(40_000, &T), Due::AdvancePlan, "and not before the plan is done");
        s.step_done(&t.turn_id, 0, 40_000);
        assert_eq!(s.due(40_000, &T), Due::Schedules);
        s.set_next_schedule(None);
        assert_eq!(s.next_wake(&T, false, 40_000), None);
    }

    #[test]
    fn a_committed_answer_is_carried_out_and_newer_messages_get_their_own_turn() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let t = s.begin_turn(100, "c", 3);
        assert!(s.commit_turn(&t.turn_id, 5, 0), "no newer message: the first chunk may go out");
        assert!(s.turn.as_ref().unwrap().committed);
        // A message during the stream does not make it stale once committed.
        s.signal(&sig(2, 200));
        assert!(s.commit_turn(&t.turn_id, 9, 0), "committed stays committed");
        assert_eq!(s.turn.as_ref().unwrap().committed_upto, Some(5), "the first commit's bound stays");
        assert_eq!(s.finish_turn(&t.turn_id, vec![send("long answer"), send("more")], 300), Finish::Execute);
        assert!(s.plan.as_ref().unwrap().committed);
        assert!(s.pending.is_some(), "the newer message waits, pending");
        // A message while its plan runs does not cancel it either.
        assert_eq!(s.signal(&sig(3, 400)), SignalOutcome::Accepted { cancelled: None, abandoned: None });
        assert_eq!(s.due(5_000, &T), Due::AdvancePlan);
        s.step_done(&t.turn_id, 0, 500);
        s.step_done(&t.turn_id, 1, 500);
        assert_eq!(s.due(5_000, &T), Due::StartTurn, "then the newer messages' own turn");
    }

    #[test]
    fn a_turn_a_newer_message_made_stale_cannot_commit() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let t = s.begin_turn(100, "c", 3);
        s.signal(&sig(2, 200));
        assert!(!s.commit_turn(&t.turn_id, 5, 0), "nothing may go out: the turn will be replanned");
        assert!(!s.commit_turn("c/other", 5, 0), "nor for a turn that is not the running one");
        assert_eq!(s.finish_turn(&t.turn_id, vec![send("old")], 300), Finish::Stale);
    }

    #[test]
    fn a_committed_turn_taken_over_leaves_newer_messages_pending() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let t = s.begin_turn(100, "c", 3);
        assert!(s.commit_turn(&t.turn_id, 5, 0));
        s.signal(&sig(2, 200));
        let r = s.recover_turn(1_000, false).expect("a dead instance's turn is taken over");
        assert!(r.committed && s.pending.is_some(), "the newer message keeps its own turn");
        assert_eq!(r.committed_upto, Some(5), "and the retry answers nothing newer than the first attempt saw");
        assert_eq!(s.finish_turn(&t.turn_id, vec![send("answer")], 1_100), Finish::Execute);
    }

    #[test]
    fn a_scheduled_turn_leaves_peoples_messages_to_their_own_turn() {
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let t = s.begin_scheduled_turn(100, "c", 3, run(7, 100));
        assert_eq!(t.trigger, Trigger::Schedule);
        assert_eq!(t.target_message_id, None);
        assert!(s.pending.is_some(), "the pending burst stays pending");
        // A message during the scheduled call does not make it stale.
        s.signal(&sig(2, 200));
        assert_eq!(s.finish_turn(&t.turn_id, vec![send("reminder"), send("more")], 300), Finish::Execute);
        // A message while its plan runs does not cancel it.
        assert_eq!(s.signal(&sig(3, 400)), SignalOutcome::Accepted { cancelled: None, abandoned: None });
        assert!(s.plan.is_some());
        assert_eq!(s.due(5_000, &T), Due::AdvancePlan);
        s.step_done(&t.turn_id, 0, 500);
        s.step_done(&t.turn_id, 1, 500);
        assert_eq!(s.due(5_000, &T), Due::StartTurn, "then the people's turn");
    }

    #[test]
    fn a_scheduled_turn_survives_a_restart_without_absorbing_messages() {
        let mut s = ChatState::default();
        let t = s.begin_scheduled_turn(100, "c", 3, run(7, 100));
        s.signal(&sig(1, 150));
        let r = s.recover_turn(200, false).expect("taken over");
        assert_eq!(r.turn_id, t.turn_id);
        assert_eq!(r.scheduled, Some(run(7, 100)), "the run is carried, so it is neither lost nor fired twice");
        assert!(s.pending.is_some());
        s.turn_waiting(&t.turn_id, 9_000);
        let r = s.resume_turn(&t.turn_id, 3, 1_000).unwrap();
        assert!(r.scheduled.is_some() && s.pending.is_some());
    }

    #[test]
    fn giving_up_a_scheduled_run_owes_its_text_not_an_apology() {
        let mut s = ChatState::default();
        let t = s.begin_scheduled_turn(100, "c", 3, run(7, 100));
        s.give_up(&t.turn_id, 200);
        assert_eq!(s.apology_due(200), Some((t.turn_id.clone(), Some("call mum".into()))));
        // Its plan failing for good owes the text too; an ordinary turn owes the apology.
        let mut s = ChatState::default();
        let t = s.begin_scheduled_turn(100, "c", 3, run(7, 100));
        s.finish_turn(&t.turn_id, vec![send("x")], 150);
        s.give_up(&t.turn_id, 200);
        assert_eq!(s.apology_due(200).and_then(|a| a.1), Some("call mum".into()));
        // A plan that already sent part of it owes the apology for the rest, not the text.
        let mut s = ChatState::default();
        let t = s.begin_scheduled_turn(100, "c", 3, run(7, 100));
        s.finish_turn(&t.turn_id, vec![send("part one"), send("part two")], 150);
        s.step_done(&t.turn_id, 0, 150);
        s.give_up(&t.turn_id, 200);
        assert_eq!(s.apology_due(200), Some((t.turn_id.clone(), None)));
        let mut s = ChatState::default();
        s.signal(&sig(1, 0));
        let t = s.begin_turn(100, "c", 3);
        s.give_up(&t.turn_id, 200);
        assert_eq!(s.apology_due(200), Some((t.turn_id, None)));
    }

    #[test]
    fn a_text_owed_without_a_turn_is_sent_once() {
        let mut s = ChatState::default();
        s.owe_text("c/1-a", "call mum".into(), 100);
        s.owe_text("c/1-a", "call mum".into(), 100);
        assert_eq!(s.apologies.len(), 1);
        assert_eq!(s.next_wake(&T, false, 50), Some(100));
        assert_eq!(s.apology_due(100), Some(("c/1-a".into(), Some("call mum".into()))));
        s.apology_done("c/1-a");
        assert_eq!(s.next_wake(&T, false, 150), None);
    }

    #[test]
    fn a_state_stored_before_schedules_still_loads() {
        let old = serde_json::json!({"generation": 3, "pending": null, "turn": {"turn_id": "c/1-0", "started_ms": 1, "generation": 3,
            "target_message_id": 4, "trigger": "private", "attempt": 1, "waiting_retry": false}, "plan": null, "turns_started": 3,
            "replans_in_row": 0, "seen": [1, 2], "apologies": [{"turn_id": "c/0-0", "attempts": 1, "not_before_ms": 5}]});
        let loaded = load(Some(old));
        assert_eq!(loaded.error, None);
        assert_eq!(loaded.state.next_schedule_ms, None);
        assert_eq!(loaded.state.turn.unwrap().scheduled, None);
        assert_eq!(loaded.state.apologies[0].text, None);
    }
}
