//! What the operator sees at a glance (the admin API): counts, recent failures, the
//! conversations on record and a conversation's messages, paged. Rows the API answers as they
//! are are read as JSON values, with no row types of their own (less wasm).

use crate::args;
use crate::storage::{rows, Db};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use worker::Result;

/// The counts and the 20 newest failures, in one round trip.
pub async fn status(db: &Db, now: i64) -> Result<(Option<Value>, Vec<Value>)> {
    let results = db
        .batch(vec![
            db.stmt(
                "SELECT (SELECT COUNT(*) FROM chats) AS chats, (SELECT COUNT(*) FROM messages) + (SELECT COUNT(*) FROM answers) AS messages,
                   (SELECT COUNT(*) FROM turns) AS turns, (SELECT COUNT(*) FROM memories) AS memories,
                   (SELECT COUNT(*) FROM notes) AS notes,
                   (SELECT COUNT(*) FROM failures WHERE kind = 'dead_letter') AS dead_letters,
                   (SELECT COUNT(*) FROM pairings WHERE approved_at IS NULL AND expires_at > ?1) AS pending_pairings",
                args![now],
            )?,
            db.stmt("SELECT kind, job_key, conv, detail, created_at FROM failures ORDER BY id DESC LIMIT 20", args![])?,
        ])
        .await?;
    Ok((rows::<Value>(&results[0])?.into_iter().next(), rows(&results[1])?))
}

/// Conversations with messages, by key, after the cursor `after` (a key; empty for the first).
pub async fn sessions(db: &Db, after: &str, limit: i64) -> Result<Vec<Value>> {
    db.all(
        "SELECT m.conv AS conv, m.chat_id AS chat_id, c.title AS title, c.kind AS kind,
           COUNT(*) + (SELECT COUNT(*) FROM answers a WHERE a.conv = m.conv) AS messages,
           MAX(m.date) AS last_message_at, v.session_start_seq AS session_start_seq
         FROM messages m LEFT JOIN chats c ON c.chat_id = m.chat_id LEFT JOIN conversations v ON v.conv = m.conv
         WHERE m.conv > ?1 GROUP BY m.conv ORDER BY m.conv LIMIT ?2",
        args![after, limit],
    )
    .await
}

#[derive(Deserialize, Serialize)]
pub struct MessageLine {
    pub seq: i64,
    pub message_id: Option<i64>,
    pub role: String,
    pub user_id: Option<i64>,
    pub name: String,
    pub text: String,
    pub date: i64,
    pub turn_id: Option<String>,
    /// 1: an answer kept apart (migration 0041; its `seq` is the message it came after).
    #[serde(default, skip_serializing)]
    pub o: i64,
}

/// A conversation's messages before seq `before`, newest first, about `limit` of them, with
/// the bot's answers kept apart (migration 0041) in their places (an answer's `seq` is the
/// message it came after: it is listed before that message); and the next page's `before`,
/// when there may be more. A page ends on a message (answers right before the limit are listed
/// with the message they follow), so that the next page, before its seq, holds the rest.
pub async fn messages(db: &Db, conv: &str, before: i64, limit: i64) -> Result<(Vec<MessageLine>, Option<i64>)> {
    const MORE: i64 = 16;
    let mut rows: Vec<MessageLine> = db
        .all(
            "SELECT seq, message_id, role, user_id, name, text, date, turn_id, 0 AS o FROM messages WHERE conv = ?1 AND seq < ?2
             UNION ALL
             SELECT after_seq, message_id, 'bot', user_id, name, text, date, turn_id, 1 FROM answers WHERE conv = ?1 AND after_seq < ?2
             ORDER BY seq DESC, o DESC LIMIT ?3",
            args![conv, before, limit + MORE],
        )
        .await?;
    let mut end = (limit.max(1) as usize).min(rows.len());
    while end < rows.len() && rows[end - 1].o == 1 {
        end += 1;
    }
    let more = end < rows.len();
    rows.truncate(end);
    let next = more.then(|| rows.last().map(|r| r.seq)).flatten();
    Ok((rows, next))
}
