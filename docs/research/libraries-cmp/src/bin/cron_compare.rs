//! Runs agent_core::schedule's cron test cases (and a few probes) against ours, croner and
//! cron-parser; prints every case with each implementation's answer and a mark on differences.
use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use cmp::{croner_cron, cronparser_cron, ours_cron};

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

type Next = fn(&str, Tz, DateTime<Utc>) -> Result<Option<DateTime<Utc>>, String>;
type Gap = fn(&str, Tz, DateTime<Utc>) -> Result<Option<Duration>, String>;

fn impls() -> Vec<(&'static str, Next, Gap)> {
    vec![
        ("ours", |c, tz, a| ours_cron::Cron::parse(c).map(|x| x.next_after(tz, a)), |c, tz, a| ours_cron::Cron::parse(c).map(|x| x.shortest_gap(tz, a))),
        ("croner", |c, tz, a| croner_cron::Cron::parse(c).map(|x| x.next_after(tz, a)), |c, tz, a| croner_cron::Cron::parse(c).map(|x| x.shortest_gap(tz, a))),
        ("cron-parser", |c, tz, a| cronparser_cron::Cron::parse(c).map(|x| x.next_after(tz, a)), |c, tz, a| cronparser_cron::Cron::parse(c).map(|x| x.shortest_gap(tz, a))),
    ]
}

fn show(r: &Result<Option<DateTime<Utc>>, String>, tz: Tz) -> String {
    match r {
        Ok(Some(t)) => t.with_timezone(&tz).to_rfc3339(),
        Ok(None) => "None".into(),
        Err(e) => format!("ERR({})", e.chars().take(50).collect::<String>()),
    }
}

