//! What the Mini App reads and changes beyond the commands' own queries (which it calls as
//! they are: `memory::erase_one`, `memory::erase`, `schedules::list_active`,
//! `schedules::cancel`): a person's memories and notes with where and when they were learnt
//! and who supplied them, a correction of one's wording, the export of everything kept about
//! them, a reminder's new time, and a group's link. Every read of memories and notes takes its
//! `WHERE` from `agent_core::memory::scope::Scope`, as everywhere.
//!
//! Invariants (INVARIANTS.md): "Memory privacy is one rule", "Every SQL value is bound",
//! "The Mini App trusts only signed init data".

use super::memory::ItemId;
use super::{scope_args, Arg, Db};
use crate::args;
use agent_core::memory::scope::Scope;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use worker::Result;

/// A memory or note as the Mini App lists it.
#[derive(Debug, Deserialize, Serialize)]
pub struct Item {
    /// `m7` (a memory) or `n12` (a note).
    pub id: String,
    /// The memory's kind (`fact`, `episode`, …) or `note`.
    pub kind: String,
    pub attribute: Option<String>,
    /// The wording (what an edit changes).
    pub text: String,
    /// Where it was learnt (NULL: everywhere, an operator's note).
    pub chat_id: Option<i64>,
    /// Whom it is about (NULL: nobody, the chat's own).
    pub about_user_id: Option<i64>,
    pub chat_title: Option<String>,
    pub chat_kind: Option<String>,
    /// When it was learnt or last changed (ms).
    pub at: i64,
    /// Who supplied it (a person's id; NULL unknown).
    pub supplied_by: Option<i64>,
    /// The messages it came from (a JSON array of message ids, memories only).
    pub source_ids: Option<String>,
    /// A note's writer, `agent` or `operator` (NULL for a memory). An operator's note is shown
    /// and changed only by operators (the admin API), never in a group's view.
    #[serde(default)]
    pub source: Option<String>,
}

/// Notes and live memories in `scope`, newest first, with the chat they were learnt in.
pub async fn items(db: &Db, scope: &Scope) -> Result<Vec<Item>> {
    let on_n = scope.notes("n", 1);
    let on_m = scope.memories("m", 1 + on_n.binds.len());
    let sql = format!(
        "SELECT 'n' || n.id AS id, 'note' AS kind, NULL AS attribute, n.content AS text, n.chat_id, n.about_user_id, c.title AS chat_title,
                c.kind AS chat_kind, n.created_at AS at, n.supplied_by, NULL AS source_ids, n.source
           FROM notes n LEFT JOIN chats c ON c.chat_id = n.chat_id WHERE {}
         UNION ALL
         SELECT 'm' || m.id AS id, m.kind, m.attribute, m.value AS text, m.chat_id, m.about_user_id, c.title AS chat_title,
                c.kind AS chat_kind, m.updated_at AS at, m.supplied_by, m.source_ids, NULL AS source
           FROM memories m LEFT JOIN chats c ON c.chat_id = m.chat_id WHERE m.superseded_by IS NULL AND {}
         ORDER BY at DESC LIMIT 500",
        on_n.sql, on_m.sql
    );
    let mut values = scope_args(&on_n);
    values.extend(scope_args(&on_m));
    db.all(&sql, values).await
}

/// Changes the wording of one note or memory if `scope` holds it; whether it did. A memory's
/// embedding is dropped (it described the old wording); the search index follows by trigger.
pub async fn reword(db: &Db, id: ItemId, scope: &Scope, text: &str, now: i64) -> Result<bool> {
    let (sql, on) = match id {
        ItemId::Note(_) => {
            let on = scope.notes("", 3);
            (format!("UPDATE notes SET content = ?2 WHERE id = ?1 AND {} RETURNING id", on.sql), on)
        }
        ItemId::Memory(_) => {
            let on = scope.memories("", 4);
            (format!("UPDATE memories SET value = ?2, embedding = NULL, updated_at = ?3 WHERE id = ?1 AND superseded_by IS NULL AND {} RETURNING id", on.sql), on)
        }
    };
    let mut values: Vec<Arg> = match id {
        ItemId::Note(n) => args![n, text],
        ItemId::Memory(m) => args![m, text, now],
    };
    values.extend(scope_args(&on));
    Ok(!db.all::<Value>(&sql, values).await?.is_empty())
}

const EXPORT_REMINDERS: &str = "SELECT id, chat_id, text, timezone, repeat, next_run_ms, status, runs, created_at
     FROM schedules WHERE creator_user_id = ?1 OR (chat_id = ?1 AND creator_user_id IS NULL) ORDER BY id LIMIT 1000";
/// The person's own messages in their private chat (not the bot's, not anyone else's).
const EXPORT_MESSAGES: &str = "SELECT message_id, date, text, edited_at FROM messages
     WHERE chat_id = ?1 AND user_id = ?1 AND role = 'user' ORDER BY seq LIMIT 5000";
const EXPORT_SUMMARY: &str = "SELECT summary, until_seq FROM summaries WHERE conv = ?1";

