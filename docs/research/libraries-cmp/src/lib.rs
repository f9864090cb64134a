pub mod croner_cron;
pub mod cronparser_cron;
pub mod gum_html;
pub mod ours_cron;
pub mod ours_html;
pub mod entities;
pub mod he_html;

use chrono::{DateTime, Duration, Utc};

/// Same sampling as ours (60 runs).
pub fn shortest_gap(next: impl Fn(DateTime<Utc>) -> Option<DateTime<Utc>>, from: DateTime<Utc>) -> Option<Duration> {
    let mut at = next(from)?;
    let mut shortest: Option<Duration> = None;
    for _ in 0..60 {
        let Some(n) = next(at) else { break };
        let gap = n - at;
        shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
        at = n;
    }
    shortest
}