fn main() {
    let mut fails = std::collections::BTreeMap::<&str, Vec<String>>::new();
    // (cron, tz, after, expected) — the asserted cases of schedule.rs's tests.
    let next_cases: &[(&str, &str, &str, &str)] = &[
        ("30 9 * * 1-5", "UTC", "2026-11-27T09:30:00Z", "2026-11-30T09:30:00+00:00"),
        ("30 9 * * 3", "UTC", "2026-11-25T09:30:00Z", "2026-12-02T09:30:00+00:00"),
        ("0 9 * * *", "Europe/Berlin", "2027-03-27T08:00:00Z", "2027-03-28T09:00:00+02:00"),
        ("0 9 * * *", "Europe/Berlin", "2026-10-24T07:00:00Z", "2026-10-25T09:00:00+01:00"),
        ("30 2 * * *", "Europe/Berlin", "2027-03-27T02:00:00Z", "2027-03-28T03:30:00+02:00"),
        ("30 2 * * *", "Europe/Berlin", "2027-03-28T01:30:00Z", "2027-03-29T02:30:00+02:00"),
        ("30 2 * * *", "Europe/Berlin", "2026-10-24T23:00:00Z", "2026-10-25T02:30:00+02:00"),
        ("30 2 * * *", "Europe/Berlin", "2026-10-25T00:30:00Z", "2026-10-26T02:30:00+01:00"),
        ("0 8 * * *", "America/New_York", "2027-03-13T14:00:00Z", "2027-03-14T08:00:00-04:00"),
        ("0 8 * * *", "America/New_York", "2026-10-31T13:00:00Z", "2026-11-01T08:00:00-05:00"),
        ("15 2 * * *", "America/New_York", "2027-03-13T08:00:00Z", "2027-03-14T03:15:00-04:00"),
        ("30 1 * * *", "America/New_York", "2026-11-01T04:00:00Z", "2026-11-01T01:30:00-04:00"),
        ("30 1 * * *", "America/New_York", "2026-11-01T05:30:00Z", "2026-11-02T01:30:00-05:00"),
        ("0 9 * * *", "Asia/Tokyo", "2027-03-27T23:59:59Z", "2027-03-28T09:00:00+09:00"),
        ("0 9 * * *", "Asia/Tokyo", "2027-03-28T00:00:00Z", "2027-03-29T09:00:00+09:00"),
        ("0 9 * * *", "Asia/Tokyo", "2027-03-28T00:00:00.001Z", "2027-03-29T09:00:00+09:00"),
        ("*/30 * * * *", "UTC", "2026-11-25T10:29:59Z", "2026-11-25T10:30:00+00:00"),
        ("0 12 31 * *", "UTC", "2027-01-31T13:00:00Z", "2027-03-31T12:00:00+00:00"),
        ("0 0 29 2 *", "UTC", "2027-01-01T00:00:00Z", "2028-02-29T00:00:00+00:00"),
        ("0 9 1 * mon", "UTC", "2026-11-25T00:00:00Z", "2026-11-30T09:00:00+00:00"),
        ("0 9 1 * mon", "UTC", "2026-11-30T10:00:00Z", "2026-12-01T09:00:00+00:00"),
        ("0 9 * dec sun", "UTC", "2026-11-25T00:00:00Z", "2026-12-06T09:00:00+00:00"),
        ("0 9 * * 7", "UTC", "2026-11-25T00:00:00Z", "2026-11-29T09:00:00+00:00"),
        ("0 0 30 2 *", "UTC", "2026-01-01T00:00:00Z", "None"),
        // on_due: daily 09:00 UTC
        ("0 9 * * *", "UTC", "2026-11-25T09:00:00.500Z", "2026-11-26T09:00:00+00:00"),
        ("0 9 * * *", "UTC", "2026-11-28T09:30:00Z", "2026-11-29T09:00:00+00:00"),
    ];
    println!("## next_after: the asserted cases of schedule.rs tests\n");
    for (c, tz, after, want) in next_cases {
        let tzv: Tz = tz.parse().unwrap();
        let mut line = format!("{c:14} {tz:17} after {after:25} want {want:26}");
        for (name, next, _) in impls() {
            let got = show(&next(c, tzv, utc(after)), tzv);
            let ok = got == *want;
            if !ok {
                fails.entry(name).or_default().push(format!("next({c:?}, {tz}, {after}) = {got}, want {want}"));
            }
            line.push_str(&format!(" | {name}: {}", if ok { "ok".into() } else { format!("DIFF {got}") }));
        }
        println!("{line}");
    }
    println!("\n## parse: expressions our tests require to be refused\n");
    let bad = ["1-59/4294967295 * * * *", "*/61 * * * *", "", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "* * * * 8", "*/0 * * * *", "a * * * *", "5-1 * * * *", "1,,2 * * * *", "fortnightly", "0 9 * * 1,0 9 * * 2"];
    for b in bad {
        let mut line = format!("{b:26}");
        for (name, next, _) in impls() {
            let r = next(b, Tz::UTC, utc("2026-01-01T00:00:00Z"));
            let refused = r.is_err();
            if !refused {
                fails.entry(name).or_default().push(format!("accepts {b:?}: {}", show(&r, Tz::UTC)));
            }
            line.push_str(&format!(" | {name}: {}", if refused { "refused".to_string() } else { format!("ACCEPTED -> {}", show(&r, Tz::UTC)) }));
        }
        println!("{line}");
    }
    println!("\n## shortest gap (plan's min-interval check, 15 min): the asserted cases\n");
    // (cron, tz, from, gap >= 15 min expected: Some(true)=ok, Some(false)=too often, None=never runs)
    let gaps: &[(&str, &str, &str, Option<bool>)] = &[
        ("*/5 * * * *", "UTC", "2026-11-25T08:05:00Z", Some(false)),
        ("0,10 9 * * *", "UTC", "2026-11-25T08:05:00Z", Some(false)),
        ("0,30 9 * * *", "UTC", "2026-11-25T08:05:00Z", Some(true)),
        ("0 0 30 2 *", "UTC", "2026-11-25T08:05:00Z", None),
        ("0 9 * * 1-5", "Europe/Berlin", "2026-11-26T08:00:00Z", Some(true)),
        ("30 2 * * *", "Europe/Berlin", "2027-03-28T01:30:00Z", Some(true)),
    ];
    for (c, tz, from, want) in gaps {
        let tzv: Tz = tz.parse().unwrap();
        let mut line = format!("{c:14} {tz:14} want {:12}", format!("{want:?}"));
        for (name, _, gap) in impls() {
            let got = gap(c, tzv, utc(from));
            let verdict = match &got {
                Ok(Some(g)) => Some(*g >= Duration::minutes(15)),
                Ok(None) => None,
                Err(_) => None,
            };
            let ok = verdict == *want && !(want.is_none() && got.is_err() && name != "ours");
            let shown = match &got { Ok(Some(g)) => format!("{}min", g.num_minutes()), Ok(None) => "None".into(), Err(e) => format!("ERR({})", e.chars().take(40).collect::<String>()) };
            if !ok {
                fails.entry(name).or_default().push(format!("gap({c:?}, {tz}) = {shown}, want {want:?}"));
            }
            line.push_str(&format!(" | {name}: {shown}{}", if ok { "" } else { " DIFF" }));
        }
        println!("{line}");
    }
    println!("\n## probes beyond the tests (no expected value: behaviour comparison)\n");
    let probes: &[(&str, &str, &str)] = &[
        ("*/30 * * * *", "Europe/Berlin", "2026-10-25T00:15:00Z"), // 02:15 CEST, repeated hour ahead
        ("*/30 * * * *", "Europe/Berlin", "2026-10-25T00:45:00Z"), // 02:45 CEST
        ("*/30 * * * *", "Europe/Berlin", "2026-10-25T01:15:00Z"), // 02:15 CET (second pass)
        ("*/30 * * * *", "Europe/Berlin", "2027-03-28T00:45:00Z"), // 01:45 CET before the gap
        ("0 * * * *", "America/New_York", "2026-11-01T05:10:00Z"), // 01:10 EDT
        ("0 2 * * *", "Europe/Berlin", "2027-03-27T12:00:00Z"),    // 02:00 skipped
        ("59 2 * * *", "Europe/Berlin", "2027-03-27T12:00:00Z"),
        ("30 0 * * *", "America/Santiago", "2026-09-05T12:00:00Z"), // midnight gap (Chile DST starts 00:00)
        ("0 0 * * *", "America/Havana", "2027-03-13T12:00:00Z"),     // midnight gap
        ("@daily", "UTC", "2026-11-25T00:00:00Z"),
        ("0 9 L * *", "UTC", "2026-11-25T00:00:00Z"),
        ("0 9 * * 5#2", "UTC", "2026-11-25T00:00:00Z"),
        ("0 9 ? * *", "UTC", "2026-11-25T00:00:00Z"),
        ("0 9 15W * *", "UTC", "2026-11-25T00:00:00Z"),
        ("0 9 * * MON-FRI", "UTC", "2026-11-28T00:00:00Z"),
        ("0 9 * * 5-7", "UTC", "2026-11-25T00:00:00Z"),
        ("0 9 * * 7-1", "UTC", "2026-11-25T00:00:00Z"),
        ("5/15 * * * *", "UTC", "2026-11-25T00:00:00Z"),
        ("0 9 1 * *", "UTC", "2026-11-25T00:00:00Z"),
        ("0 9 */2 * *", "UTC", "2026-11-30T10:00:00Z"),
        ("0 9 * * */2", "UTC", "2026-11-25T00:00:00Z"),
        ("0 9 1-7 * mon", "UTC", "2026-11-25T00:00:00Z"),
        ("0 9 * * 1/2", "UTC", "2026-11-25T00:00:00Z"),
        ("0 9 31 2,4 *", "UTC", "2026-11-25T00:00:00Z"),
        ("0 9 29 2 1", "UTC", "2026-11-25T00:00:00Z"),
    ];
    for (c, tz, after) in probes {
        let tzv: Tz = tz.parse().unwrap();
        let res: Vec<(&str, String)> = impls().into_iter().map(|(n, next, _)| (n, show(&next(c, tzv, utc(after)), tzv))).collect();
        let differs = res.iter().any(|(_, r)| *r != res[0].1);
        let mut line = format!("{}{c:16} {tz:17} after {after}", if differs { "* " } else { "  " });
        for (n, r) in &res {
            line.push_str(&format!(" | {n}: {r}"));
        }
        println!("{line}");
    }
    println!("\n## summary of failures against OUR tests\n");
    for (name, _, _) in impls() {
        let f = fails.get(name).cloned().unwrap_or_default();
        println!("{name}: {} failing assertion(s)", f.len());
        for x in f {
            println!("  - {x}");
        }
    }
}
