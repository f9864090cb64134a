//! Time zones as the core reads them: a [`TimeZones`] database that the caller supplies, and a
//! [`Zone`] found in it (its name, its UTC offset at an instant, a UTC instant as local wall
//! time, the abbreviation people read). The worker's database is the runtime's own (`Intl`,
//! `src/config/tz.rs`), so the wasm carries no time-zone tables; native tests and benchmarks use
//! chrono-tz ([`TzDb`], feature `tzdb`), so the daylight-saving tests run against real data.
//! The decisions made with a zone (which instant a local time means when clocks change, the
//! next run of a rule) stay in the core: `chat::schedule::cron`.
//!
//! Invariants:
//! - A zone name is an IANA name: it starts with a letter and holds only letters, digits and
//!   `/ _ + -` ([`looks_like_zone`]); anything else (an offset such as `+01:00`, an empty or
//!   overlong name) is refused before the database is asked.
//! - A zone is only ever built from a name the database knows, or is UTC.

use chrono::{DateTime, NaiveDateTime, Utc};

/// Characters of a zone name at most (the longest IANA name has 32).
pub const MAX_ZONE_CHARS: usize = 64;

/// A time-zone database.
pub trait TimeZones {
    /// The zone's name as stored (`Europe/Berlin`), when this database knows `name`.
    fn find(&self, name: &str) -> Option<String>;
    /// Seconds east of UTC in `zone` (a name [`find`](Self::find) gave) at `utc_s` (Unix
    /// seconds).
    fn offset(&self, zone: &str, utc_s: i64) -> i32;
    /// The abbreviation people read for `zone` at `utc_s` (`CET`, `EST`).
    fn abbreviation(&self, zone: &str, utc_s: i64) -> String;
}

/// Whether `name` has the shape of an IANA zone name (`Europe/Berlin`, `Etc/GMT+5`, `UTC`).
pub fn looks_like_zone(name: &str) -> bool {
    name.len() <= MAX_ZONE_CHARS
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '+' | '-'))
}

/// The database that knows only UTC: the fallback zone's.
pub struct UtcOnly;

impl TimeZones for UtcOnly {
    fn find(&self, name: &str) -> Option<String> {
        (name == "UTC").then(|| "UTC".to_string())
    }
    fn offset(&self, _zone: &str, _utc_s: i64) -> i32 {
        0
    }
    fn abbreviation(&self, _zone: &str, _utc_s: i64) -> String {
        "UTC".to_string()
    }
}

/// A zone found in a database.
#[derive(Clone)]
pub struct Zone<'a> {
    name: String,
    db: &'a dyn TimeZones,
}

impl std::fmt::Debug for Zone<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Zone({})", self.name)
    }
}

impl<'a> Zone<'a> {
    /// The zone `name` names in `db` (surrounding spaces ignored), when it is one.
    pub fn find(db: &'a dyn TimeZones, name: &str) -> Option<Zone<'a>> {
        let name = name.trim();
        if !looks_like_zone(name) {
            return None;
        }
        db.find(name).map(|name| Zone { name, db })
    }

    pub fn utc() -> Zone<'static> {
        Zone { name: "UTC".to_string(), db: &UtcOnly }
    }

    /// The zone `name` names, else UTC.
    pub fn or_utc(db: &'a dyn TimeZones, name: &str) -> Zone<'a> {
        Zone::find(db, name).unwrap_or_else(|| Zone::utc())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Seconds east of UTC at `t`.
    pub fn offset(&self, t: DateTime<Utc>) -> i32 {
        self.offset_at(t.timestamp())
    }

    pub(crate) fn offset_at(&self, utc_s: i64) -> i32 {
        self.db.offset(&self.name, utc_s)
    }

    /// `t` as the zone's wall-clock time.
    pub fn local(&self, t: DateTime<Utc>) -> NaiveDateTime {
        t.naive_utc() + chrono::Duration::seconds(self.offset(t) as i64)
    }

    /// The abbreviation people read at `t` (`CET`).
    pub fn abbreviation(&self, t: DateTime<Utc>) -> String {
        self.db.abbreviation(&self.name, t.timestamp())
    }
}

/// chrono-tz as a [`TimeZones`] database: native tests and benchmarks (the worker uses the
/// runtime's; the wasm does not carry these tables).
#[cfg(any(test, feature = "tzdb"))]
pub struct TzDb;

#[cfg(any(test, feature = "tzdb"))]
impl TzDb {
    fn at(zone: &str, utc_s: i64) -> Option<<chrono_tz::Tz as chrono::TimeZone>::Offset> {
        use chrono::TimeZone;
        let tz: chrono_tz::Tz = zone.parse().ok()?;
        Some(tz.offset_from_utc_datetime(&DateTime::from_timestamp(utc_s, 0)?.naive_utc()))
    }
}

#[cfg(any(test, feature = "tzdb"))]
impl TimeZones for TzDb {
    fn find(&self, name: &str) -> Option<String> {
        name.parse::<chrono_tz::Tz>().ok().map(|tz| tz.name().to_string())
    }
    fn offset(&self, zone: &str, utc_s: i64) -> i32 {
        use chrono::Offset;
        TzDb::at(zone, utc_s).map_or(0, |o| o.fix().local_minus_utc())
    }
    fn abbreviation(&self, zone: &str, utc_s: i64) -> String {
        use chrono_tz::OffsetName;
        TzDb::at(zone, utc_s).and_then(|o| o.abbreviation().map(str::to_string)).unwrap_or_else(|| "UTC".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_iana_shaped_names_known_to_the_database_are_zones() {
        for good in ["Europe/Berlin", " America/New_York ", "UTC", "Etc/GMT+5", "America/Port-au-Prince"] {
            assert!(Zone::find(&TzDb, good).is_some(), "{good:?}");
        }
        for bad in ["", "Mars/Olympus", "+01:00", "Europe/Berlin; DROP", "/Europe", &"A".repeat(65), "Europe/Berlin\nUTC", "Europe/Ber lin"] {
            assert!(Zone::find(&TzDb, bad).is_none(), "{bad:?}");
        }
        assert_eq!(Zone::or_utc(&TzDb, "Mars/Olympus").name(), "UTC");
    }

    #[test]
    fn offsets_local_times_and_abbreviations_follow_dst() {
        let berlin = Zone::find(&TzDb, "Europe/Berlin").unwrap();
        let summer = DateTime::parse_from_rfc3339("2026-07-01T12:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(berlin.offset(summer), 7200);
        assert_eq!(berlin.local(summer).to_string(), "2026-07-01 14:00:00");
        assert_eq!(berlin.abbreviation(summer), "CEST");
        assert_eq!(Zone::utc().local(summer), summer.naive_utc());
        assert_eq!(Zone::utc().abbreviation(summer), "UTC");
    }
}
