//! The same Cron API on top of the `croner` crate.
use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};

pub struct Cron(croner::Cron);

impl Cron {
    pub fn parse(text: &str) -> Result<Cron, String> {
        CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build()
            .parse(text)
            .map(Cron)
            .map_err(|e| e.to_string())
    }

    pub fn next_after(&self, tz: Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.0.find_next_occurrence(&after.with_timezone(&tz), false).ok().map(|t| t.with_timezone(&Utc))
    }

    pub fn shortest_gap(&self, tz: Tz, from: DateTime<Utc>) -> Option<Duration> {
        crate::shortest_gap(|t| self.next_after(tz, t), from)
    }
}
