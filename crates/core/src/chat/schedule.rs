//! Schedules: reminders and follow-ups the bot sets for later (`schedule_message`), as pure
//! time math. When a schedule first runs, how a repeat rule (`daily`, `weekdays`, `weekly`, a
//! 5-field cron expression) gives the next run in the schedule's time zone, what a due run does
//! (fire, late or not, or skip), and the texts people and the model read.
//!
//! Invariants:
//! - Every time is computed with a real time-zone database (chrono-tz) from the time passed in;
//!   nothing here reads a clock.
//! - A local time that does not exist (the hour skipped when clocks go forward) runs that much
//!   later (02:30 becomes 03:30); a local time that exists twice (clocks go back) runs once, at
//!   the first. This is what RFC 9557 / Temporal call the "compatible" disambiguation.
//! - A recurring schedule's next run is always after `now`: runs missed while the bot could not
//!   run are never caught up one by one (at most the one due run fires, late, within the
//!   lateness limit).
//! - Repeat rules are stored as one canonical 5-field cron expression (`daily` at the first
//!   run's local time is `M H * * *`, `weekdays` is `M H * * 1-5`, `weekly` is `M H * * D`).

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc};
pub use chrono_tz::Tz;
use serde_json::Value;
use std::fmt;

/// Characters of a schedule's text at most.
pub const MAX_TEXT_CHARS: usize = 1000;
/// Characters of `at`, `repeat` and `timezone` at most (each is short when it is valid).
const MAX_FIELD_CHARS: usize = 100;
/// How far ahead a schedule may first run.
pub const MAX_AHEAD_DAYS: i64 = 731;
/// How late a fired run must be before the bot says it is late.
pub const LATE_NOTICE_MS: i64 = 120_000;
/// Days searched for a cron expression's next match (a rule matching nothing fails).
const SEARCH_DAYS: i64 = 5 * 366;
/// Runs looked at when checking a cron rule's shortest interval.
const INTERVAL_SAMPLE: usize = 60;

/// The configurable limits (`MAX_SCHEDULES_PER_CHAT`, `SCHEDULE_MIN_REPEAT_MINUTES`,
/// `SCHEDULE_MAX_LATE_MINUTES`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub max_active: usize,
    pub min_repeat_minutes: i64,
    pub max_late_ms: i64,
    /// `SCHEDULE_FALLBACK_SECONDS`: a run whose model keeps failing sends its own text this
    /// long after its due time at the latest ([`falls_back`]).
    pub fallback_ms: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_active: 25, min_repeat_minutes: 15, max_late_ms: 6 * 3_600_000, fallback_ms: FALLBACK_MS }
    }
}

/// A parsed 5-field cron expression: minute, hour, day of month, month, day of week.
#[derive(Debug, Clone, PartialEq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    /// Day of month and day of week were both restricted: either may match (Vixie cron).
    either_day: bool,
    /// Day of month was `*` (then only the weekday field restricts days), and the reverse.
    any_day: bool,
    any_weekday: bool,
}

const MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
const WEEKDAY_NAMES: [&str; 7] = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

/// One cron field as a bit set over `lo..=hi`; names (`jan`, `mon`) where given.
fn field(text: &str, lo: u32, hi: u32, names: &[&str]) -> Result<u64, String> {
    let value = |s: &str| -> Result<u32, String> {
        let lower = s.to_ascii_lowercase();
        if let Some(i) = names.iter().position(|n| *n == lower) {
            return Ok(i as u32 + if names.len() == 12 { 1 } else { 0 });
        }
        s.parse::<u32>().map_err(|_| format!("{s:?} is not a number"))
    };
    let mut bits = 0u64;
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => (r, s.parse::<u32>().ok().filter(|s| *s > 0 && *s <= hi).ok_or_else(|| format!("bad step in {item:?}"))?),
            None => (item, 1),
        };
        let (a, b) = if range == "*" {
            (lo, hi)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a)?, value(b)?)
        } else {
            let a = value(range)?;
            (a, if item.contains('/') { hi } else { a })
        };
        if a < lo || b > hi || a > b {
            return Err(format!("{item:?} is outside {lo}-{hi}"));
        }
        let mut v = a;
        while v <= b {
            bits |= 1 << v;
            v = v.saturating_add(step);
        }
    }
    Ok(bits)
}

