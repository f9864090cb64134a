//! What the chat object does next, as values. The object asks its state once per event and
//! once after each effect's outcome ([`ChatState::alarm_effect`], [`ChatState::next_owed`],
//! [`ChatState::owed_outcome`], [`ChatState::take_over`], [`ChatState::step_start`],
//! [`turn_end`]) and carries out what it is told; the limits and the clock come in as values.
//! The decisions here were the edge's: when a taken-over turn or a restarted step gives up,
//! when a retry job counts as lost, what a finished turn's result means, the text an owed
//! message carries, and how much of an invocation's subrequests the alarm's work may use.
//!
//! Invariants (INVARIANTS.md): "Every waiting state has a deadline" ([`job_deadline`]), "One
//! apology, never lost" ([`ChatState::owed_outcome`]), "Bounded invocations" (the alarm's
//! subrequest headroom: [`Limits`]).

use super::{ChatState, Due, Finish, Timing, TurnRun};
use crate::background::jobs::retry_delay_ms;
use crate::chat::status::TurnStatus;

/// What every apology says: the user's message could not be answered.
pub const APOLOGY: &str =
    "Sorry, I couldn't answer that because of a technical problem on my side. Please try again in a little while.";

/// Subrequests one owed message costs (its outbox read, the send, the mark).
pub const OWED_SEND_COST: u32 = 3;

/// The object's limits, from the configuration and the platform (passed in, never read here).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Attempts of a turn before it is given up (`MAX_TURN_ATTEMPTS`).
    pub max_turn_attempts: u32,
    /// Starts of one plan step before the plan is given up (`MAX_SEND_ATTEMPTS`).
    pub max_send_attempts: u32,
    /// The first backoff step (`RETRY_BASE_MS`).
    pub retry_base_ms: u64,
    /// How late a retry job may be before it counts as lost (`JOB_GRACE_MS`).
    pub job_grace_ms: u64,
    /// Subrequests an invocation may spend on the alarm's own sends and plan steps.
    pub subrequest_budget: u32,
    /// The most subrequests an invocation may have spent for a turn to start in it.
    pub turn_start_max: u32,
}

impl Limits {
    /// Whether an invocation that spent `spent` subrequests has room for work costing `cost`.
    pub fn room_for(&self, spent: u32, cost: u32) -> bool {
        spent.saturating_add(cost) <= self.subrequest_budget
    }
}

/// The alarm's next piece of work. The object carries it out and asks again after
/// [`AlarmEffect::SendOwed`]; every other effect ends the alarm's work (then it arms).
#[derive(Debug, Clone, PartialEq)]
pub enum AlarmEffect {
    /// Send the owed message of `turn_id` (an apology, or a scheduled run's own text), then
    /// tell the state how it went ([`ChatState::owed_outcome`]).
    SendOwed { turn_id: String, text: String },
    /// The owed messages took this invocation's room: the rest is due at once in the next.
    Yield,
    /// Drive this turn, taken over from a dead instance or a lost retry job.
    DriveTurn(TurnRun),
    /// The taken-over turn keeps dying (a crash on this input?): give it up and tell the user.
    GiveUp { turn_id: String, reason: &'static str },
    /// The debounce is over: start the burst's turn.
    StartTurn,
    /// Carry out the plan's due steps.
    AdvancePlan,
    /// A schedule of the chat is due.
    FireSchedules,
    /// Nothing is due.
    Nothing,
}

/// How sending an owed message went.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Owed {
    /// Sent (or found sent in the outbox).
    Sent,
    /// It can never be sent (the chat blocked the bot): dropped.
    Never,
    /// Telegram asked to wait (`after_ms`, if it said) or failed transiently: later, with
    /// backoff (`jitter` uniform in [0, 1)).
    Retry { after_ms: Option<u64>, jitter: f64 },
    /// This invocation's subrequests are spent: in the next one.
    OutOfRoom,
}

/// What a taken-over turn does.
#[derive(Debug, Clone, PartialEq)]
pub enum TakeOver {
    Drive(TurnRun),
    GiveUp { turn_id: String, reason: &'static str },
}

/// Whether a plan step may be started.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepStart {
    /// Carry it out.
    Go,
    /// It is no longer the current step (cancelled or done meanwhile): do nothing.
    Gone,
    /// It kept being restarted (its instance keeps dying): give the plan up.
    GiveUp,
}

/// What a turn that ended with a plan means: the turn's status to record now (if any), and
/// what follows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TurnEnd {
    pub status: Option<TurnStatus>,
    pub then: AfterTurn,
}

