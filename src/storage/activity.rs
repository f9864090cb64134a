//! The operator's activity per day (`GET /api/v1/activity`, and the Mini App's charts through
//! it): turns (answered, failed, scheduled runs fired), messages in and out, failures and dead
//! letters, each grouped by UTC day since a time, in one round trip.

use super::{rows, Db};
use crate::args;
use serde_json::Value;
use worker::Result;

const TURNS: &str = "SELECT date(created_at / 1000, 'unixepoch') AS day, COUNT(*) AS turns,
       SUM(status = 'done') AS done, SUM(status IN ('failed', 'dead')) AS failed,
       SUM(COALESCE(trigger, '') = 'schedule') AS scheduled
     FROM turns WHERE created_at >= ?1 GROUP BY day ORDER BY day";
/// The bot's answers kept apart (migration 0041) count as sent (read whole: no index by date;
/// an operator's page, not a turn's).
const MESSAGES: &str = "SELECT day, SUM(received) AS received, SUM(sent) AS sent FROM (
       SELECT date(date, 'unixepoch') AS day, SUM(role = 'user') AS received, SUM(role = 'bot') AS sent
         FROM messages WHERE date >= ?1 / 1000 GROUP BY day
       UNION ALL
       SELECT date(date, 'unixepoch'), 0, COUNT(*) FROM answers WHERE date >= ?1 / 1000 GROUP BY 1)
     GROUP BY day ORDER BY day";
const FAILURES: &str = "SELECT date(created_at / 1000, 'unixepoch') AS day, SUM(kind = 'dead_letter') AS dead_letters,
       SUM(kind != 'dead_letter') AS errors
     FROM failures WHERE created_at >= ?1 GROUP BY day ORDER BY day";

/// Turns, messages and failures per day since `since_ms`, each day a JSON object as the API
/// answers it (`day` and the counts: read as JSON values, with no row types of their own, for
/// less wasm).
pub async fn per_day(db: &Db, since_ms: i64) -> Result<(Vec<Value>, Vec<Value>, Vec<Value>)> {
    let r = db
        .batch(vec![db.stmt(TURNS, args![since_ms])?, db.stmt(MESSAGES, args![since_ms])?, db.stmt(FAILURES, args![since_ms])?])
        .await?;
    Ok((rows(&r[0])?, rows(&r[1])?, rows(&r[2])?))
}
