//! Crew mode's cycle as transitions of the chat object's state machine: starting the next
//! persona's turn, what a persona's answer (or failure, or silence) does to the cycle, the
//! chat's switch. The persona rules these use (lineups, passes, turn ids) are `core::crew`;
//! the cycle's data is `core::crew_state`. The edge passes the crew as a value
//! ([`Lineup`]) to the turn's transitions in `chat_state`, which decide whether a turn is a
//! persona's.

use super::{Apology, ChatState, Finish, Timing, TurnRun};
use crate::crew::{is_pass, persona_of_turn, Lineup};
use crate::crew_state::{CrewTurn, Cycle, End, Outcome};
use crate::telegram::gating::Trigger;
use crate::chat::plan::Step;


/// What became of a model's answer to a turn ([`ChatState::finish_answer`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    pub finish: Finish,
    /// Nothing goes out: the answer was empty, or a persona passed.
    pub silent: bool,
    /// A persona's turn that passed.
    pub passed: bool,
    /// The crew cycle ended with this answer, and why.
    pub cycle_end: Option<End>,
}

/// What giving a turn up did ([`ChatState::give_up_any`]).
#[derive(Debug, Clone, PartialEq)]
pub enum GivenUp {
    /// A persona's turn of the running cycle: skipped, no apology of its own (the cycle owes
    /// one only when every persona failed: `cycle_end` is then `AllFailed`).
    Persona { cycle_end: Option<End> },
    /// The turn ended and the chat is owed one apology (or a scheduled run's text).
    Owed,
    /// A scheduled run that is no longer this turn's (cancelled, or run by another turn): the
    /// turn ended and nothing is owed, not even its text.
    NothingOwed,
}

/// The turn's life with the crew as a value: the edge passes the configured crew ([`Lineup`])
/// at each point, and the state decides whether the turn is a persona's.
impl ChatState {
    /// Starts the turn that is due: the next persona's when a crew speaks in this chat
    /// (`crew`), else the single bot's for the pending burst (a cycle left over with no crew,
    /// switched off or `CREW` emptied, is dropped). `None`: nothing to start.
    /// The single bot's turn of a burst's first message may be an early start (`t`,
    /// `chat::debounce::starts_early`): it then carries the end of the burst's quiet window.
    pub fn begin_due_turn(&mut self, now: i64, conv: &str, nonce: u64, crew: Option<&Lineup>, t: &Timing) -> Option<TurnRun> {
        if let Some(lineup) = crew {
            return self.begin_crew_turn(now, conv, nonce, lineup);
        }
        if let Some(c) = self.crew.as_mut() {
            c.cycle = None;
        }
        self.pending.as_ref()?;
        let early = self.early_window(t, now);
        let mut turn = self.begin_turn(now, conv, nonce);
        if let Some(stored) = self.turn.as_mut() {
            stored.early_until_ms = early;
            turn.early_until_ms = early;
        }
        Some(turn)
    }

    /// The model answered turn `turn_id` with `steps` (and their function calls, kept with the
    /// plan: [`ChatState::keep_step_calls`]). A persona's turn moves the cycle on (a pass sends
    /// nothing); any other is finished as [`ChatState::finish_turn`] decides.
    pub fn finish_answer(&mut self, turn_id: &str, steps: Vec<Step>, step_calls: Option<Vec<Option<usize>>>, crew: &Lineup, now: i64) -> Answered {
        let persona = self.is_persona_turn(turn_id, crew);
        let passed = persona && is_pass(&steps);
        let silent = passed || steps.is_empty();
        let (finish, cycle_end) = if persona { self.finish_crew_turn(turn_id, steps, crew, now) } else { (self.finish_turn(turn_id, steps, now), None) };
        if let Some(calls) = step_calls {
            self.keep_step_calls(turn_id, calls);
        }
        Answered { finish, silent, passed, cycle_end }
    }