/// What follows a turn's answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AfterTurn {
    /// Carry out its plan.
    Advance,
    /// New messages came during the model call: show the first sign again; the burst is
    /// replanned by its own turn.
    Replan,
    /// Nothing (silence on purpose, or a newer turn took over).
    Nothing,
}

/// What a turn whose model call failed in a way that may pass does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transient {
    /// It waits for its retry job (with a deadline, after which the alarm takes it over).
    Wait,
    /// A scheduled run whose next attempt would come too late: its own text goes out now and
    /// the turn is given up (`schedule::falls_back`).
    FallBack,
}

/// What a turn's [`Finish`] means (`silent`: the plan sends nothing).
pub fn turn_end(finish: Finish, silent: bool) -> TurnEnd {
    match finish {
        // Silence on purpose: the turn's record already says done (the answer was recorded).
        Finish::Execute if silent => TurnEnd { status: None, then: AfterTurn::Nothing },
        Finish::Execute => TurnEnd { status: None, then: AfterTurn::Advance },
        Finish::Stale => TurnEnd { status: Some(TurnStatus::Stale), then: AfterTurn::Replan },
        Finish::Superseded => TurnEnd { status: None, then: AfterTurn::Nothing },
    }
}

/// The text of an owed message: a scheduled run's own text as it was set (escaped, it is
/// sent as the bot's Markdown), else the apology.
pub fn owed_text(scheduled: Option<&str>) -> String {
    scheduled.map_or_else(|| APOLOGY.to_string(), |t| format!("⏰ {}", crate::format::escape_markdown(t)))
}

/// When a retry job for `attempt`, asked to wait `after_ms`, counts as lost: the longest
/// backoff it could get, the server's wait, one second, and the grace.
pub fn job_deadline(now: i64, attempt: u32, after_ms: Option<u64>, lim: &Limits) -> i64 {
    let longest = retry_delay_ms(attempt, lim.retry_base_ms, after_ms, 1.0);
    now.saturating_add(longest as i64).saturating_add(1000).saturating_add(lim.job_grace_ms as i64)
}

/// Whether the object writes its alarm: it wants `wanted` (`None`: no alarm; a time already
/// made later than `now`), it last set `armed` (`None`: unknown, as after a start or once the
/// alarm fired; `Some(None)`: deleted), and the work is held here (`busy`). Not when the same
/// time is set already, nor, for held work, when a re-check is already set within the
/// re-check period (it comes as soon, and re-arms then): each write is a billed row.
pub fn alarm_write(armed: Option<Option<i64>>, wanted: Option<i64>, busy: bool, now: i64) -> bool {
    if armed == Some(wanted) {
        return false;
    }
    let recheck_set = armed.flatten().is_some_and(|t| t > now && t <= now.saturating_add(super::RECHECK_MS));
    !(busy && recheck_set)
}

impl ChatState {
    /// The alarm's next piece of work at `now`, this instance running a turn or not
    /// (`in_flight`), having spent `spent` subrequests. Owed messages first (while they fit,
    /// and while `owed_now`: the alarm stops them after one that had to wait), then a turn to
    /// take over, then what is due. Returns also whether a step's retry job was overdue and
    /// the step was taken over here.
    pub fn alarm_effect(&mut self, now: i64, t: &Timing, in_flight: bool, spent: u32, owed_now: bool, lim: &Limits) -> (AlarmEffect, bool) {
        let lost_step = self.take_over_lost_step(now);
        if let Some((turn_id, text)) = owed_now.then(|| self.next_owed(now, spent, lim)).flatten() {
            return (AlarmEffect::SendOwed { turn_id, text }, lost_step);
        }
        if spent > lim.turn_start_max {
            return (AlarmEffect::Yield, lost_step);
        }
        let effect = match self.take_over(now, in_flight, lim) {
            Some(TakeOver::Drive(turn)) => AlarmEffect::DriveTurn(turn),
            Some(TakeOver::GiveUp { turn_id, reason }) => AlarmEffect::GiveUp { turn_id, reason },
            None => match self.due(now, t) {
                Due::StartTurn => AlarmEffect::StartTurn,
                Due::AdvancePlan => AlarmEffect::AdvancePlan,
                Due::Schedules => AlarmEffect::FireSchedules,
                Due::Nothing => AlarmEffect::Nothing,
            },
        };
        (effect, lost_step)
    }