impl Cron {
    pub fn parse(text: &str) -> Result<Cron, String> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [minute, hour, day, month, weekday] = fields.as_slice() else {
            return Err("a cron expression has 5 fields: minute hour day-of-month month day-of-week".into());
        };
        let mut weekdays = field(weekday, 0, 7, &WEEKDAYS)?;
        if weekdays & (1 << 7) != 0 {
            weekdays = (weekdays | 1) & 0x7f; // 7 is Sunday too
        }
        let any_day = *day == "*";
        let any_weekday = *weekday == "*";
        Ok(Cron {
            minutes: field(minute, 0, 59, &[])?,
            hours: field(hour, 0, 23, &[])? as u32,
            days: field(day, 1, 31, &[])? as u32,
            months: field(month, 1, 12, &MONTHS)? as u16,
            weekdays: weekdays as u8,
            either_day: !any_day && !any_weekday,
            any_day,
            any_weekday,
        })
    }

    fn day_matches(&self, d: NaiveDate) -> bool {
        if self.months & (1 << d.month()) == 0 {
            return false;
        }
        let dom = self.days & (1 << d.day()) != 0;
        let dow = self.weekdays & (1 << d.weekday().num_days_from_sunday()) != 0;
        if self.either_day {
            dom || dow
        } else {
            (self.any_day || dom) && (self.any_weekday || dow)
        }
    }

    /// The first run strictly after `after`, in `tz`; `None` when nothing matches within five
    /// years (`0 0 30 2 *`).
    pub fn next_after(&self, tz: Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(&tz).naive_local();
        // Wall-clock minutes from the one after `after`'s (a gap can make a match map earlier
        // than `after`; those are skipped by the comparison below).
        let start = local.with_second(0)?.with_nanosecond(0)? + Duration::minutes(1);
        let mut date = start.date();
        for day in 0..SEARCH_DAYS {
            if self.day_matches(date) {
                for h in (0..24u32).filter(|h| self.hours & (1 << h) != 0) {
                    for m in (0..60u32).filter(|m| self.minutes & (1 << m) != 0) {
                        let wall = date.and_hms_opt(h, m, 0)?;
                        if day == 0 && wall < start {
                            continue;
                        }
                        let at = resolve(tz, wall);
                        if at > after {
                            return Some(at);
                        }
                    }
                }
            }
            date = date.succ_opt()?;
        }
        None
    }

    /// The shortest gap between consecutive runs, over the next runs from `from`.
    fn shortest_gap(&self, tz: Tz, from: DateTime<Utc>) -> Option<Duration> {
        let mut at = self.next_after(tz, from)?;
        let mut shortest: Option<Duration> = None;
        for _ in 0..INTERVAL_SAMPLE {
            let Some(next) = self.next_after(tz, at) else { break };
            let gap = next - at;
            shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
            at = next;
        }
        shortest
    }
}