    /// Turn `turn_id` found nothing to answer: it ends (a persona's first turn ends the cycle,
    /// a later one counts as a pass).
    pub fn nothing_to_answer(&mut self, turn_id: &str, crew: &Lineup, now: i64) -> Option<End> {
        if persona_of_turn(turn_id).is_some() {
            return self.crew_nothing_to_do(turn_id, crew, now);
        }
        self.end_turn(turn_id);
        None
    }

    /// Turn `turn_id` cannot be answered. `run_still_ours`: a scheduled turn still holds its
    /// run (the edge claimed it in D1 first; true for any other turn).
    pub fn give_up_any(&mut self, turn_id: &str, crew: &Lineup, run_still_ours: bool, now: i64) -> GivenUp {
        if persona_of_turn(turn_id).is_some() && self.is_current_crew_turn(turn_id) {
            return GivenUp::Persona { cycle_end: self.give_up_crew_turn(turn_id, crew, now) };
        }
        if !run_still_ours {
            self.drop_plan(turn_id);
            self.end_turn(turn_id);
            return GivenUp::NothingOwed;
        }
        self.give_up(turn_id, now);
        GivenUp::Owed
    }

    /// Whether `turn_id` is the running cycle's current persona turn.
    pub(crate) fn is_current_crew_turn(&self, turn_id: &str) -> bool {
        self.crew.as_ref().and_then(|c| c.cycle.as_ref()).is_some_and(|c| c.current.as_deref() == Some(turn_id))
    }

    /// The chat's crew switch (`None`: it follows `CREW_CHATS`).
    pub fn crew_switch(&self) -> Option<bool> {
        self.crew.as_ref().and_then(|c| c.switch)
    }

    /// A running persona turn of a persona the crew (still) has.
    fn is_persona_turn(&self, turn_id: &str, crew: &Lineup) -> bool {
        let configured = persona_of_turn(turn_id).is_some_and(|name| crew.names.iter().any(|n| n == name));
        configured && self.turn_of(turn_id).is_some_and(|t| t.crew.is_some())
    }
}

impl ChatState {
    /// Whether a cycle goes on and its next persona's turn may start now (no turn, no plan, no
    /// person waiting: a person's message starts a new cycle after the debounce instead).
    pub(crate) fn crew_continues(&self) -> bool {
        self.turn.is_none() && self.plan.is_none() && self.pending.is_none() && self.crew.as_ref().is_some_and(|c| c.cycle.is_some())
    }

    /// When the next persona's turn is a continuation (the cycle goes on with nothing new from
    /// people), the message and trigger that started the cycle: that turn is work of the
    /// person who wrote it, checked against and charged to their budget. `None` when the next
    /// turn starts a cycle (its person's message was charged when it came) or none is due.
    pub fn crew_continuation(&self) -> Option<(Option<i64>, Trigger)> {
        if self.pending.is_some() {
            return None;
        }
        let cycle = self.crew.as_ref()?.cycle.as_ref().filter(|c| c.generation == self.generation)?;
        (cycle.taken > 0 || cycle.current.is_some()).then_some((cycle.target_message_id, cycle.trigger))
    }

    /// The key the running cycle's next (or running) continuation is charged under: the message
    /// it answers, its generation and the persona turns taken, which stay as they are until that turn has an
    /// outcome, so the same continuation taken up again after a crash is charged once.
    pub fn crew_charge_key(&self) -> Option<String> {
        let cycle = self.crew.as_ref()?.cycle.as_ref().filter(|c| c.generation == self.generation)?;
        Some(format!("{}:{}:{}", cycle.target_message_id.unwrap_or(0), cycle.generation, cycle.taken))
    }

    /// Ends the running cycle for `why` (a budget reached before its next turn); no turn runs.
    pub fn end_crew_cycle(&mut self, why: End) -> Option<End> {
        let crew = self.crew.as_mut()?;
        crew.cycle.as_ref()?;
        Some(crew.end(why))
    }