    /// The owed message to send now, if one is due and its sends fit in the invocation's
    /// room (counts the attempt): its turn and its text.
    pub fn next_owed(&mut self, now: i64, spent: u32, lim: &Limits) -> Option<(String, String)> {
        if !lim.room_for(spent, OWED_SEND_COST) {
            return None;
        }
        let (turn_id, scheduled) = self.apology_due(now)?;
        Some((turn_id, owed_text(scheduled.as_deref())))
    }

    /// How sending the owed message of `turn_id` went. Returns false when it stays owed no
    /// longer though unsent: retried for a day ([`super::APOLOGY_DEADLINE_MS`]), then given up.
    pub fn owed_outcome(&mut self, turn_id: &str, outcome: Owed, now: i64, lim: &Limits) -> bool {
        let delay = match outcome {
            Owed::Sent | Owed::Never => {
                self.apology_done(turn_id);
                return true;
            }
            Owed::Retry { after_ms, jitter } => retry_delay_ms(self.apology_attempts(turn_id), lim.retry_base_ms, after_ms, jitter) as i64,
            Owed::OutOfRoom => 0,
        };
        self.apology_later(turn_id, now, delay)
    }

    /// Takes over an orphaned turn ([`ChatState::recover_turn`]): driven again, or given up
    /// once it has been attempted more than `max_turn_attempts` times.
    pub fn take_over(&mut self, now: i64, in_flight: bool, lim: &Limits) -> Option<TakeOver> {
        let turn = self.recover_turn(now, in_flight)?;
        Some(if turn.attempt > lim.max_turn_attempts {
            TakeOver::GiveUp { turn_id: turn.turn_id, reason: "the turn kept failing" }
        } else {
            TakeOver::Drive(turn)
        })
    }

    /// Records that `step` of `turn_id` is being started ([`ChatState::start_step`]) and says
    /// whether it may be: a step started more than `max_send_attempts` times gives its plan up.
    pub fn step_start(&mut self, turn_id: &str, step: usize, lim: &Limits) -> StepStart {
        match self.start_step(turn_id, step) {
            None => StepStart::Gone,
            Some(starts) if starts > lim.max_send_attempts => StepStart::GiveUp,
            Some(_) => StepStart::Go,
        }
    }

    /// Step `step` of `turn_id`'s plan failed in a way that may pass (Telegram asked to wait
    /// `after_ms`, if it said) on its job's `attempt`: it waits for its retry job until the
    /// deadline of that job's longest backoff ([`job_deadline`]), then the alarm takes it over.
    pub fn step_failed(&mut self, turn_id: &str, step: usize, attempt: u32, now: i64, after_ms: Option<u64>, lim: &Limits) {
        self.step_waiting(turn_id, step, job_deadline(now, attempt, after_ms, lim));
    }

