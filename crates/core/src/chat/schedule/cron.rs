//! Repeat rules as time math: a 5-field cron expression parsed ([`Cron`]) and its next match
//! searched in a time zone, a wall time resolved in a zone ([`resolve`]), the friendly rules
//! (`daily`, `weekdays`, `weekly`: [`Repeat`](super::request::Repeat)) as canonical cron, and a rule's label.
use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, Timelike, Utc};
use crate::time_zone::Zone;

/// Days searched for a cron expression's next match (a rule matching nothing fails).
pub(crate) const SEARCH_DAYS: i64 = 5 * 366;

/// Runs looked at when checking a cron rule's shortest interval.
pub(crate) const INTERVAL_SAMPLE: usize = 60;

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

pub(crate) const MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
pub(crate) const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
pub(crate) const WEEKDAY_NAMES: [&str; 7] = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

/// One cron field as a bit set over `lo..=hi`; names (`jan`, `mon`) where given.
pub(crate) fn field(text: &str, lo: u32, hi: u32, names: &[&str]) -> Result<u64, String> {
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
    pub fn next_after(&self, tz: &Zone, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = tz.local(after);
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
    pub(crate) fn shortest_gap(&self, tz: &Zone, from: DateTime<Utc>) -> Option<Duration> {
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
/// change skipped; a time that exists twice is its first occurrence (clock changes are taken
/// to be more than two days apart, as in every zone's rules).
pub fn resolve(tz: &Zone, wall: NaiveDateTime) -> DateTime<Utc> {
    let w = wall.and_utc().timestamp();
    // The offsets a day before and a day after: the wall time read with each is a candidate
    // instant, real when the zone has that offset there.
    let before = tz.offset_at(w - 86_400);
    let after = tz.offset_at(w + 86_400);
    let real = |offset: i32| (tz.offset_at(w - offset as i64) == offset).then_some(w - offset as i64);
    let first = if before == after { real(before) } else { [real(before), real(after)].into_iter().flatten().min() };
    // None: the time was skipped. The offset before the gap, applied to it, lands after the gap.
    let at = first.unwrap_or(w - before as i64);
    DateTime::from_timestamp(at, 0).unwrap_or_default()
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

/// A time as people in `tz` read it: `Wednesday, 2026-11-25 09:00 (CET)`.
pub fn local_text(ms: i64, tz: &Zone) -> String {
    let t = DateTime::from_timestamp_millis(ms).unwrap_or_default();
    format!("{} ({})", tz.local(t).format("%A, %Y-%m-%d %H:%M"), tz.abbreviation(t))
}
