//! Conversations: the per-conversation row (session window, plan, consolidation watermark).
use crate::args;
use crate::storage::Db;
use agent_core::conversation::ConvKey;
use serde::Deserialize;
use worker::Result;

pub async fn set_plan(db: &Db, conv: &ConvKey, plan: &str, now: i64) -> Result<()> {
    db.run(
        "INSERT INTO conversations (conv, chat_id, thread_id, plan, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (conv) DO UPDATE SET plan = excluded.plan, updated_at = excluded.updated_at",
        args![conv.to_string(), conv.chat_id, conv.thread_id, if plan.trim().is_empty() { None } else { Some(plan) }, now],
    )
    .await?;
    Ok(())
}

/// Where a new session starts.
#[derive(Debug, Clone, Copy)]
pub enum NewSession {
    /// Right after this message (the `/new` command itself).
    AfterMessage(i64),
    /// After the newest message on record (the admin API's reset).
    AfterNewest,
}

/// Starts a new session: the turn's history begins at the new start; earlier messages stay.
pub async fn start_new_session(db: &Db, conv: &ConvKey, at: NewSession, now: i64) -> Result<()> {
    let after_message = match at {
        NewSession::AfterMessage(id) => Some(id),
        NewSession::AfterNewest => None,
    };
    db.run(
        "INSERT INTO conversations (conv, chat_id, thread_id, session_start_seq, session_started_at, updated_at)
         VALUES (?1, ?2, ?3, COALESCE(CASE WHEN ?4 IS NULL THEN (SELECT MAX(seq) + 1 FROM messages WHERE conv = ?1)
             ELSE (SELECT seq + 1 FROM messages WHERE chat_id = ?2 AND message_id = ?4) END, 0), ?5, ?5)
         ON CONFLICT (conv) DO UPDATE SET session_start_seq = excluded.session_start_seq,
           session_started_at = excluded.session_started_at, history_cut_seq = NULL, updated_at = excluded.updated_at",
        args![conv.to_string(), conv.chat_id, conv.thread_id, after_message, now],
    )
    .await?;
    Ok(())
}

/// What `/status` shows about a conversation's session.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SessionStatus {
    pub session_started_at: Option<i64>,
    pub session_messages: i64,
    pub total_messages: i64,
    pub model: Option<String>,
}

pub async fn session_status(db: &Db, conv: &ConvKey) -> Result<SessionStatus> {
    let row: Option<SessionStatus> = db
        .first(
            "SELECT c.session_started_at,
               (SELECT COUNT(*) FROM messages m WHERE m.conv = ?1 AND m.seq >= COALESCE(c.session_start_seq, 0))
                 + (SELECT COUNT(*) FROM answers a WHERE a.conv = ?1 AND a.after_seq >= COALESCE(c.session_start_seq, 0)) AS session_messages,
               (SELECT COUNT(*) FROM messages m WHERE m.conv = ?1) + (SELECT COUNT(*) FROM answers a WHERE a.conv = ?1) AS total_messages,
               (SELECT model FROM chats WHERE chat_id = ?2) AS model
             FROM (SELECT ?1 AS conv) k LEFT JOIN conversations c ON c.conv = k.conv",
            args![conv.to_string(), conv.chat_id],
        )
        .await?;
    Ok(row.unwrap_or_default())
}