    /// Starts the next persona's turn: a new cycle when people wrote since the cycle began (or
    /// none runs), else the cycle's next turn. A turn of the cycle that ended without an
    /// outcome (cut off) counts as failed, so a cycle never stalls and stays bounded. `None`:
    /// nothing to start (no person waiting and no cycle going on, e.g. that failure ended it).
    pub(crate) fn begin_crew_turn(&mut self, now: i64, conv: &str, nonce: u64, lineup: &Lineup) -> Option<TurnRun> {
        let generation = self.generation;
        let pending = self.pending.take();
        let crew = self.crew.get_or_insert_with(Default::default);
        let n = lineup.names.len().max(1);
        let fresh = pending.is_some() || crew.cycle.as_ref().is_none_or(|c| c.generation != generation);
        if fresh {
            let (target, trigger) = match (&pending, &crew.cycle) {
                (Some(p), _) => (p.target_message_id, p.trigger),
                (None, Some(c)) => (c.target_message_id, c.trigger),
                (None, None) => return None,
            };
            crew.cycle = Some(Cycle { generation, target_message_id: target, trigger, taken: 0, quiet_in_row: 0, failed_in_row: 0, current: None, note: None });
        } else if crew.cycle.as_ref().is_some_and(|c| c.current.is_some()) {
            let cut = crew.cycle.as_ref().and_then(|c| c.current.clone()).unwrap_or_default();
            self.crew_outcome(&cut, Outcome::Failed, lineup, now);
            return self.begin_crew_turn(now, conv, nonce, lineup);
        }
        let crew = self.crew.get_or_insert_with(Default::default);
        let persona = lineup.names.get(crew.pointer % n).cloned().unwrap_or_default();
        let cycle = crew.cycle.as_mut().expect("a cycle was just ensured");
        let turn_id = format!("{}~{persona}", super::turn_id(conv, now, nonce));
        cycle.current = Some(turn_id.clone());
        let crew_turn = CrewTurn { continues: cycle.taken > 0, note: cycle.note.clone() };
        let (target, trigger) = (cycle.target_message_id, cycle.trigger);
        self.turns_started += 1;
        let turn = TurnRun {
            turn_id,
            started_ms: now,
            generation,
            target_message_id: target,
            trigger,
            attempt: 1,
            waiting_retry: false,
            wait_deadline_ms: None,
            scheduled: None,
            crew: Some(crew_turn),
            committed: false,
            committed_upto: None,
            early_until_ms: None,
        };
        self.turn = Some(turn.clone());
        Some(turn)
    }

    /// Records a persona turn's outcome (once: only the cycle's current turn counts), moves the
    /// pointer on, and ends the cycle when it is over. A cycle where everyone failed owes the
    /// chat one apology. Returns why the cycle ended, if it did.
    pub(crate) fn crew_outcome(&mut self, turn_id: &str, outcome: Outcome, lineup: &Lineup, now: i64) -> Option<End> {
        let n = lineup.names.len().max(1) as u32;
        let crew = self.crew.as_mut()?;
        let cycle = crew.cycle.as_mut().filter(|c| c.current.as_deref() == Some(turn_id))?;
        let index = crew.pointer % n as usize;
        let name = lineup.names.get(index).cloned().unwrap_or_default();
        cycle.current = None;
        cycle.taken += 1;
        cycle.note = None;
        match outcome {
            Outcome::Spoke => {
                cycle.quiet_in_row = 0;
                cycle.failed_in_row = 0;
            }
            Outcome::Passed => {
                cycle.quiet_in_row += 1;
                cycle.failed_in_row = 0;
            }
            Outcome::Failed => {
                cycle.quiet_in_row += 1;
                cycle.failed_in_row += 1;
                cycle.note = Some(format!("{name}'s turn failed (a technical problem) and was skipped."));
            }
        }
        crew.pointer = (index + 1) % n as usize;
        let cycle = crew.cycle.as_ref()?;
        let why = if cycle.failed_in_row >= n {
            Some(End::AllFailed)
        } else if cycle.quiet_in_row >= n {
            Some(End::AllPassed)
        } else if outcome == Outcome::Passed && lineup.moderator == Some(index) {
            Some(End::ModeratorPassed)
        } else if cycle.taken >= n * lineup.max_rounds {
            Some(End::MaxRounds)
        } else {
            None
        };
        let why = why.map(|w| crew.end(w));
        if why == Some(End::AllFailed) {
            self.owe_text_or_apology(turn_id, now);
        }
        why
    }

