//! The same Cron API on top of the `cron-parser` crate.
use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;

pub struct Cron(cron_parser::Schedule);

impl Cron {
    pub fn parse(text: &str) -> Result<Cron, String> {
        cron_parser::Schedule::parse(text).map(Cron).map_err(|e| e.to_string())
    }

    pub fn next_after(&self, tz: Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.0.next_after(&after.with_timezone(&tz)).map(|t| t.with_timezone(&Utc))
    }

    pub fn shortest_gap(&self, tz: Tz, from: DateTime<Utc>) -> Option<Duration> {
        crate::shortest_gap(|t| self.next_after(tz, t), from)
    }
}
