//! Turn statuses: the one list of what a row of `turns` can say about its turn. The SQL
//! `CHECK` constraint on `turns.status` (migration 0007) lists exactly [`TurnStatus::ALL`];
//! a test keeps the two in step.
//!
//! Life of a turn: `running` → `done` (the model answered; its plan's sends are recorded by
//! their keys, and the row is not written again when they have gone; until migration 0037 it
//! said `planned` here and `done` after the plan's last step, which a turn recorded by the
//! previous release during a deploy may still say); or
//! `running` → `retrying` (a transient failure; a retry job or the deadline brings it back)
//! → `running` …; `stale` (new messages arrived during the call: replanned); `failed` (a
//! permanent error, or a step that could not be sent); `dead` (given up: the user got an
//! apology).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    Running,
    Planned,
    Done,
    Stale,
    Retrying,
    Failed,
    Dead,
}

impl TurnStatus {
    pub const ALL: [TurnStatus; 7] = [
        TurnStatus::Running,
        TurnStatus::Planned,
        TurnStatus::Done,
        TurnStatus::Stale,
        TurnStatus::Retrying,
        TurnStatus::Failed,
        TurnStatus::Dead,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TurnStatus::Running => "running",
            TurnStatus::Planned => "planned",
            TurnStatus::Done => "done",
            TurnStatus::Stale => "stale",
            TurnStatus::Retrying => "retrying",
            TurnStatus::Failed => "failed",
            TurnStatus::Dead => "dead",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// A stored result the turn can resume from without asking the model again.
    pub fn has_result(self) -> bool {
        matches!(self, TurnStatus::Planned | TurnStatus::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_and_match_the_sql_check() {
        for s in TurnStatus::ALL {
            assert_eq!(TurnStatus::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert_eq!(TurnStatus::parse("cancelled"), None);
        let sql = include_str!("../../../../migrations/0007_turn_status_check.sql");
        let check = sql.split("CHECK (status IN (").nth(1).and_then(|r| r.split("))").next()).expect("the CHECK list");
        let listed: Vec<&str> = check.split(',').map(|v| v.trim().trim_matches('\'')).collect();
        let ours: Vec<&str> = TurnStatus::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(listed, ours, "migration 0007's CHECK lists exactly the core's statuses");
    }
}
