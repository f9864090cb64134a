use chrono::{DateTime, Utc};
fn main() {
    let tz = chrono_tz::Tz::UTC;
    let mut t: DateTime<Utc> = "2026-11-25T08:00:00Z".parse().unwrap();
    let c = cmp::ours_cron::Cron::parse("0 0 29 2 *").unwrap();
    let k = cmp::croner_cron::Cron::parse("0 0 29 2 *").unwrap();
    for _ in 0..30 { let n = c.next_after(tz, t); let m = k.next_after(tz, t); println!("{t} -> ours {n:?} croner {m:?}"); match n { Some(x) => t = x, None => break } }
}
