//! What the operator sees at a glance (the admin API): counts, recent failures, the
//! conversations on record and a conversation's messages, paged.

use crate::args;
use crate::storage::{rows, Db};
use serde::{Deserialize, Serialize};
use worker::Result;

#[derive(Deserialize, Serialize)]
pub struct Counts {
    pub chats: i64,
    pub messages: i64,
    pub turns: i64,
    pub memories: i64,
    pub notes: i64,
    pub dead_letters: i64,
    pub pending_pairings: i64,
}

#[derive(Deserialize, Serialize)]
pub struct FailureLine {
    pub kind: String,
    pub job_key: Option<String>,
    pub conv: Option<String>,
    pub detail: String,
    pub created_at: i64,
}

/// The counts and the 20 newest failures, in one round trip.
pub async fn status(db: &Db, now: i64) -> Result<(Option<Counts>, Vec<FailureLine>)> {
    let results = db
        .batch(vec![
            db.stmt(
                "SELECT (SELECT COUNT(*) FROM chats) AS chats, (SELECT COUNT(*) FROM messages) AS messages,
                   (SELECT COUNT(*) FROM turns) AS turns, (SELECT COUNT(*) FROM memories) AS memories,
                   (SELECT COUNT(*) FROM notes) AS notes,
                   (SELECT COUNT(*) FROM failures WHERE kind = 'dead_letter') AS dead_letters,
                   (SELECT COUNT(*) FROM pairings WHERE approved_at IS NULL AND expires_at > ?1) AS pending_pairings",
                args![now],
            )?,
            db.stmt("SELECT kind, job_key, conv, detail, created_at FROM failures ORDER BY id DESC LIMIT 20", args![])?,
        ])
        .await?;
    Ok((rows::<Counts>(&results[0])?.into_iter().next(), rows(&results[1])?))
}

#[derive(Deserialize, Serialize)]
pub struct SessionLine {
    pub conv: String,
    pub chat_id: i64,
    pub title: Option<String>,
    pub kind: Option<String>,
    pub messages: i64,
    pub last_message_at: Option<i64>,
    pub session_start_seq: Option<i64>,
}

/// Conversations with messages, by key, after the cursor `after` (a key; empty for the first).
pub async fn sessions(db: &Db, after: &str, limit: i64) -> Result<Vec<SessionLine>> {
    db.all(
        "SELECT m.conv AS conv, m.chat_id AS chat_id, c.title AS title, c.kind AS kind, COUNT(*) AS messages,
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
}

/// A conversation's messages before seq `before`, newest first.
pub async fn messages(db: &Db, conv: &str, before: i64, limit: i64) -> Result<Vec<MessageLine>> {
    db.all(
        "SELECT seq, message_id, role, user_id, name, text, date, turn_id FROM messages
         WHERE conv = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3",
        args![conv, before, limit],
    )
    .await
}