/// Everything kept about `user_id` for the export, in one round trip: of the memories and notes
/// `erase` holds (what `/forget all` in their private chat erases), those in their own words or
/// learnt in their private chat; the rest (what others said about them) only counted, with no
/// speaker and no chat; their reminders, their own messages in their private chat and that
/// chat's summary.
pub async fn export(db: &Db, user_id: i64) -> Result<Value> {
    let scope = Scope::Erase { chat_id: user_id, user_id: Some(user_id) };
    let on_n = scope.notes("n", 2);
    let on_m = scope.memories("m", 2 + on_n.binds.len());
    // `own`: the person's words (`supplied_by`), or learnt where only they and the bot speak.
    let items_sql = format!(
        "SELECT 'n' || n.id AS id, 'note' AS kind, n.content AS text, n.chat_id, n.created_at AS at,
                (n.supplied_by IS ?1 OR n.chat_id IS ?1) AS own FROM notes n WHERE {}
         UNION ALL
         SELECT 'm' || m.id AS id, m.kind, trim(coalesce(m.attribute || ': ', '') || m.value) AS text, m.chat_id, m.updated_at AS at,
                (m.supplied_by IS ?1 OR m.chat_id IS ?1) AS own
           FROM memories m WHERE {} ORDER BY at",
        on_n.sql, on_m.sql
    );
    let mut values = args![user_id];
    values.extend(scope_args(&on_n));
    values.extend(scope_args(&on_m));
    let results = db
        .batch(vec![
            db.stmt(&items_sql, values)?,
            db.stmt(EXPORT_REMINDERS, args![user_id])?,
            db.stmt(EXPORT_MESSAGES, args![user_id])?,
            db.stmt(EXPORT_SUMMARY, args![user_id.to_string()])?,
        ])
        .await?;
    let all = |i: usize| -> Result<Vec<Value>> { results.get(i).map(super::rows::<Value>).transpose().map(Option::unwrap_or_default) };
    let (mut own, others): (Vec<Value>, Vec<Value>) = all(0)?.into_iter().partition(|r| r.get("own").and_then(Value::as_i64) == Some(1));
    for r in &mut own {
        if let Some(o) = r.as_object_mut() {
            o.remove("own");
        }
    }
    Ok(serde_json::json!({
        "memories_and_notes": own,
        "said_by_others": {
            "count": others.len(),
            "note": format!("{} facts others said about you are not shown; /forget all erases them too", others.len()),
        },
        "reminders": all(1)?,
        "messages_in_private_chat": all(2)?,
        "private_chat_summary": all(3)?.into_iter().next(),
    }))
}

/// A reminder's new next run and repeat rule, in `conv`, while it is active; whether it
/// changed.
pub async fn reschedule(db: &Db, conv: &str, id: i64, repeat: Option<&str>, next_run_ms: i64, now: i64) -> Result<bool> {
    let sql = "UPDATE schedules SET repeat = ?3, next_run_ms = ?4, updated_at = ?5 WHERE id = ?1 AND conv = ?2 AND status = 'active' RETURNING id";
    Ok(!db.all::<Value>(sql, args![id, conv, repeat, next_run_ms, now]).await?.is_empty())
}

#[derive(Deserialize)]
struct LinkRow {
    token: String,
}

#[derive(Deserialize)]
struct ChatRow {
    chat_id: i64,
}

/// The group's link token: the one stored, else `fresh` stored now.
pub async fn group_link(db: &Db, chat_id: i64, fresh: &str, now: i64) -> Result<String> {
    db.run("INSERT INTO miniapp_links (token, chat_id, created_at) VALUES (?1, ?2, ?3) ON CONFLICT (chat_id) DO NOTHING", args![fresh, chat_id, now]).await?;
    let found: Vec<LinkRow> = db.all("SELECT token FROM miniapp_links WHERE chat_id = ?1", args![chat_id]).await?;
    Ok(found.into_iter().next().map_or_else(|| fresh.to_string(), |r| r.token))
}

/// The group a link token stands for (`None`: not one the bot issued).
pub async fn group_of_link(db: &Db, token: &str) -> Result<Option<i64>> {
    let found: Vec<ChatRow> = db.all("SELECT chat_id FROM miniapp_links WHERE token = ?1", args![token]).await?;
    Ok(found.into_iter().next().map(|r| r.chat_id))
}

/// When operator sessions last ended (seconds; `None`: never): init data signed then or
/// before no longer opens the operator's view.
pub async fn operators_not_before(db: &Db) -> Result<Option<i64>> {
    let found: Vec<Value> = db.all("SELECT not_before FROM operator_sessions WHERE id = 1", args![]).await?;
    Ok(found.first().and_then(|r| r.get("not_before")).and_then(Value::as_i64))
}

/// Ends every operator session signed up to `now_secs`.
pub async fn end_operator_sessions(db: &Db, now_secs: i64) -> Result<()> {
    db.run(
        "INSERT INTO operator_sessions (id, not_before) VALUES (1, ?1) ON CONFLICT (id) DO UPDATE SET not_before = max(not_before, excluded.not_before)",
        args![now_secs],
    )
    .await
    .map(|_| ())
}
