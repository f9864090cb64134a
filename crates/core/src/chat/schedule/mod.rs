//! Schedules: reminders and follow-ups the bot sets for later (`schedule_message`), as pure
//! time math. When a schedule first runs, how a repeat rule (`daily`, `weekdays`, `weekly`, a
//! 5-field cron expression) gives the next run in the schedule's time zone, what a due run does
//! (fire, late or not, or skip), and the texts people and the model read.
//!
//! Invariants:
//! - Every time is computed with a real time-zone database from the time passed in (the
//!   caller's [`TimeZones`]: the runtime's in the worker, chrono-tz in the tests); nothing here
//!   reads a clock.
//! - A local time that does not exist (the hour skipped when clocks go forward) runs that much
//!   later (02:30 becomes 03:30); a local time that exists twice (clocks go back) runs once, at
//!   the first. This is what RFC 9557 / Temporal call the "compatible" disambiguation.
//! - A recurring schedule's next run is always after `now`: runs missed while the bot could not
//!   run are never caught up one by one (at most the one due run fires, late, within the
//!   lateness limit).
//! - Repeat rules are stored as one canonical 5-field cron expression (`daily` at the first
//!   run's local time is `M H * * *`, `weekdays` is `M H * * 1-5`, `weekly` is `M H * * D`).
//!
//! Split by job: [`cron`] (repeat rules and the time-zone math), [`request`] (the function's
//! arguments made into a schedule), [`runs`] (next and due runs), [`text`] (what people and the
//! model read).

pub mod cron;
pub mod request;
pub mod runs;
pub mod text;