    fn owe_text_or_apology(&mut self, turn_id: &str, now: i64) {
        if !self.apologies.iter().any(|a| a.turn_id == turn_id) {
            self.apologies.push(Apology { turn_id: turn_id.to_string(), attempts: 0, not_before_ms: now, text: None, owed_at_ms: Some(now) });
        }
    }

    /// A persona turn's answer: like [`ChatState::finish_turn`], and then its outcome (a pass
    /// sends nothing). Returns the decision and the steps to carry out.
    pub(crate) fn finish_crew_turn(&mut self, turn_id: &str, steps: Vec<Step>, lineup: &Lineup, now: i64) -> (Finish, Option<End>) {
        let passed = is_pass(&steps);
        let steps = if passed { Vec::new() } else { steps };
        let finish = self.finish_turn(turn_id, steps, now);
        let end = match finish {
            Finish::Execute => self.crew_outcome(turn_id, if passed { Outcome::Passed } else { Outcome::Spoke }, lineup, now),
            _ => None,
        };
        (finish, end)
    }

    /// A persona turn is given up (its call failed after its retries): skipped, no apology of
    /// its own (the cycle owes one only when everyone failed).
    pub(crate) fn give_up_crew_turn(&mut self, turn_id: &str, lineup: &Lineup, now: i64) -> Option<End> {
        self.drop_plan(turn_id);
        self.end_turn(turn_id);
        self.crew_outcome(turn_id, Outcome::Failed, lineup, now)
    }

    /// A persona turn found nothing to answer: the cycle ends (a first turn) or the turn
    /// counts as a pass.
    pub(crate) fn crew_nothing_to_do(&mut self, turn_id: &str, lineup: &Lineup, now: i64) -> Option<End> {
        self.end_turn(turn_id);
        let first = self.crew.as_ref().and_then(|c| c.cycle.as_ref()).is_some_and(|c| c.taken == 0 && c.current.as_deref() == Some(turn_id));
        if first {
            return self.crew.as_mut().map(|c| c.end(End::NothingNew));
        }
        self.crew_outcome(turn_id, Outcome::Passed, lineup, now)
    }

