//! Long-term memory at the edge: what a turn recalls, what `search_memory` finds, and what
//! people see and erase with `/memory` and `/forget`.
//!
//! Scope (privacy): a memory is recalled in the chat where it was learned; facts about a
//! person are also recalled in that person's private chat. Nothing learned in one group shows
//! up in another.

use crate::args;
use crate::env::Ctx;
use agent_core::conversation::ConvKey;
use agent_core::history::{HistoryMessage, Role};
use agent_core::memory::{cosine, fts_query, render, Memory};
use serde::Deserialize;

/// What a turn recalls beyond the notes: learned memories and the summary of older history.
#[derive(Debug, Clone, Default)]
pub struct Memories {
    /// Best first; the prompt cuts them to the memory budget.
    pub items: Vec<String>,
    pub summary: Option<String>,
    /// The last message seq the summary covers.
    pub summary_until: Option<i64>,
}

/// Columns of `memories` as `agent_core::memory::Memory`.
pub const MEMORY_COLUMNS: &str = "id, kind, chat_id, about_user_id, entity, attribute, value, topics, status, due,
    confidence, happened_on, superseded_by, updated_at, source_ids";

#[derive(Deserialize)]
struct SummaryRow {
    summary: String,
    until_seq: i64,
}

const SELECT_SUMMARY: &str = "SELECT summary, until_seq FROM summaries WHERE conv = ?1";

/// Memories about the people present (facts, aliases, open commitments), newest and surest
/// first. ?1 chat, ?2 people (JSON), ?3 the private chat's user or NULL.
fn people_memories_sql() -> String {
    format!(
        "SELECT {MEMORY_COLUMNS} FROM memories
         WHERE superseded_by IS NULL AND kind != 'episode' AND (kind != 'commitment' OR status = 'open')
           AND (about_user_id IN (SELECT value FROM json_each(?2)) OR about_user_id IS NULL)
           AND (chat_id = ?1 OR (kind = 'fact' AND about_user_id = ?3))
         ORDER BY confidence DESC, updated_at DESC LIMIT 40"
    )
}

/// Memories whose text matches the new messages (episodes included), best match first.
fn relevant_memories_sql() -> String {
    let cols = MEMORY_COLUMNS.split(',').map(|c| format!("m.{}", c.trim())).collect::<Vec<_>>().join(", ");
    format!(
        "SELECT {cols} FROM memory_fts f JOIN memories m ON f.ref = 'm' || m.id
         WHERE memory_fts MATCH ?1 AND m.superseded_by IS NULL
           AND (m.chat_id = ?2 OR (m.kind = 'fact' AND m.about_user_id = ?3))
         ORDER BY bm25(memory_fts) LIMIT 12"
    )
}