    /// Turn `turn_id`'s model call failed in a way that may pass (Gemini asked to wait
    /// `after_ms`, if it said): a scheduled run whose next attempt would come past
    /// `fallback_ms` after its due time falls back to its own text; any other turn waits for
    /// its retry job, until the deadline of that job's longest backoff ([`job_deadline`]).
    pub fn turn_failed(&mut self, turn_id: &str, now: i64, after_ms: Option<u64>, fallback_ms: i64, lim: &Limits) -> Transient {
        let turn = self.turn_of(turn_id);
        let attempt = turn.map_or(1, |t| t.attempt);
        if let Some(due) = turn.and_then(|t| t.scheduled.as_ref().map(|r| r.due_ms)) {
            let retry_in = retry_delay_ms(attempt, lim.retry_base_ms, after_ms, 1.0);
            if crate::chat::schedule::falls_back(due, now, retry_in as i64, fallback_ms) {
                return Transient::FallBack;
            }
        }
        self.turn_waiting(turn_id, job_deadline(now, attempt, after_ms, lim));
        Transient::Wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat_state::{Signal, JOB_GRACE_MS, TURN_WATCHDOG_MS};
    use crate::telegram::gating::Trigger;

    const T: Timing = Timing { debounce_ms: 1000, debounce_max_ms: 5000, watchdog_ms: TURN_WATCHDOG_MS, job_grace_ms: JOB_GRACE_MS, adaptive: None, early_start: false };
    const L: Limits = Limits { max_turn_attempts: 3, max_send_attempts: 2, retry_base_ms: 2000, job_grace_ms: 300_000, subrequest_budget: 35, turn_start_max: 6 };

    fn signalled(at: i64) -> ChatState {
        let mut st = ChatState::default();
        st.signal(&Signal { update_id: 1, target_message_id: Some(10), trigger: Trigger::Private, at_ms: at });
        st
    }

    #[test]
    fn the_alarm_sends_what_is_owed_first_then_starts_the_due_turn() {
        let mut st = signalled(0);
        st.owe_text("t0", "water the plants".into(), 0);
        let (effect, lost) = st.alarm_effect(5000, &T, false, 0, true, &L);
        assert!(!lost);
        assert_eq!(effect, AlarmEffect::SendOwed { turn_id: "t0".into(), text: "⏰ water the plants".into() });
        assert_eq!(st.alarm_effect(5000, &T, false, 3, false, &L).0, AlarmEffect::StartTurn, "owed messages paused: the turn still starts");
        assert!(st.owed_outcome("t0", Owed::Sent, 5000, &L));
        assert_eq!(st.alarm_effect(5000, &T, false, 3, true, &L).0, AlarmEffect::StartTurn);
    }

    #[test]
    fn owed_messages_that_do_not_fit_wait_and_a_spent_alarm_yields_its_turn() {
        let mut st = signalled(0);
        st.give_up("gone", 0); // no such turn: nothing owed
        assert_eq!(st.next_owed(5000, 0, &L), None);
        st.owe_text("t0", "x".into(), 0);
        assert_eq!(st.next_owed(5000, 33, &L), None, "33 + 3 is over the budget of 35");
        assert!(st.next_owed(5000, 32, &L).is_some());
        assert!(st.owed_outcome("t0", Owed::OutOfRoom, 5000, &L));
        // Past the turn-start room: the turn is left to the next invocation, due at once.
        assert_eq!(st.alarm_effect(5000, &T, false, 7, true, &L).0, AlarmEffect::SendOwed { turn_id: "t0".into(), text: "⏰ x".into() });
        assert!(st.owed_outcome("t0", Owed::Retry { after_ms: Some(60_000), jitter: 0.0 }, 5000, &L));
        assert_eq!(st.alarm_effect(5000, &T, false, 7, true, &L).0, AlarmEffect::Yield);
        assert_eq!(st.alarm_effect(5000, &T, false, 6, true, &L).0, AlarmEffect::StartTurn);
    }

    #[test]
    fn an_owed_message_that_keeps_failing_backs_off_and_is_given_up_after_a_day() {
        let mut st = ChatState::default();
        st.owe_text("t0", "x".into(), 0);
        st.next_owed(0, 0, &L);
        assert!(st.owed_outcome("t0", Owed::Retry { after_ms: Some(37_000), jitter: 0.0 }, 0, &L));
        assert_eq!(st.next_owed(36_999, 0, &L), None, "Telegram's retry_after is honoured");
        assert!(st.next_owed(37_000, 0, &L).is_some());
        assert!(!st.owed_outcome("t0", Owed::Retry { after_ms: None, jitter: 0.0 }, crate::chat_state::APOLOGY_DEADLINE_MS, &L));
        assert_eq!(st.next_owed(i64::MAX / 2, 0, &L), None, "given up");
        st.owe_text("t1", "y".into(), 0);
        assert!(st.owed_outcome("t1", Owed::Never, 0, &L));
        assert_eq!(st.next_owed(1, 0, &L), None, "a chat that blocked the bot is owed nothing more");
    }

    #[test]
    fn a_taken_over_turn_is_driven_until_it_has_failed_too_often() {
        let mut st = signalled(0);
        let turn = st.begin_turn(5000, "1", 7);
        // Its instance died (not in flight here): attempts 2 and 3 are driven, the 4th gives up.
        for attempt in 2..=3 {
            match st.take_over(6000, false, &L) {
                Some(TakeOver::Drive(t)) => assert_eq!((t.turn_id.as_str(), t.attempt), (turn.turn_id.as_str(), attempt)),
                other => panic!("attempt {attempt}: {other:?}"),
            }
        }
        assert_eq!(st.take_over(6000, true, &L), None, "running here: nothing to take over");
        assert_eq!(st.take_over(6000, false, &L), Some(TakeOver::GiveUp { turn_id: turn.turn_id, reason: "the turn kept failing" }));
    }

    #[test]
    fn a_step_restarted_too_often_gives_its_plan_up_and_a_cancelled_one_is_gone() {
        let mut st = signalled(0);
        let turn = st.begin_turn(5000, "1", 7);
        let send = |text: &str| crate::chat::plan::Step::Send { text: text.into(), reply_to: None, no_link_preview: false };
        assert_eq!(st.finish_turn(&turn.turn_id, vec![send("a"), send("b")], 6000), Finish::Execute);
        assert_eq!(st.step_start(&turn.turn_id, 0, &L), StepStart::Go);
        assert_eq!(st.step_start(&turn.turn_id, 0, &L), StepStart::Go);
        assert_eq!(st.step_start(&turn.turn_id, 0, &L), StepStart::GiveUp, "the third start of one step, two allowed");
        assert_eq!(st.step_start(&turn.turn_id, 1, &L), StepStart::Gone, "not the current step");
        assert_eq!(st.step_start("another", 0, &L), StepStart::Gone);
    }

    #[test]
    fn the_alarm_is_written_only_when_it_would_change() {
        assert!(alarm_write(None, Some(5_000), false, 1_000), "unknown: written");
        assert!(alarm_write(None, None, false, 1_000), "unknown: deleted");
        assert!(!alarm_write(Some(Some(5_000)), Some(5_000), false, 1_000), "the same time");
        assert!(!alarm_write(Some(None), None, false, 1_000), "already none");
        assert!(alarm_write(Some(Some(5_000)), Some(4_000), false, 1_000), "earlier");
        assert!(alarm_write(Some(Some(5_000)), None, false, 1_000), "no more work");
        // Work held here: a re-check set within the period stands; one past it, or gone, does not.
        assert!(!alarm_write(Some(Some(3_500)), Some(4_000), true, 1_000));
        assert!(alarm_write(Some(Some(500)), Some(4_000), true, 1_000), "the set one is in the past");
        assert!(alarm_write(Some(Some(9_000)), Some(4_000), true, 1_000), "set later than a re-check");
        assert!(alarm_write(Some(Some(3_500)), Some(4_000), false, 1_000), "not held here: the exact time");
    }

    #[test]
    fn what_a_finished_turn_means() {
        assert_eq!(turn_end(Finish::Execute, false), TurnEnd { status: None, then: AfterTurn::Advance });
        assert_eq!(turn_end(Finish::Execute, true), TurnEnd { status: None, then: AfterTurn::Nothing });
        assert_eq!(turn_end(Finish::Stale, false), TurnEnd { status: Some(TurnStatus::Stale), then: AfterTurn::Replan });
        assert_eq!(turn_end(Finish::Superseded, false), TurnEnd { status: None, then: AfterTurn::Nothing });
    }

    #[test]
    fn an_owed_text_is_the_apology_or_the_reminder_as_it_was_set() {
        assert_eq!(owed_text(None), APOLOGY);
        assert_eq!(owed_text(Some("call *mum*")), "⏰ call \\*mum\\*");
    }

    #[test]
    fn a_retry_job_is_lost_after_its_longest_backoff_and_the_grace() {
        // Attempt 3 at a 2 s base: at most 8 s; the server's 60 s wins; the cap is 12 hours.
        assert_eq!(job_deadline(1_000, 3, None, &L), 1_000 + 8_000 + 1_000 + 300_000);
        assert_eq!(job_deadline(1_000, 3, Some(60_000), &L), 1_000 + 60_000 + 1_000 + 300_000);
        assert_eq!(job_deadline(0, 1, Some(u64::MAX), &L), 43_200_000 + 1_000 + 300_000);
    }

    #[test]
    fn a_failed_turn_waits_with_a_deadline_but_a_late_reminder_sends_its_own_text() {
        let mut st = signalled(0);
        let turn = st.begin_turn(1_000, "1", 7);
        assert_eq!(st.turn_failed(&turn.turn_id, 2_000, Some(30_000), 600_000, &L), Transient::Wait);
        assert_eq!(st.next_wake(&T, false, 2_000), Some(job_deadline(2_000, 1, Some(30_000), &L)), "waiting, with a deadline");
        // A reminder due at 0 with a 10-minute fallback: a retry in 30 s still comes in time…
        let mut st = ChatState::default();
        let run = crate::chat::schedule::ScheduledRun { schedule_id: 1, due_ms: 0, next_ms: None, late_ms: 0, text: "call mum".into(), timezone: "UTC".into(), repeat: None, creator_user_id: None };
        let turn = st.begin_scheduled_turn(1_000, "1", 7, run);
        assert_eq!(st.turn_failed(&turn.turn_id, 2_000, Some(30_000), 600_000, &L), Transient::Wait);
        // …one asked to wait past the fallback does not: its own text goes now.
        assert_eq!(st.turn_failed(&turn.turn_id, 2_000, Some(700_000), 600_000, &L), Transient::FallBack);
    }
}
