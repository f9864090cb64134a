//! `schedule_message`'s arguments made into a schedule: the request parsed and checked
//! ([`parse_request`], [`ScheduleError`] as the model reads it), its first run in the
//! schedule's zone and its repeat rule within the [`Limits`] ([`plan`]).
use chrono::{DateTime, Datelike, Duration, NaiveDateTime, Timelike, Utc};
use crate::time_zone::{TimeZones, Zone};
use serde_json::Value;
use std::fmt;
use super::cron::{local_text, resolve, Cron};

/// Characters of a schedule's text at most.
pub const MAX_TEXT_CHARS: usize = 1000;

/// Characters of `at`, `repeat` and `timezone` at most (each is short when it is valid).
pub(crate) const MAX_FIELD_CHARS: usize = 100;

/// How far ahead a schedule may first run.
pub const MAX_AHEAD_DAYS: i64 = 731;

/// How long after its due time a scheduled run whose model keeps failing waits before its
/// own text goes out instead (the default of `SCHEDULE_FALLBACK_SECONDS`): a 9:00 reminder
/// is at the person by about 9:02, not after the turn's whole retry budget.
pub const FALLBACK_MS: i64 = 120_000;

/// The configurable limits (`MAX_SCHEDULES_PER_CHAT`, `SCHEDULE_MIN_REPEAT_MINUTES`,
/// `SCHEDULE_MAX_LATE_MINUTES`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub max_active: usize,
    pub min_repeat_minutes: i64,
    pub max_late_ms: i64,
    /// `SCHEDULE_FALLBACK_SECONDS`: a run whose model keeps failing sends its own text this
    /// long after its due time at the latest ([`falls_back`](super::runs::falls_back)).
    pub fallback_ms: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_active: 25, min_repeat_minutes: 15, max_late_ms: 6 * 3_600_000, fallback_ms: FALLBACK_MS }
    }
}

/// When a new schedule first runs.
#[derive(Debug, Clone, PartialEq)]
pub enum When {
    /// RFC 3339 with an offset, or a local date and time in the schedule's zone.
    At(String),
    InMinutes(f64),
}

/// A `schedule_message` call, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub text: String,
    pub when: When,
    pub repeat: Option<String>,
    pub timezone: Option<String>,
}

/// What is stored for a new schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSchedule {
    pub text: String,
    pub timezone: String,
    /// The canonical cron expression of a recurring schedule.
    pub repeat: Option<String>,
    pub first_run_ms: i64,
    /// The timezone was given in the call (it becomes the chat's zone).
    pub explicit_zone: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ScheduleError {
    Missing(&'static str),
    BothTimes,
    NoTime,
    BadTime(String),
    InPast { local_now: String },
    TooFar,
    UnknownZone(String),
    BadRepeat(String),
    NeverRuns,
    TooFrequent { minutes: i64 },
    TooMany(usize),
    TooLong,
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScheduleError::Missing(what) => write!(f, "{what} is required"),
            ScheduleError::BothTimes => write!(f, "give exactly one of at or in_minutes, not both"),
            ScheduleError::NoTime => write!(f, "give exactly one of at (a date and time) or in_minutes"),
            ScheduleError::BadTime(t) => write!(
                f,
                "{t:?} is not a time: use RFC 3339 with an offset (2026-05-01T09:00:00+02:00) or a local time (2026-05-01 09:00) with timezone"
            ),
            ScheduleError::InPast { local_now } => write!(f, "that time is in the past (it is now {local_now})"),
            ScheduleError::TooFar => write!(f, "that is too far ahead (at most {MAX_AHEAD_DAYS} days)"),
            ScheduleError::UnknownZone(z) => write!(f, "unknown time zone {z:?}: use an IANA name such as Europe/Berlin"),
            ScheduleError::BadRepeat(e) => {
                write!(f, "repeat must be daily, weekdays, weekly or a 5-field cron expression ({e})")
            }
            ScheduleError::NeverRuns => write!(f, "that repeat rule never matches a date"),
            ScheduleError::TooFrequent { minutes } => write!(f, "that repeats too often: at most once every {minutes} minutes"),
            ScheduleError::TooMany(n) => write!(f, "this chat already has {n} active schedules (the limit); cancel one first"),
            ScheduleError::TooLong => write!(f, "text is too long (at most {MAX_TEXT_CHARS} characters)"),
        }
    }
}

