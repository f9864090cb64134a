//! The operator's activity per day (`GET /api/v1/activity`, and the Mini App's charts through
//! it): turns (answered, failed, scheduled runs fired), messages in and out, failures and dead
//! letters, each grouped by UTC day since a time, in one round trip.

use super::{rows, Db};
use crate::args;
use serde::{Deserialize, Serialize};
use worker::Result;

const TURNS: &str = "SELECT date(created_at / 1000, 'unixepoch') AS day, COUNT(*) AS turns,
       SUM(status = 'done') AS done, SUM(status IN ('failed', 'dead')) AS failed,
       SUM(COALESCE(trigger, '') = 'schedule') AS scheduled
     FROM turns WHERE created_at >= ?1 GROUP BY day ORDER BY day";
const MESSAGES: &str = "SELECT date(date, 'unixepoch') AS day, SUM(role = 'user') AS received, SUM(role = 'bot') AS sent
     FROM messages WHERE date >= ?1 / 1000 GROUP BY day ORDER BY day";
const FAILURES: &str = "SELECT date(created_at / 1000, 'unixepoch') AS day, SUM(kind = 'dead_letter') AS dead_letters,
       SUM(kind != 'dead_letter') AS errors
     FROM failures WHERE created_at >= ?1 GROUP BY day ORDER BY day";

#[derive(Debug, Default, Deserialize, Serialize)]
pub struct DayActivity {
    pub day: String,
    pub turns: i64,
    pub done: i64,
    pub failed: i64,
    pub scheduled: i64,
}

#[derive(Debug, Default, Deserialize, Serialize)]
pub struct MessageDay {
    pub day: String,
    pub received: i64,
    pub sent: i64,
}

#[derive(Debug, Default, Deserialize, Serialize)]
pub struct FailureDay {
    pub day: String,
    pub dead_letters: i64,
    pub errors: i64,
}

/// Turns, messages and failures per day since `since_ms`.
pub async fn per_day(db: &Db, since_ms: i64) -> Result<(Vec<DayActivity>, Vec<MessageDay>, Vec<FailureDay>)> {
    let r = db
        .batch(vec![db.stmt(TURNS, args![since_ms])?, db.stmt(MESSAGES, args![since_ms])?, db.stmt(FAILURES, args![since_ms])?])
        .await?;
    Ok((rows(&r[0])?, rows(&r[1])?, rows(&r[2])?))
}
