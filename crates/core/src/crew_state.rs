//! Crew mode's state as the chat object stores it (`ChatState::crew`, `TurnRun::crew`): the
//! chat's switch, the speaking pointer, the running cycle. Data only; the rules that move it
//! are in `core::crew` (kept apart so `chat_state` does not depend on them).

use crate::telegram::gating::Trigger;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The crew of a chat object, stored in its state.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CrewState {
    /// The chat's own switch (`/crew on|off`, `PUT …/crew`); `None` follows `CREW_CHATS`.
    #[serde(default)]
    pub switch: Option<bool>,
    /// Index (in `CREW` order) of the persona whose turn is next.
    #[serde(default)]
    pub pointer: usize,
    #[serde(default)]
    pub cycle: Option<Cycle>,
    /// Cycles ended, by why (a statistic for tests and operators).
    #[serde(default)]
    pub ended: BTreeMap<String, u64>,
}

/// One cycle: the personas answering one generation of people's messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cycle {
    /// The signal generation it answers; a newer one starts a new cycle.
    pub generation: u64,
    pub target_message_id: Option<i64>,
    pub trigger: Trigger,
    /// Persona turns with an outcome so far.
    pub taken: u32,
    /// Passes (or failures) in a row.
    pub quiet_in_row: u32,
    /// Failures in a row.
    pub failed_in_row: u32,
    /// The persona turn running now (an outcome clears it).
    pub current: Option<String>,
    /// Said in the next persona's situation (a persona was skipped).
    #[serde(default)]
    pub note: Option<String>,
}

/// What a persona turn carries (in its `TurnRun`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrewTurn {
    /// Not the cycle's first turn: it runs with nothing new from people (the others spoke).
    pub continues: bool,
    /// A persona skipped before this turn, for its situation.
    #[serde(default)]
    pub note: Option<String>,
}

/// What became of a persona's turn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    Spoke,
    Passed,
    Failed,
}

/// Why a cycle ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum End {
    AllPassed,
    ModeratorPassed,
    MaxRounds,
    AllFailed,
    /// A first turn had nothing new to answer.
    NothingNew,
    /// The next turn would go past a budget: the chat's or the bot's daily tokens, or the
    /// hourly requests of the person whose message started the cycle (each continuation turn
    /// is charged to them like a message of theirs).
    OverBudget,
}

impl End {
    pub fn as_str(self) -> &'static str {
        match self {
            End::AllPassed => "all_passed",
            End::ModeratorPassed => "moderator_passed",
            End::MaxRounds => "max_rounds",
            End::AllFailed => "all_failed",
            End::NothingNew => "nothing_new",
            End::OverBudget => "over_budget",
        }
    }
}

impl CrewState {
    pub(crate) fn end(&mut self, why: End) -> End {
        self.cycle = None;
        *self.ended.entry(why.as_str().to_string()).or_default() += 1;
        why
    }
}