    /// Sets the chat's switch; turning the crew off drops a running cycle.
    pub fn set_crew_switch(&mut self, on: Option<bool>) {
        let crew = self.crew.get_or_insert_with(Default::default);
        crew.switch = on;
        if on == Some(false) {
            crew.cycle = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat_state::{Due, Signal};
    use crate::crew::{persona_of_turn, PASS_TEXT};

    const T: Timing = Timing { debounce_ms: 1000, debounce_max_ms: 5000, watchdog_ms: 120_000, job_grace_ms: 300_000, adaptive: None, early_start: false };

    fn lineup(moderator: Option<usize>, rounds: u32) -> Lineup {
        Lineup { names: vec!["critic".into(), "builder".into(), "moderator".into()], moderator, max_rounds: rounds }
    }

    fn say(text: &str) -> Vec<Step> {
        vec![Step::Send { text: text.into(), reply_to: None, no_link_preview: false }]
    }

    fn signal(s: &mut ChatState, update_id: i64, at: i64) {
        s.signal(&Signal { update_id, target_message_id: Some(update_id * 10), trigger: Trigger::Private, at_ms: at });
    }

    /// Runs the next persona turn with `steps` (and its plan to the end); returns its persona.
    fn turn(s: &mut ChatState, l: &Lineup, now: i64, steps: Vec<Step>) -> (String, Option<End>) {
        assert_eq!(s.due(now, &T), Due::StartTurn);
        let t = s.begin_crew_turn(now, "c", now as u64, l).unwrap();
        let (f, end) = s.finish_crew_turn(&t.turn_id, steps, l, now);
        assert_eq!(f, Finish::Execute);
        if let Some(plan) = s.plan.clone() {
            for i in 0..plan.steps.len() {
                s.step_done(&plan.turn_id, i, now);
            }
        }
        (persona_of_turn(&t.turn_id).unwrap().to_string(), end)
    }

    #[test]
    fn a_continuation_keeps_its_charge_key_until_its_turn_has_an_outcome() {
        let l = lineup(None, 3);
        let mut s = ChatState::default();
        assert_eq!(s.crew_charge_key(), None, "no cycle, no continuation");
        signal(&mut s, 1, 0);
        turn(&mut s, &l, 2000, say("one"));
        let key = s.crew_charge_key().expect("a cycle runs");
        // The builder's continuation starts; a restart takes it over: the same key.
        assert_eq!(s.due(3000, &T), Due::StartTurn);
        let t = s.begin_crew_turn(3000, "c", 3, &l).unwrap();
        assert_eq!(s.crew_charge_key().as_deref(), Some(key.as_str()), "the running continuation's key");
        s.finish_crew_turn(&t.turn_id, say("two"), &l, 3100);
        assert_ne!(s.crew_charge_key().as_deref(), Some(key.as_str()), "the next continuation is charged anew");
    }

    #[test]
    fn the_turns_life_takes_the_crew_as_a_value() {
        let l = lineup(None, 3);
        // With a crew here: a persona's turn, its pass is silent and counted.
        let mut s = ChatState::default();
        signal(&mut s, 1, 0);
        let t = s.begin_due_turn(2000, "c", 1, Some(&l), &T).unwrap();
        assert_eq!(persona_of_turn(&t.turn_id), Some("critic"));
        let a = s.finish_answer(&t.turn_id, Vec::new(), Some(vec![]), &l, 2100);
        assert!(a.silent && a.passed && a.finish == Finish::Execute && a.cycle_end.is_none());
        // The next persona fails: skipped, no apology of its own.
        let t = s.begin_due_turn(2200, "c", 2, Some(&l), &T).unwrap();
        assert_eq!(s.give_up_any(&t.turn_id, &l, true, 2300), GivenUp::Persona { cycle_end: None });
        assert!(s.apologies.is_empty());
        // No crew here any more: the cycle is dropped and only people's bursts start turns.
        assert_eq!(s.begin_due_turn(2400, "c", 3, None, &T), None);
        assert!(s.crew.as_ref().unwrap().cycle.is_none());
        signal(&mut s, 2, 3000);
        let t = s.begin_due_turn(5000, "c", 4, None, &T).unwrap();
        assert!(t.crew.is_none());
        let a = s.finish_answer(&t.turn_id, say(PASS_TEXT), None, &l, 5100);
        assert!(!a.silent && !a.passed, "only a persona passes");
        // A single bot's turn given up owes one apology; one whose scheduled run went
        // elsewhere owes nothing.
        signal(&mut s, 3, 6000);
        s.plan = None;
        let t = s.begin_due_turn(8000, "c", 5, None, &T).unwrap();
        assert_eq!(s.give_up_any(&t.turn_id, &l, true, 8100), GivenUp::Owed);
        assert_eq!(s.apologies.len(), 1);
        signal(&mut s, 4, 9000);
        let t = s.begin_due_turn(11000, "c", 6, None, &T).unwrap();
        assert_eq!(s.give_up_any(&t.turn_id, &l, false, 11100), GivenUp::NothingOwed);
        assert!(s.turn().is_none() && s.apologies.len() == 1);
    }

    #[test]
    fn personas_speak_in_order_and_all_passing_ends_the_cycle() {
        let l = lineup(None, 3);
        let mut s = ChatState::default();
        signal(&mut s, 1, 0);
        assert_eq!(s.due(500, &T), Due::Nothing, "the debounce comes first");
        assert_eq!(turn(&mut s, &l, 1000, say("a")), ("critic".into(), None));
        assert!(s.crew_continues());
        assert_eq!(s.next_wake(&T, false, 1001), Some(1001), "the next persona at once");
        assert_eq!(turn(&mut s, &l, 1001, say("b")), ("builder".into(), None));
        assert_eq!(turn(&mut s, &l, 1002, vec![]), ("moderator".into(), None));
        assert_eq!(turn(&mut s, &l, 1003, say(PASS_TEXT)), ("critic".into(), None));
        assert_eq!(turn(&mut s, &l, 1004, vec![]), ("builder".into(), Some(End::AllPassed)), "three passes in a row");
        assert!(!s.crew_continues());
        assert_eq!(s.due(2000, &T), Due::Nothing);
        assert_eq!(s.crew.as_ref().unwrap().pointer, 2, "the order continues in the next cycle");
        signal(&mut s, 2, 3000);
        assert_eq!(turn(&mut s, &l, 4000, say("c")).0, "moderator");
    }

    #[test]
    fn continuations_are_known_before_they_start_and_a_budget_ends_the_cycle() {
        let l = lineup(None, 3);
        let mut s = ChatState::default();
        signal(&mut s, 1, 0);
        assert_eq!(s.crew_continuation(), None, "the person's message starts the cycle (charged when it came)");
        turn(&mut s, &l, 1000, say("a"));
        assert_eq!(s.crew_continuation(), Some((Some(10), Trigger::Private)), "the next turn is the work of the message's author");
        turn(&mut s, &l, 1001, say("b"));
        assert_eq!(s.end_crew_cycle(End::OverBudget), Some(End::OverBudget));
        assert!(!s.crew_continues(), "no turn after the budget");
        assert_eq!(s.crew_continuation(), None);
        assert_eq!(s.crew.as_ref().unwrap().ended.get("over_budget"), Some(&1));
        assert_eq!(s.end_crew_cycle(End::OverBudget), None, "nothing to end twice");
        // A person writing meanwhile starts a new cycle: not a continuation.
        signal(&mut s, 2, 2000);
        assert_eq!(s.crew_continuation(), None);
    }

    #[test]
    fn a_pass_is_not_sent() {
        let l = lineup(None, 3);
        let mut s = ChatState::default();
        signal(&mut s, 1, 0);
        let t = s.begin_crew_turn(1000, "c", 1, &l).unwrap();
        s.finish_crew_turn(&t.turn_id, say(" ..... "), &l, 1000);
        assert!(s.plan.is_none());
    }

    #[test]
    fn the_moderators_pass_ends_the_cycle_and_rounds_are_capped() {
        let l = lineup(Some(2), 3);
        let mut s = ChatState::default();
        signal(&mut s, 1, 0);
        turn(&mut s, &l, 1000, say("a"));
        turn(&mut s, &l, 1001, say("b"));
        assert_eq!(turn(&mut s, &l, 1002, vec![]).1, Some(End::ModeratorPassed));

        let l = lineup(None, 2);
        let mut s = ChatState::default();
        signal(&mut s, 1, 0);
        for i in 0..5 {
            assert_eq!(turn(&mut s, &l, 1000 + i, say("x")).1, None);
        }
        assert_eq!(turn(&mut s, &l, 1010, say("x")).1, Some(End::MaxRounds));
    }

    #[test]
    fn a_person_writing_mid_cycle_cancels_the_rest_and_starts_a_new_cycle() {
        let l = lineup(None, 3);
        let mut s = ChatState::default();
        signal(&mut s, 1, 0);
        turn(&mut s, &l, 1000, say("a"));
        // builder is answering when the person writes: its answer is stale.
        let t = s.begin_crew_turn(1001, "c", 5, &l).unwrap();
        signal(&mut s, 2, 1002);
        assert_eq!(s.finish_crew_turn(&t.turn_id, say("b"), &l, 1003).0, Finish::Stale);
        assert!(!s.crew_continues(), "the person's message waits for its debounce");
        assert_eq!(s.due(1500, &T), Due::Nothing);
        let t = s.begin_crew_turn(2002, "c", 6, &l).unwrap();
        assert_eq!(persona_of_turn(&t.turn_id), Some("builder"), "builder did not speak: it goes first");
        assert_eq!(t.target_message_id, Some(20));
        assert_eq!(s.crew.as_ref().unwrap().cycle.as_ref().unwrap().taken, 0, "a new cycle");
        assert!(!t.crew.as_ref().unwrap().continues);
        // A signal while a persona's plan is sent cancels the plan.
        s.finish_crew_turn(&t.turn_id, say("b2"), &l, 2003);
        assert!(s.plan.is_some());
        signal(&mut s, 3, 2004);
        assert!(s.plan.is_none());
    }

    #[test]
    fn failures_are_skipped_with_a_note_and_all_failing_owes_one_apology() {
        let l = lineup(None, 3);
        let mut s = ChatState::default();
        signal(&mut s, 1, 0);
        let t = s.begin_crew_turn(1000, "c", 1, &l).unwrap();
        assert_eq!(s.give_up_crew_turn(&t.turn_id, &l, 1000), None);
        assert!(s.apologies.is_empty());
        let t = s.begin_crew_turn(1001, "c", 2, &l).unwrap();
        assert!(t.crew.as_ref().unwrap().note.as_deref().unwrap().contains("critic"));
        s.give_up_crew_turn(&t.turn_id, &l, 1001);
        let t = s.begin_crew_turn(1002, "c", 3, &l).unwrap();
        assert_eq!(s.give_up_crew_turn(&t.turn_id, &l, 1002), Some(End::AllFailed));
        assert_eq!(s.apologies.len(), 1);
        // Recorded once: a late second report changes nothing.
        assert_eq!(s.give_up_crew_turn(&t.turn_id, &l, 1003), None);
        assert_eq!(s.apologies.len(), 1);
    }

    #[test]
    fn a_turn_cut_off_without_an_outcome_counts_as_failed_and_a_restart_resumes_the_pointer() {
        let l = lineup(None, 3);
        let mut s = ChatState::default();
        signal(&mut s, 1, 0);
        turn(&mut s, &l, 1000, say("a"));
        let t = s.begin_crew_turn(1001, "c", 2, &l).unwrap();
        // Stored and read back (a restart): the same turn is recovered, same persona.
        let stored = serde_json::to_value(&s).unwrap();
        let mut s = crate::chat_state::load(Some(stored)).state;
        let recovered = s.recover_turn(2000, false).unwrap();
        assert_eq!(recovered.turn_id, t.turn_id);
        s.end_turn(&t.turn_id);
        let next = s.begin_crew_turn(2001, "c", 3, &l).unwrap();
        assert_eq!(persona_of_turn(&next.turn_id), Some("moderator"));
    }

    #[test]
    fn a_cycle_ended_by_a_cut_off_turn_starts_nothing_by_itself() {
        let l = Lineup { names: vec!["solo".into()], moderator: None, max_rounds: 3 };
        let mut s = ChatState::default();
        signal(&mut s, 1, 0);
        let t = s.begin_crew_turn(1000, "c", 1, &l).unwrap();
        s.end_turn(&t.turn_id); // gone without an outcome
        assert!(s.crew_continues());
        assert_eq!(s.begin_crew_turn(2000, "c", 2, &l), None, "its failure ended the cycle (all failed)");
        assert!(s.turn.is_none());
        assert_eq!(s.apologies.len(), 1);
        assert_eq!(s.due(3000, &T), Due::Nothing);
    }

}