/// Parses a time zone name: an IANA name `zones` knows.
pub fn zone<'a>(zones: &'a dyn TimeZones, name: &str) -> Result<Zone<'a>, ScheduleError> {
    Zone::find(zones, name).ok_or_else(|| ScheduleError::UnknownZone(name.trim().chars().take(64).collect()))
}

/// Parses `schedule_message`'s arguments (the checks that need no clock or store).
pub fn parse_request(args: &Value) -> Result<Request, ScheduleError> {
    let s = |k: &str| args.get(k).and_then(Value::as_str).map(str::trim).filter(|v| !v.is_empty()).map(str::to_string);
    let text = s("text").ok_or(ScheduleError::Missing("text"))?;
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err(ScheduleError::TooLong);
    }
    let minutes = match args.get("in_minutes") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(t)) => Some(crate::decimal::parse_f64(t.trim()).ok_or_else(|| ScheduleError::BadTime(t.clone()))?),
        Some(other) => return Err(ScheduleError::BadTime(other.to_string())),
    };
    let too_long = |k: &str| s(k).is_some_and(|v| v.chars().count() > MAX_FIELD_CHARS);
    if too_long("at") {
        return Err(ScheduleError::BadTime(s("at").unwrap_or_default().chars().take(64).collect()));
    }
    if too_long("repeat") {
        return Err(ScheduleError::BadRepeat(format!("longer than {MAX_FIELD_CHARS} characters")));
    }
    if too_long("timezone") {
        return Err(ScheduleError::UnknownZone(s("timezone").unwrap_or_default().chars().take(64).collect()));
    }
    let when = match (s("at"), minutes) {
        (Some(_), Some(_)) => return Err(ScheduleError::BothTimes),
        (Some(at), None) => When::At(at),
        (None, Some(m)) => When::InMinutes(m),
        (None, None) => return Err(ScheduleError::NoTime),
    };
    Ok(Request { text, when, repeat: s("repeat"), timezone: s("timezone") })
}

/// Parses `at`: RFC 3339 with an offset, or a local date and time in `tz`.
pub fn parse_at(at: &str, tz: &Zone) -> Result<DateTime<Utc>, ScheduleError> {
    parse_at_wall(at, tz).map(|(t, _)| t)
}

/// [`parse_at`], and the local wall time asked for when `at` named one (a repeat rule is
/// anchored there, not where a clock change moved the first run).
pub(crate) fn parse_at_wall(at: &str, tz: &Zone) -> Result<(DateTime<Utc>, Option<NaiveDateTime>), ScheduleError> {
    let at = at.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(at) {
        return Ok((t.with_timezone(&Utc), None));
    }
    for format in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"] {
        if let Ok(wall) = NaiveDateTime::parse_from_str(at, format) {
            return Ok((resolve(tz, wall), Some(wall)));
        }
    }
    Err(ScheduleError::BadTime(at.chars().take(64).collect()))
}

/// Decides a new schedule: its zone (the call's, else the chat's, else the default; looked up
/// in `zones`), its first run, its canonical repeat rule, within the limits.
pub fn plan(zones: &dyn TimeZones, req: &Request, now: DateTime<Utc>, zone_name: &str, limits: &Limits, active: usize) -> Result<NewSchedule, ScheduleError> {
    if active >= limits.max_active {
        return Err(ScheduleError::TooMany(limits.max_active));
    }
    let zone_name = req.timezone.as_deref().unwrap_or(zone_name);
    let tz = &zone(zones, zone_name)?;
    let (first, wall) = match &req.when {
        When::At(at) => parse_at_wall(at, tz)?,
        When::InMinutes(m) => {
            if !m.is_finite() || *m <= 0.0 {
                return Err(ScheduleError::InPast { local_now: local_text(now.timestamp_millis(), tz) });
            }
            if *m > (MAX_AHEAD_DAYS * 1440) as f64 {
                return Err(ScheduleError::TooFar);
            }
            (now + Duration::milliseconds((m * 60_000.0).round().max(1000.0) as i64), None)
        }
    };
    if first <= now {
        return Err(ScheduleError::InPast { local_now: local_text(now.timestamp_millis(), tz) });
    }
    if first - now > Duration::days(MAX_AHEAD_DAYS) {
        return Err(ScheduleError::TooFar);
    }
    let repeat = match &req.repeat {
        None => None,
        Some(r) => {
            let anchor = wall.unwrap_or_else(|| tz.local(first));
            let cron_text = Repeat::parse(r)?.to_cron(anchor);
            let cron = Cron::parse(&cron_text).map_err(ScheduleError::BadRepeat)?;
            let gap = cron.shortest_gap(tz, first).ok_or(ScheduleError::NeverRuns)?;
            if gap < Duration::minutes(limits.min_repeat_minutes) {
                return Err(ScheduleError::TooFrequent { minutes: limits.min_repeat_minutes });
            }
            Some(cron_text)
        }
    };
    Ok(NewSchedule {
        text: req.text.clone(),
        timezone: tz.name().to_string(),
        repeat,
        first_run_ms: first.timestamp_millis(),
        explicit_zone: req.timezone.is_some(),
    })
}