/// A local wall time as an instant: a time skipped by a clock change runs as much later as the
/// change skipped; a time that exists twice is its first occurrence.
pub fn resolve(tz: Tz, wall: NaiveDateTime) -> DateTime<Utc> {
    use chrono::LocalResult;
    match tz.from_local_datetime(&wall) {
        LocalResult::Single(t) => t.with_timezone(&Utc),
        LocalResult::Ambiguous(first, _) => first.with_timezone(&Utc),
        LocalResult::None => {
            // The offset before the gap, applied to the wall time, lands after the gap.
            let before = tz.from_local_datetime(&(wall - Duration::hours(3))).earliest();
            let offset = before.map_or(0, |b| chrono::Offset::fix(b.offset()).local_minus_utc());
            DateTime::from_naive_utc_and_offset(wall - Duration::seconds(offset as i64), Utc)
        }
    }
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

/// How people read a stored rule: `daily at 09:00`, `weekdays at 09:00`, `weekly on Monday at
/// 09:00`, else the cron expression itself.
pub fn repeat_label(cron: &str) -> String {
    let f: Vec<&str> = cron.split_whitespace().collect();
    let time = |m: &str, h: &str| -> Option<String> {
        let (m, h) = (m.parse::<u32>().ok().filter(|m| *m < 60)?, h.parse::<u32>().ok().filter(|h| *h < 24)?);
        Some(format!("{h:02}:{m:02}"))
    };
    if let [m, h, "*", "*", dow] = f.as_slice() {
        if let Some(t) = time(m, h) {
            match *dow {
                "*" => return format!("daily at {t}"),
                "1-5" => return format!("weekdays at {t}"),
                d => {
                    if let Some(name) = d.parse::<usize>().ok().and_then(|d| WEEKDAY_NAMES.get(d % 7)) {
                        return format!("weekly on {name} at {t}");
                    }
                }
            }
        }
    }
    format!("cron \"{cron}\"")
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

/// Parses a time zone name.
pub fn zone(name: &str) -> Result<Tz, ScheduleError> {
    name.trim().parse::<Tz>().map_err(|_| ScheduleError::UnknownZone(name.trim().chars().take(64).collect()))
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
        Some(Value::String(t)) => Some(t.trim().parse::<f64>().map_err(|_| ScheduleError::BadTime(t.clone()))?),
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
pub fn parse_at(at: &str, tz: Tz) -> Result<DateTime<Utc>, ScheduleError> {
    parse_at_wall(at, tz).map(|(t, _)| t)
}

/// [`parse_at`], and the local wall time asked for when `at` named one (a repeat rule is
/// anchored there, not where a clock change moved the first run).
fn parse_at_wall(at: &str, tz: Tz) -> Result<(DateTime<Utc>, Option<NaiveDateTime>), ScheduleError> {
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

/// A time as people in `tz` read it: `Wednesday, 2026-11-25 09:00 (CET)`.
pub fn local_text(ms: i64, tz: Tz) -> String {
    let t = DateTime::from_timestamp_millis(ms).unwrap_or_default().with_timezone(&tz);
    t.format("%A, %Y-%m-%d %H:%M (%Z)").to_string()
}

/// Decides a new schedule: its zone (the call's, else the chat's, else the default), its
/// first run, its canonical repeat rule, within the limits.
pub fn plan(req: &Request, now: DateTime<Utc>, zone_name: &str, limits: &Limits, active: usize) -> Result<NewSchedule, ScheduleError> {
    if active >= limits.max_active {
        return Err(ScheduleError::TooMany(limits.max_active));
    }
    let zone_name = req.timezone.as_deref().unwrap_or(zone_name);
    let tz = zone(zone_name)?;
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
            let anchor = wall.unwrap_or_else(|| first.with_timezone(&tz).naive_local());
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

/// The run after `after_ms` of a stored recurring rule; `None` for a one-off, a rule that no
/// longer parses, or one that never matches again.
pub fn next_run(repeat: Option<&str>, timezone: &str, after_ms: i64) -> Option<i64> {
    let cron = Cron::parse(repeat?).ok()?;
    let tz = zone(timezone).unwrap_or(Tz::UTC);
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
pub fn on_due(due_ms: i64, repeat: Option<&str>, timezone: &str, now_ms: i64, limits: &Limits) -> DueRun {
    let late_ms = (now_ms - due_ms).max(0);
    let next_ms = next_run(repeat, timezone, now_ms.max(due_ms));
    if late_ms <= limits.max_late_ms {
        DueRun::Fire { late_ms, next_ms }
    } else {
        DueRun::Skip { late_ms, next_ms }
    }
}

/// A stored schedule as the model and people see it in lists.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
pub struct Listed {
    pub id: i64,
    pub text: String,
    pub timezone: String,
    #[serde(default)]
    pub repeat: Option<String>,
    #[serde(default)]
    pub next_run_ms: Option<i64>,
}

/// One line per schedule for `/reminders`, in `tz` (the chat's zone). Markdown: the text
/// is escaped so it shows as written.
pub fn list_text(items: &[Listed], tz_name: &str) -> String {
    if items.is_empty() {
        return "No reminders are set in this chat. Ask me to remind you of something, and /reminders lists it here.".into();
    }
    let tz = zone(tz_name).unwrap_or(Tz::UTC);
    let mut out = format!("Reminders in this chat (times in {}):\n", crate::format::escape_markdown(tz.name()));
    for s in items {
        let when = s.next_run_ms.map_or("—".to_string(), |ms| local_text(ms, tz));
        let repeat = s.repeat.as_deref().map(|r| format!(", {}", repeat_label(r))).unwrap_or_default();
        let text: String = s.text.chars().take(120).collect();
        out.push_str(&format!("\n#{} · {}{}\n{}\n", s.id, crate::format::escape_markdown(&when), crate::format::escape_markdown(&repeat), crate::format::escape_markdown(&text)));
    }
    out.push_str("\nCancel one with /cancel <id>.");
    out
}

/// What the model gets from `list_schedules`.
pub fn list_value(items: &[Listed]) -> Value {
    let list: Vec<Value> = items
        .iter()
        .map(|s| {
            let tz = zone(&s.timezone).unwrap_or(Tz::UTC);
            serde_json::json!({
                "id": s.id,
                "text": s.text,
                "next_run": s.next_run_ms.map(|ms| local_text(ms, tz)),
                "repeat": s.repeat.as_deref().map(repeat_label),
            })
        })
        .collect();
    serde_json::json!({ "schedules": list })
}

/// What the model gets back from a successful `schedule_message`.
pub fn created_value(id: i64, s: &NewSchedule) -> Value {
    let tz = zone(&s.timezone).unwrap_or(Tz::UTC);
    serde_json::json!({
        "ok": true,
        "id": id,
        "next_run": local_text(s.first_run_ms, tz),
        "timezone": s.timezone,
        "repeat": s.repeat.as_deref().map(repeat_label),
    })
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
pub fn marker(run: &ScheduledRun) -> String {
    let tz = zone(&run.timezone).unwrap_or(Tz::UTC);
    let by = run.creator_user_id.map(|u| format!(", set by user_id={u}")).unwrap_or_default();
    format!(
        "[meta] scheduled follow-up #{} due {}{by}. Not a message from a person: see the Situation.",
        run.schedule_id,
        local_text(run.due_ms, tz)
    )
}

/// How long after its due time a scheduled run whose model keeps failing waits before its
/// own text goes out instead (the default of `SCHEDULE_FALLBACK_SECONDS`): a 9:00 reminder
/// is at the person by about 9:02, not after the turn's whole retry budget.
pub const FALLBACK_MS: i64 = 120_000;

/// Whether a scheduled run whose turn just failed (transiently, at `now_ms`) gives up the model
/// and sends its own text now: its next attempt, `retry_in_ms` away, would come later than
/// `fallback_ms` after the run's due time. Giving up ends the turn, so no model-written
/// version can follow the text.
pub fn falls_back(due_ms: i64, now_ms: i64, retry_in_ms: i64, fallback_ms: i64) -> bool {
    now_ms.saturating_add(retry_in_ms.max(0)) > due_ms.saturating_add(fallback_ms)
}

/// `/cancel`'s argument: a schedule id (`12` or `#12`).
pub fn parse_id(args: &str) -> Option<i64> {
    let w = args.trim();
    let w = w.strip_prefix('#').unwrap_or(w);
    (!w.is_empty() && w.chars().all(|c| c.is_ascii_digit())).then(|| w.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn next(cron: &str, tz: &str, after: &str) -> String {
        let tz: Tz = tz.parse().unwrap();
        let t = Cron::parse(cron).unwrap().next_after(tz, utc(after)).unwrap();
        t.with_timezone(&tz).to_rfc3339()
    }

    #[test]
    fn a_failing_run_falls_back_to_its_text_once_a_retry_would_pass_the_window() {
        let due = 1_000_000;
        // Right after the due time, a retry 2 s away still fits the two minutes.
        assert!(!falls_back(due, due + 5_000, 2_000, FALLBACK_MS));
        // A retry that would land after due + 2 min: the text goes now.
        assert!(falls_back(due, due + 100_000, 38_400, FALLBACK_MS));
        // Already past the window (the run started late, or attempts were slow): at once.
        assert!(falls_back(due, due + FALLBACK_MS + 1, 0, FALLBACK_MS));
        // The full retry budget (ten attempts from 2 s, capped at 5 min) is far past it.
        let budget: i64 = (1..10).map(|a| crate::background::jobs::backoff_ms(a, 2_000, 300_000, 1.0) as i64).sum();
        assert!(budget > 10 * 60_000, "{budget}");
        let mut now = due;
        let mut attempt = 1;
        while !falls_back(due, now, crate::background::jobs::backoff_ms(attempt, 2_000, 300_000, 1.0) as i64, FALLBACK_MS) {
            now += crate::background::jobs::backoff_ms(attempt, 2_000, 300_000, 1.0) as i64;
            attempt += 1;
        }
        assert!(now - due <= FALLBACK_MS, "the text goes out within two minutes of the due time");
    }

    #[test]
    fn daily_weekdays_and_weekly_rules_anchor_at_the_first_run() {
        let first = NaiveDateTime::parse_from_str("2026-11-25 09:30", "%Y-%m-%d %H:%M").unwrap(); // a Wednesday
        assert_eq!(Repeat::Daily.to_cron(first), "30 9 * * *");
        assert_eq!(Repeat::Weekdays.to_cron(first), "30 9 * * 1-5");
        assert_eq!(Repeat::Weekly.to_cron(first), "30 9 * * 3");
        assert_eq!(repeat_label("30 9 * * *"), "daily at 09:30");
        assert_eq!(repeat_label("30 9 * * 1-5"), "weekdays at 09:30");
        assert_eq!(repeat_label("30 9 * * 3"), "weekly on Wednesday at 09:30");
        assert_eq!(repeat_label("0 9 1 * *"), "cron \"0 9 1 * *\"");
        // Weekdays skip the weekend: Friday 09:30 → Monday 09:30.
        assert_eq!(next("30 9 * * 1-5", "UTC", "2026-11-27T09:30:00Z"), "2026-11-30T09:30:00+00:00");
        assert_eq!(next("30 9 * * 3", "UTC", "2026-11-25T09:30:00Z"), "2026-12-02T09:30:00+00:00");
    }

    #[test]
    fn daily_runs_keep_local_time_across_dst_in_berlin() {
        // Spring forward: 2027-03-28 02:00 → 03:00 CEST. 09:00 stays 09:00 local.
        assert_eq!(next("0 9 * * *", "Europe/Berlin", "2027-03-27T08:00:00Z"), "2027-03-28T09:00:00+02:00");
        // Fall back: 2026-10-25 03:00 CEST → 02:00 CET.
        assert_eq!(next("0 9 * * *", "Europe/Berlin", "2026-10-24T07:00:00Z"), "2026-10-25T09:00:00+01:00");
        // The skipped hour: 02:30 does not exist on 2027-03-28; it runs at 03:30 CEST, once.
        assert_eq!(next("30 2 * * *", "Europe/Berlin", "2027-03-27T02:00:00Z"), "2027-03-28T03:30:00+02:00");
        assert_eq!(next("30 2 * * *", "Europe/Berlin", "2027-03-28T01:30:00Z"), "2027-03-29T02:30:00+02:00");
        // The repeated hour: 02:30 exists twice on 2026-10-25; it runs at the first only.
        assert_eq!(next("30 2 * * *", "Europe/Berlin", "2026-10-24T23:00:00Z"), "2026-10-25T02:30:00+02:00");
        assert_eq!(next("30 2 * * *", "Europe/Berlin", "2026-10-25T00:30:00Z"), "2026-10-26T02:30:00+01:00");
    }

    #[test]
    fn daily_runs_keep_local_time_across_dst_in_new_york() {
        // 2027-03-14 02:00 EST → 03:00 EDT; 2026-11-01 02:00 EDT → 01:00 EST.
        assert_eq!(next("0 8 * * *", "America/New_York", "2027-03-13T14:00:00Z"), "2027-03-14T08:00:00-04:00");
        assert_eq!(next("0 8 * * *", "America/New_York", "2026-10-31T13:00:00Z"), "2026-11-01T08:00:00-05:00");
        assert_eq!(next("15 2 * * *", "America/New_York", "2027-03-13T08:00:00Z"), "2027-03-14T03:15:00-04:00");
        // 01:30 exists twice on 2026-11-01: once, at the first (EDT).
        assert_eq!(next("30 1 * * *", "America/New_York", "2026-11-01T04:00:00Z"), "2026-11-01T01:30:00-04:00");
        assert_eq!(next("30 1 * * *", "America/New_York", "2026-11-01T05:30:00Z"), "2026-11-02T01:30:00-05:00");
    }

    #[test]
    fn a_zone_without_dst_and_utc_are_plain() {
        assert_eq!(next("0 9 * * *", "Asia/Tokyo", "2027-03-27T23:59:59Z"), "2027-03-28T09:00:00+09:00");
        assert_eq!(next("0 9 * * *", "Asia/Tokyo", "2027-03-28T00:00:00Z"), "2027-03-29T09:00:00+09:00");
        assert_eq!(next("0 9 * * *", "Asia/Tokyo", "2027-03-28T00:00:00.001Z"), "2027-03-29T09:00:00+09:00");
        assert_eq!(next("*/30 * * * *", "UTC", "2026-11-25T10:29:59Z"), "2026-11-25T10:30:00+00:00");
    }

    #[test]
    fn month_ends_and_leap_days() {
        // The 31st only in months that have one.
        assert_eq!(next("0 12 31 * *", "UTC", "2027-01-31T13:00:00Z"), "2027-03-31T12:00:00+00:00");
        // 29 February: the next leap year.
        assert_eq!(next("0 0 29 2 *", "UTC", "2027-01-01T00:00:00Z"), "2028-02-29T00:00:00+00:00");
        // Day of month or day of week when both are given (Vixie cron): the 1st or any Monday.
        assert_eq!(next("0 9 1 * mon", "UTC", "2026-11-25T00:00:00Z"), "2026-11-30T09:00:00+00:00");
        assert_eq!(next("0 9 1 * mon", "UTC", "2026-11-30T10:00:00Z"), "2026-12-01T09:00:00+00:00");
        // Names and Sunday as 7.
        assert_eq!(next("0 9 * dec sun", "UTC", "2026-11-25T00:00:00Z"), "2026-12-06T09:00:00+00:00");
        assert_eq!(next("0 9 * * 7", "UTC", "2026-11-25T00:00:00Z"), "2026-11-29T09:00:00+00:00");
        assert!(Cron::parse("0 0 30 2 *").unwrap().next_after(Tz::UTC, utc("2026-01-01T00:00:00Z")).is_none());
    }

    #[test]
    fn bad_cron_expressions_are_refused() {
        for bad in ["1-59/4294967295 * * * *", "*/61 * * * *", "", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "* * * * 8", "*/0 * * * *", "a * * * *", "5-1 * * * *", "1,,2 * * * *"] {
            assert!(Cron::parse(bad).is_err(), "{bad:?}");
        }
        assert!(matches!(Repeat::parse("fortnightly"), Err(ScheduleError::BadRepeat(_))));
    }

    fn req(args: Value) -> Request {
        parse_request(&args).unwrap()
    }

    fn now() -> DateTime<Utc> {
        utc("2026-11-25T08:00:00Z")
    }

    #[test]
    fn a_schedule_is_planned_in_its_zone() {
        let l = Limits::default();
        let s = plan(&req(json!({"text": "call mum", "in_minutes": 90})), now(), "UTC", &l, 0).unwrap();
        assert_eq!(s.first_run_ms, now().timestamp_millis() + 90 * 60_000);
        assert_eq!(s.repeat, None);
        assert!(!s.explicit_zone);
        let s = plan(&req(json!({"text": "standup", "at": "2026-11-26 09:00", "timezone": "Europe/Berlin", "repeat": "weekdays"})), now(), "UTC", &l, 0).unwrap();
        assert_eq!(s.first_run_ms, utc("2026-11-26T08:00:00Z").timestamp_millis());
        assert_eq!(s.repeat.as_deref(), Some("0 9 * * 1-5"));
        assert_eq!(s.timezone, "Europe/Berlin");
        assert!(s.explicit_zone);
        // The chat's zone is used when the call names none; an offset wins over any zone.
        let s = plan(&req(json!({"text": "x", "at": "2026-11-26T09:00"})), now(), "America/New_York", &l, 0).unwrap();
        assert_eq!(s.first_run_ms, utc("2026-11-26T14:00:00Z").timestamp_millis());
        let s = plan(&req(json!({"text": "x", "at": "2026-11-26T09:00:00+05:30"})), now(), "America/New_York", &l, 0).unwrap();
        assert_eq!(s.first_run_ms, utc("2026-11-26T03:30:00Z").timestamp_millis());
        // "Daily at 02:30" first set on the night 02:30 does not exist: the first run is at
        // 03:30, the rule stays 02:30.
        let n = utc("2027-03-27T12:00:00Z");
        let s = plan(&req(json!({"text": "x", "at": "2027-03-28 02:30", "timezone": "Europe/Berlin", "repeat": "daily"})), n, "UTC", &l, 0).unwrap();
        assert_eq!(s.first_run_ms, utc("2027-03-28T01:30:00Z").timestamp_millis(), "03:30 CEST");
        assert_eq!(s.repeat.as_deref(), Some("30 2 * * *"));
        // Seconds are fine for short follow-ups.
        let s = plan(&req(json!({"text": "x", "in_minutes": 0.05})), now(), "UTC", &l, 0).unwrap();
        assert_eq!(s.first_run_ms - now().timestamp_millis(), 3000);
    }

    #[test]
    fn bad_schedules_get_clear_errors() {
        let l = Limits::default();
        let e = |args: Value, active: usize| -> String {
            match parse_request(&args).and_then(|r| plan(&r, now(), "UTC", &l, active)) {
                Ok(s) => panic!("accepted {args}: {s:?}"),
                Err(e) => e.to_string(),
            }
        };
        assert!(e(json!({"in_minutes": 5}), 0).contains("text is required"));
        assert!(e(json!({"text": "x"}), 0).contains("exactly one of"));
        assert!(e(json!({"text": "x", "at": "2026-12-01 09:00", "in_minutes": 5}), 0).contains("not both"));
        assert!(e(json!({"text": "x", "at": "2026-11-25T07:00:00Z"}), 0).contains("in the past"));
        assert!(e(json!({"text": "x", "in_minutes": -5}), 0).contains("in the past"));
        assert!(e(json!({"text": "x", "at": "tomorrow at nine"}), 0).contains("is not a time"));
        assert!(e(json!({"text": "x", "at": "2030-01-01T00:00:00Z"}), 0).contains("too far ahead"));
        assert!(e(json!({"text": "x", "in_minutes": 5, "timezone": "Mars/Olympus"}), 0).contains("unknown time zone"));
        assert!(e(json!({"text": "x", "in_minutes": 5, "repeat": "*/5 * * * *"}), 0).contains("too often"));
        assert!(e(json!({"text": "x", "in_minutes": 5, "repeat": "0 9 * * 1,0 9 * * 2"}), 0).contains("cron"));
        assert!(e(json!({"text": "x", "in_minutes": 5, "repeat": "0 0 30 2 *"}), 0).contains("never matches"));
        assert!(e(json!({"text": "x", "in_minutes": 5}), 25).contains("25 active schedules"));
        assert!(e(json!({"text": "é".repeat(1001), "in_minutes": 5}), 0).contains("too long"));
        // Every other field is short when valid; a huge one is refused without echoing it.
        for (k, v) in [("repeat", "* ".repeat(5000)), ("at", "9".repeat(5000)), ("timezone", "Z".repeat(5000))] {
            let mut args = json!({"text": "x", "in_minutes": 5});
            if k == "at" {
                args = json!({"text": "x", "at": v});
            } else {
                args[k] = json!(v);
            }
            let err = e(args, 0);
            assert!(err.len() < 300, "{k}: {err}");
        }
        // Two runs 10 minutes apart in one hour, then a day: the shortest gap counts.
        assert!(e(json!({"text": "x", "in_minutes": 5, "repeat": "0,10 9 * * *"}), 0).contains("too often"));
        assert!(plan(&req(json!({"text": "x", "in_minutes": 5, "repeat": "0,30 9 * * *"})), now(), "UTC", &l, 0).is_ok());
    }

    #[test]
    fn a_due_run_fires_once_late_or_is_skipped_beyond_the_limit() {
        let l = Limits { max_late_ms: 3_600_000, ..Limits::default() };
        let due = utc("2026-11-25T09:00:00Z").timestamp_millis();
        let daily = Some("0 9 * * *");
        assert_eq!(on_due(due, daily, "UTC", due + 500, &l), DueRun::Fire { late_ms: 500, next_ms: Some(due + 86_400_000) });
        // Three days offline: one late run? No: beyond the limit it is skipped, and the next
        // run is tomorrow's, not the three missed ones.
        let now = due + 3 * 86_400_000 + 1_800_000;
        assert_eq!(on_due(due, daily, "UTC", now, &l), DueRun::Skip { late_ms: now - due, next_ms: Some(due + 4 * 86_400_000) });
        // Within the limit it fires once, late; the next run is after now.
        let now = due + 86_400_000 + 1_800_000; // 09:30 the next day: yesterday's run is a day late
        assert!(matches!(on_due(due, daily, "UTC", now, &l), DueRun::Skip { .. }));
        let now = due + 1_800_000;
        assert_eq!(on_due(due, daily, "UTC", now, &l), DueRun::Fire { late_ms: 1_800_000, next_ms: Some(due + 86_400_000) });
        // A one-off has no next run.
        assert_eq!(on_due(due, None, "UTC", due, &l), DueRun::Fire { late_ms: 0, next_ms: None });
    }

    #[test]
    fn lists_show_the_chats_zone_and_escape_the_text() {
        let items = vec![Listed { id: 3, text: "call *mum* [x](http://e.vil)".into(), timezone: "UTC".into(), repeat: Some("0 9 * * *".into()), next_run_ms: Some(utc("2026-11-26T08:00:00Z").timestamp_millis()) }];
        let t = list_text(&items, "Europe/Berlin");
        let esc = crate::format::escape_markdown;
        assert!(t.contains(&format!("#3 · {}{}", esc("Thursday, 2026-11-26 09:00 (CET)"), esc(", daily at 09:00"))), "{t}");
        assert!(t.starts_with(&format!("Reminders in this chat (times in {})", esc("Europe/Berlin"))), "{t}");
        assert!(!t.contains("[x](http"), "{t}");
        assert_eq!(parse_id("#12"), Some(12));
        assert_eq!(parse_id(" 7 "), Some(7));
        for junk in ["", "x", "1a", "١٢", "-3", "99999999999999999999"] {
            assert_eq!(parse_id(junk), None, "{junk:?}");
        }
    }
}