pub use crate::time_zone::{TimeZones, Zone};
pub use cron::*;
pub use request::*;
pub use runs::*;
pub use text::*;

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, NaiveDateTime, Utc};
    use serde_json::Value;
    use serde_json::json;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    use crate::time_zone::TzDb;

    fn next(cron: &str, tz: &str, after: &str) -> String {
        let zone = zone(&TzDb, tz).unwrap();
        let t = Cron::parse(cron).unwrap().next_after(&zone, utc(after)).unwrap();
        let tz: chrono_tz::Tz = tz.parse().unwrap();
        t.with_timezone(&tz).to_rfc3339()
    }

    #[test]
    fn a_change_follows_the_same_rules_as_a_new_reminder() {
        let now = utc("2026-03-27T12:00:00Z");
        let limits = Limits::default();
        // A local time in the reminder's zone, across the spring-forward night, daily.
        let s = change(&TzDb, "water the plants", "Europe/Berlin", "2026-03-29 09:00", Some("daily"), now, &limits).unwrap();
        assert_eq!(s.first_run_ms, utc("2026-03-29T07:00:00Z").timestamp_millis());
        assert_eq!(s.repeat.as_deref(), Some("0 9 * * *"));
        assert_eq!(s.text, "water the plants");
        // Once (no repeat), in the past, too often: the tool's refusals.
        assert_eq!(change(&TzDb, "x", "UTC", "2026-03-28 09:00", Some(" "), now, &limits).unwrap().repeat, None);
        assert!(matches!(change(&TzDb, "x", "UTC", "2026-03-27 11:00", None, now, &limits), Err(ScheduleError::InPast { .. })));
        assert!(matches!(change(&TzDb, "x", "UTC", "2026-03-28 09:00", Some("*/5 * * * *"), now, &limits), Err(ScheduleError::TooFrequent { .. })));
        assert!(matches!(change(&TzDb, "x", "UTC", "tomorrow-ish", None, now, &limits), Err(ScheduleError::BadTime(_))));
        // A rule the tool wrote keeps its word when the time moves.
        assert_eq!(rule_word("0 9 * * *"), Some("daily"));
        assert_eq!(rule_word("30 7 * * 1-5"), Some("weekdays"));
        assert_eq!(rule_word("0 18 * * 0"), Some("weekly"));
        assert_eq!(rule_word("*/30 * * * *"), None);
        assert_eq!(rule_word("0 9 1 * *"), None);
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
        assert!(Cron::parse("0 0 30 2 *").unwrap().next_after(&Zone::utc(), utc("2026-01-01T00:00:00Z")).is_none());
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
        let s = plan(&TzDb, &req(json!({"text": "call mum", "in_minutes": 90})), now(), "UTC", &l, 0).unwrap();
        assert_eq!(s.first_run_ms, now().timestamp_millis() + 90 * 60_000);
        assert_eq!(s.repeat, None);
        assert!(!s.explicit_zone);
        let s = plan(&TzDb, &req(json!({"text": "standup", "at": "2026-11-26 09:00", "timezone": "Europe/Berlin", "repeat": "weekdays"})), now(), "UTC", &l, 0).unwrap();
        assert_eq!(s.first_run_ms, utc("2026-11-26T08:00:00Z").timestamp_millis());
        assert_eq!(s.repeat.as_deref(), Some("0 9 * * 1-5"));
        assert_eq!(s.timezone, "Europe/Berlin");
        assert!(s.explicit_zone);
        // The chat's zone is used when the call names none; an offset wins over any zone.
        let s = plan(&TzDb, &req(json!({"text": "x", "at": "2026-11-26T09:00"})), now(), "America/New_York", &l, 0).unwrap();
        assert_eq!(s.first_run_ms, utc("2026-11-26T14:00:00Z").timestamp_millis());
        let s = plan(&TzDb, &req(json!({"text": "x", "at": "2026-11-26T09:00:00+05:30"})), now(), "America/New_York", &l, 0).unwrap();
        assert_eq!(s.first_run_ms, utc("2026-11-26T03:30:00Z").timestamp_millis());
        // "Daily at 02:30" first set on the night 02:30 does not exist: the first run is at
        // 03:30, the rule stays 02:30.
        let n = utc("2027-03-27T12:00:00Z");
        let s = plan(&TzDb, &req(json!({"text": "x", "at": "2027-03-28 02:30", "timezone": "Europe/Berlin", "repeat": "daily"})), n, "UTC", &l, 0).unwrap();
        assert_eq!(s.first_run_ms, utc("2027-03-28T01:30:00Z").timestamp_millis(), "03:30 CEST");
        assert_eq!(s.repeat.as_deref(), Some("30 2 * * *"));
        // Seconds are fine for short follow-ups.
        let s = plan(&TzDb, &req(json!({"text": "x", "in_minutes": 0.05})), now(), "UTC", &l, 0).unwrap();
        assert_eq!(s.first_run_ms - now().timestamp_millis(), 3000);
    }

    #[test]
    fn bad_schedules_get_clear_errors() {
        let l = Limits::default();
        let e = |args: Value, active: usize| -> String {
            match parse_request(&args).and_then(|r| plan(&TzDb, &r, now(), "UTC", &l, active)) {
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
        assert!(plan(&TzDb, &req(json!({"text": "x", "in_minutes": 5, "repeat": "0,30 9 * * *"})), now(), "UTC", &l, 0).is_ok());
    }

    #[test]
    fn a_due_run_fires_once_late_or_is_skipped_beyond_the_limit() {
        let l = Limits { max_late_ms: 3_600_000, ..Limits::default() };
        let due = utc("2026-11-25T09:00:00Z").timestamp_millis();
        let daily = Some("0 9 * * *");
        assert_eq!(on_due(&TzDb, due, daily, "UTC", due + 500, &l), DueRun::Fire { late_ms: 500, next_ms: Some(due + 86_400_000) });
        // Three days offline: one late run? No: beyond the limit it is skipped, and the next
        // run is tomorrow's, not the three missed ones.
        let now = due + 3 * 86_400_000 + 1_800_000;
        assert_eq!(on_due(&TzDb, due, daily, "UTC", now, &l), DueRun::Skip { late_ms: now - due, next_ms: Some(due + 4 * 86_400_000) });
        // Within the limit it fires once, late; the next run is after now.
        let now = due + 86_400_000 + 1_800_000; // 09:30 the next day: yesterday's run is a day late
        assert!(matches!(on_due(&TzDb, due, daily, "UTC", now, &l), DueRun::Skip { .. }));
        let now = due + 1_800_000;
        assert_eq!(on_due(&TzDb, due, daily, "UTC", now, &l), DueRun::Fire { late_ms: 1_800_000, next_ms: Some(due + 86_400_000) });
        // A one-off has no next run.
        assert_eq!(on_due(&TzDb, due, None, "UTC", due, &l), DueRun::Fire { late_ms: 0, next_ms: None });
    }

    #[test]
    fn lists_show_the_chats_zone_and_escape_the_text() {
        let items = vec![Listed { id: 3, text: "call *mum* [x](http://e.vil)".into(), timezone: "UTC".into(), repeat: Some("0 9 * * *".into()), next_run_ms: Some(utc("2026-11-26T08:00:00Z").timestamp_millis()) }];
        let t = list_text(&TzDb, &items, "Europe/Berlin");
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
