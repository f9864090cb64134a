//! A schedule's runs: the next one after a time ([`next_run`]), what a due run does (fire,
//! late or not, or skip: [`on_due`]), the run a turn carries ([`ScheduledRun`], its marker),
//! and when a run whose model keeps failing sends its own text ([`falls_back`]).
use super::cron::Cron;
use super::request::Limits;
use super::cron::local_text;
use chrono::DateTime;
use crate::time_zone::{TimeZones, Zone};


/// How late a fired run must be before the bot says it is late.
pub const LATE_NOTICE_MS: i64 = 120_000;

/// The run after `after_ms` of a stored recurring rule; `None` for a one-off, a rule that no
/// longer parses, or one that never matches again.
pub fn next_run(zones: &dyn TimeZones, repeat: Option<&str>, timezone: &str, after_ms: i64) -> Option<i64> {
    let cron = Cron::parse(repeat?).ok()?;
    let tz = &Zone::or_utc(zones, timezone);
    let after = DateTime::from_timestamp_millis(after_ms)?;
    cron.next_after(tz, after).map(|t| t.timestamp_millis())
}

/// What a due run does.
#[derive(Debug, Clone, PartialEq)]
pub enum DueRun {
    /// Fire it (`late_ms` past its time); a recurring schedule next runs at `next_ms`.
    Fire { late_ms: i64, next_ms: Option<i64> },
    /// Too late to be useful: skip it (logged); a recurring schedule next runs at `next_ms`.
    Skip { late_ms: i64, next_ms: Option<i64> },
}

impl DueRun {
    pub fn next_ms(&self) -> Option<i64> {
        match self {
            DueRun::Fire { next_ms, .. } | DueRun::Skip { next_ms, .. } => *next_ms,
        }
    }
}

/// Decides a run due at `due_ms`, at `now_ms`: it fires once if within the lateness limit; the
/// next run of a recurring schedule is the first after now (missed runs are not caught up).
pub fn on_due(zones: &dyn TimeZones, due_ms: i64, repeat: Option<&str>, timezone: &str, now_ms: i64, limits: &Limits) -> DueRun {
    let late_ms = (now_ms - due_ms).max(0);
    let next_ms = next_run(zones, repeat, timezone, now_ms.max(due_ms));
    if late_ms <= limits.max_late_ms {
        DueRun::Fire { late_ms, next_ms }
    } else {
        DueRun::Skip { late_ms, next_ms }
    }
}

/// A due schedule's run, as a turn carries it from the moment it is claimed until its plan
/// is carried out (so a restart anywhere in between resumes it, never loses or repeats it).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ScheduledRun {
    pub schedule_id: i64,
    /// The run's time (`schedules.next_run_ms` when it was claimed).
    pub due_ms: i64,
    /// The run after this one (a recurring schedule), computed when it was claimed.
    pub next_ms: Option<i64>,
    pub late_ms: i64,
    pub text: String,
    pub timezone: String,
    #[serde(default)]
    pub repeat: Option<String>,
    #[serde(default)]
    pub creator_user_id: Option<i64>,
}

/// The line that closes a scheduled turn's history (a user turn for the model to answer):
/// which run, when, and who set it. It names no text: the situation quotes that, as data.
pub fn marker(zones: &dyn TimeZones, run: &ScheduledRun) -> String {
    let tz = &Zone::or_utc(zones, &run.timezone);
    let by = run.creator_user_id.map(|u| format!(", set by user_id={u}")).unwrap_or_default();
    format!(
        "[meta] scheduled follow-up #{} due {}{by}. Not a message from a person: see the Situation.",
        run.schedule_id,
        local_text(run.due_ms, tz)
    )
}

/// Whether a scheduled run whose turn just failed (transiently, at `now_ms`) gives up the model
/// and sends its own text now: its next attempt, `retry_in_ms` away, would come later than
/// `fallback_ms` after the run's due time. Giving up ends the turn, so no model-written
/// version can follow the text.
pub fn falls_back(due_ms: i64, now_ms: i64, retry_in_ms: i64, fallback_ms: i64) -> bool {
    now_ms.saturating_add(retry_in_ms.max(0)) > due_ms.saturating_add(fallback_ms)
}