/// The text of the newest messages from people (what the turn answers), for matching.
fn recent_text(messages: &[HistoryMessage]) -> String {
    messages
        .iter()
        .rev()
        .filter(|m| m.role == Role::User)
        .take(6)
        .map(HistoryMessage::compact_text)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The statements of a recall (summary, people's memories, and memories matching the newest
/// messages), to run in the turn's batch; `recall` reads their results.
pub fn recall_statements(db: &crate::db::Db, conv: &ConvKey, people: &[i64], messages: &[HistoryMessage]) -> worker::Result<Vec<worker::D1PreparedStatement>> {
    let private_user = (conv.chat_id > 0).then_some(conv.chat_id);
    let people_json = serde_json::to_string(people).unwrap_or_else(|_| "[]".into());
    let mut stmts = vec![
        db.stmt(SELECT_SUMMARY, args![conv.to_string()])?,
        db.stmt(&people_memories_sql(), args![conv.chat_id, people_json, private_user])?,
    ];
    if let Some(q) = fts_query(&recent_text(messages), 12) {
        stmts.push(db.stmt(&relevant_memories_sql(), args![q, conv.chat_id, private_user])?);
    }
    Ok(stmts)
}

/// What a turn recalls, from the results of `recall_statements` (plus embedding matches
/// when EMBEDDINGS_MODEL is set).
pub async fn recall(ctx: &Ctx, conv: &ConvKey, messages: &[HistoryMessage], results: &[worker::D1Result]) -> worker::Result<Memories> {
    let private_user = (conv.chat_id > 0).then_some(conv.chat_id);
    let text = recent_text(messages);
    let summary = crate::db::rows::<SummaryRow>(&results[0])?.into_iter().next();
    let mut found: Vec<Memory> = crate::db::rows(&results[1])?;
    if let Some(relevant) = results.get(2) {
        for m in crate::db::rows::<Memory>(relevant)? {
            if !found.iter().any(|f| f.id == m.id) {
                found.push(m);
            }
        }
    }
    if !ctx.cfg.embeddings_model.is_empty() && !text.trim().is_empty() {
        match similar(ctx, conv.chat_id, private_user, &text).await {
            Ok(more) => {
                for m in more {
                    if !found.iter().any(|f| f.id == m.id) {
                        found.push(m);
                    }
                }
            }
            Err(e) => worker::console_warn!("embedding recall failed (FTS results still used): {e}"),
        }
    }
    Ok(Memories {
        items: found.iter().map(render).collect(),
        summary: summary.as_ref().map(|s| s.summary.clone()),
        summary_until: summary.map(|s| s.until_seq),
    })
}

#[derive(Deserialize)]
struct Embedded {
    #[serde(flatten)]
    memory: Memory,
    embedding: String,
}

/// Memories whose embeddings are close to `text` (only when EMBEDDINGS_MODEL is set).
async fn similar(ctx: &Ctx, chat_id: i64, private_user: Option<i64>, text: &str) -> Result<Vec<Memory>, String> {
    let query = crate::consolidate::embed(ctx, &[text.to_string()]).await?.into_iter().next().unwrap_or_default();
    let rows: Vec<Embedded> = ctx
        .db()
        .all(
            &format!(
                "SELECT {MEMORY_COLUMNS}, embedding FROM memories
                 WHERE embedding IS NOT NULL AND superseded_by IS NULL
                   AND (chat_id = ?1 OR (kind = 'fact' AND about_user_id = ?2)) ORDER BY updated_at DESC LIMIT 300"
            ),
            args![chat_id, private_user],
        )
        .await
        .map_err(|e| e.to_string())?;
    let mut scored: Vec<(f32, Memory)> = rows
        .into_iter()
        .filter_map(|r| {
            let v: Vec<f32> = serde_json::from_str(&r.embedding).ok()?;
            Some((cosine(&query, &v), r.memory))
        })
        .filter(|(score, _)| *score >= 0.55)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    Ok(scored.into_iter().take(6).map(|(_, m)| m).collect())
}

/// `search_memory`: full-text search over this chat's memories and notes.
pub async fn search(ctx: &Ctx, chat_id: i64, query: &str, limit: i64) -> worker::Result<Vec<String>> {
    #[derive(Deserialize)]
    struct Row {
        r#ref: String,
        content: String,
    }
    let Some(q) = fts_query(query, 12) else { return Ok(Vec::new()) };
    let private_user = (chat_id > 0).then_some(chat_id);
    let rows: Vec<Row> = ctx
        .db()
        .all(
            "SELECT f.ref AS ref, f.content AS content FROM memory_fts f
             WHERE memory_fts MATCH ?1 AND (f.chat_id = ?2 OR f.about_user_id = ?3)
             ORDER BY bm25(memory_fts) LIMIT ?4",
            args![q, chat_id, private_user, limit.clamp(1, 50)],
        )
        .await?;
    Ok(rows.into_iter().map(|r| format!("[{}] {}", r.r#ref, r.content)).collect())
}

#[derive(Deserialize)]
struct Line {
    id: String,
    text: String,
}

/// `/memory`: what the bot remembers about the user (and, in a group, about the group).
pub async fn list_for_user(ctx: &Ctx, conv: &ConvKey, user_id: Option<i64>) -> worker::Result<String> {
    let rows: Vec<Line> = ctx
        .db()
        .all(
            "SELECT 'n' || id AS id, content AS text FROM notes
               WHERE about_user_id = ?1 OR (chat_id = ?2 AND about_user_id IS NULL)
             UNION ALL
             SELECT 'm' || id AS id, kind || ': ' || value AS text FROM memories
               WHERE superseded_by IS NULL AND (about_user_id = ?1 OR (chat_id = ?2 AND about_user_id IS NULL))
             LIMIT 100",
            args![user_id, conv.chat_id],
        )
        .await?;
    // Facts read better rendered; fetch them whole.
    let memories: Vec<Memory> = ctx
        .db()
        .all(
            &format!(
                "SELECT {MEMORY_COLUMNS} FROM memories WHERE superseded_by IS NULL
                 AND (about_user_id = ?1 OR (chat_id = ?2 AND about_user_id IS NULL)) LIMIT 100"
            ),
            args![user_id, conv.chat_id],
        )
        .await?;
    if rows.is_empty() {
        return Ok("I don't remember anything about you yet.".to_string());
    }
    let mut out = String::from("What I remember (/forget <id> erases one, /forget all everything about you):\n");
    for r in rows {
        let text = r
            .id
            .strip_prefix('m')
            .and_then(|id| id.parse::<i64>().ok())
            .and_then(|id| memories.iter().find(|m| m.id == id))
            .map(render)
            .unwrap_or(r.text);
        out.push_str(&format!("\n{} · {}", r.id, agent_core::format::escape_markdown(&text)));
    }
    Ok(out)
}

/// `/forget <id>` or `/forget all`: deletes memories about the user, from every table that
/// holds them (notes, memories, and through triggers the search index). In a private chat,
/// `all` also erases what was learned about the chat itself.
pub async fn forget_for_user(ctx: &Ctx, conv: &ConvKey, user_id: Option<i64>, what: &str) -> worker::Result<String> {
    let db = ctx.db();
    let what = what.trim().trim_start_matches('#').to_ascii_lowercase();
    let private = conv.chat_id > 0;
    if what == "all" {
        let results = db
            .batch(vec![
                db.stmt(
                    "DELETE FROM notes WHERE source = 'agent' AND (about_user_id = ?1 OR (?3 AND chat_id = ?2)) RETURNING id",
                    args![user_id, conv.chat_id, private],
                )?,
                db.stmt(
                    "DELETE FROM memories WHERE about_user_id = ?1 OR (?3 AND chat_id = ?2) RETURNING id",
                    args![user_id, conv.chat_id, private],
                )?,
                db.stmt("DELETE FROM summaries WHERE ?2 AND conv = ?1", args![conv.to_string(), private])?,
            ])
            .await?;
        // Counted from RETURNING: D1's change counts include the search index's trigger writes.
        let mut n = 0;
        for r in results.iter().take(2) {
            n += crate::db::rows::<serde_json::Value>(r)?.len();
        }
        return Ok(format!("Done: I forgot {n} things about you."));
    }
    let (table, id) = match (what.chars().next(), what[1.min(what.len())..].parse::<i64>()) {
        (Some('n'), Ok(id)) => ("notes", id),
        (Some('m'), Ok(id)) => ("memories", id),
        _ => return Ok("Tell me which one: /forget <id> (see /memory) or /forget all.".to_string()),
    };
    let sql = format!("DELETE FROM {table} WHERE id = ?1 AND (about_user_id = ?2 OR (chat_id = ?3 AND about_user_id IS NULL)) RETURNING id");
    let n = db.all::<serde_json::Value>(&sql, args![id, user_id, conv.chat_id]).await?.len();
    Ok(if n > 0 { format!("Forgotten: {what}.") } else { format!("I have no memory {what} about you.") })
}