/// A repeat rule as people give it.
#[derive(Debug, Clone, PartialEq)]
pub enum Repeat {
    Daily,
    Weekdays,
    Weekly,
    Cron(String),
}

impl Repeat {
    pub fn parse(text: &str) -> Result<Repeat, ScheduleError> {
        let t = text.trim();
        Ok(match t.to_ascii_lowercase().as_str() {
            "daily" | "every day" => Repeat::Daily,
            "weekdays" | "every weekday" => Repeat::Weekdays,
            "weekly" | "every week" => Repeat::Weekly,
            _ => {
                Cron::parse(t).map_err(ScheduleError::BadRepeat)?;
                Repeat::Cron(t.split_whitespace().collect::<Vec<_>>().join(" "))
            }
        })
    }

    /// The canonical cron expression, anchored at the first run's local time.
    pub fn to_cron(&self, first_local: NaiveDateTime) -> String {
        let (m, h) = (first_local.minute(), first_local.hour());
        match self {
            Repeat::Daily => format!("{m} {h} * * *"),
            Repeat::Weekdays => format!("{m} {h} * * 1-5"),
            Repeat::Weekly => format!("{m} {h} * * {}", first_local.weekday().num_days_from_sunday()),
            Repeat::Cron(c) => c.clone(),
        }
    }
}

/// A change of an existing reminder's time and repeat rule (the Mini App): the same rules as
/// a new one (`plan`: a time in its zone, DST, within the limits, the shortest interval),
/// its text and zone kept; `repeat` empty or `None` makes it run once. The count of active
/// schedules is not asked again (the reminder is already one of them).
pub fn change(zones: &dyn TimeZones, text: &str, timezone: &str, at: &str, repeat: Option<&str>, now: DateTime<Utc>, limits: &Limits) -> Result<NewSchedule, ScheduleError> {
    if at.chars().count() > MAX_FIELD_CHARS {
        return Err(ScheduleError::BadTime(at.chars().take(64).collect()));
    }
    let repeat = repeat.map(str::trim).filter(|r| !r.is_empty());
    if repeat.is_some_and(|r| r.chars().count() > MAX_FIELD_CHARS) {
        return Err(ScheduleError::BadRepeat(format!("longer than {MAX_FIELD_CHARS} characters")));
    }
    let req = Request { text: text.to_string(), when: When::At(at.trim().to_string()), repeat: repeat.map(str::to_string), timezone: None };
    plan(zones, &req, now, timezone, limits, 0)
}

/// The word of a canonical repeat rule that `Repeat::to_cron` wrote for `daily`, `weekdays` or
/// `weekly` (a 5-field cron otherwise): a reminder moved to a new time keeps repeating the
/// same way, anchored at the new time.
pub fn rule_word(cron: &str) -> Option<&'static str> {
    let f: Vec<&str> = cron.split_whitespace().collect();
    let clock = f.len() == 5 && f[0].parse::<u32>().is_ok() && f[1].parse::<u32>().is_ok() && f[2] == "*" && f[3] == "*";
    match (clock, f.get(4).copied()) {
        (true, Some("*")) => Some("daily"),
        (true, Some("1-5")) => Some("weekdays"),
        (true, Some(d)) if d.len() == 1 && d.parse::<u32>().is_ok_and(|d| d < 7) => Some("weekly"),
        _ => None,
    }
}
