//! Long-term memory at the edge: what a turn recalls, what `search_memory` finds, and what
//! people see and erase with `/memory` and `/forget`.
//!
//! Scope (privacy): every query here takes its `WHERE` fragment from
//! `agent_core::scope::Scope` (the rule is written and tested there): a memory is recalled in
//! the chat where it was learned; facts about a person are also recalled in that person's
//! private chat. Nothing learned in one group shows up in another, and nothing learned in a
//! private chat shows up in a group.

use crate::args;
use crate::storage::Arg;
use crate::config::Ctx;
use agent_core::conversation::ConvKey;
use agent_core::history::{HistoryMessage, Role};
use agent_core::memory::{cosine, fts_query, render, Memory};
use crate::storage::memory::MEMORY_COLUMNS;
use crate::storage::scope_args;
use agent_core::commands::ForgetTarget;
use agent_core::scope::{Predicate, Scope};
use serde::Deserialize;

/// `args` followed by the scope predicate's values (placeholders ?{args.len()+1}...).
fn with_scope(mut args: Vec<Arg>, p: &Predicate) -> Vec<Arg> {
    args.extend(scope_args(p));
    args
}

/// What a turn recalls beyond the notes: learned memories and the summary of older history.
#[derive(Debug, Clone, Default)]
pub struct Memories {
    /// Best first; the prompt cuts them to the memory budget.
    pub items: Vec<String>,
    pub summary: Option<String>,
    /// The last message seq the summary covers.
    pub summary_until: Option<i64>,
}

#[derive(Deserialize)]
struct SummaryRow {
    summary: String,
    until_seq: i64,
}

const SELECT_SUMMARY: &str = "SELECT summary, until_seq FROM summaries WHERE conv = ?1";

/// Memories about the people present (facts, aliases, open commitments), newest and surest
/// first. ?1 people (JSON), then the scope's values.
fn people_memories_sql(scope: &Predicate) -> String {
    format!(
        "SELECT {MEMORY_COLUMNS} FROM memories
         WHERE superseded_by IS NULL AND kind != 'episode' AND (kind != 'commitment' OR status = 'open')
           AND (about_user_id IN (SELECT value FROM json_each(?1)) OR about_user_id IS NULL)
           AND {}
         ORDER BY confidence DESC, updated_at DESC LIMIT 40",
        scope.sql
    )
}

/// `m.`-prefixed memory columns.
fn memory_columns_of(alias: &str) -> String {
    MEMORY_COLUMNS.split(',').map(|c| format!("{alias}.{}", c.trim())).collect::<Vec<_>>().join(", ")
}

/// Memories whose text matches the new messages (episodes included), best match first.
/// ?1 the FTS query, then the scope's values (over `m`).
fn relevant_memories_sql(scope: &Predicate) -> String {
    format!(
        "SELECT {} FROM memory_fts f JOIN memories m ON m.id = CAST(substr(f.ref, 2) AS INTEGER)
         WHERE memory_fts MATCH ?1 AND f.ref LIKE 'm%' AND m.superseded_by IS NULL AND {}
         ORDER BY bm25(memory_fts) LIMIT 12",
        memory_columns_of("m"),
        scope.sql
    )
}

/// The scope of a conversation's reads.
pub fn chat_scope(conv: &ConvKey, people: &[i64]) -> Scope {
    Scope::Chat { chat_id: conv.chat_id, people: people.to_vec() }
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
pub fn recall_statements(db: &crate::storage::Db, conv: &ConvKey, people: &[i64], messages: &[HistoryMessage]) -> worker::Result<Vec<worker::D1PreparedStatement>> {
    let scope = chat_scope(conv, people);
    let people_json = serde_json::to_string(people).unwrap_or_else(|_| "[]".into());
    let on_people = scope.memories("", 2);
    let mut stmts = vec![
        db.stmt(SELECT_SUMMARY, args![conv.to_string()])?,
        db.stmt(&people_memories_sql(&on_people), with_scope(args![people_json], &on_people))?,
    ];
    if let Some(q) = fts_query(&recent_text(messages), 12) {
        let on_m = scope.memories("m", 2);
        stmts.push(db.stmt(&relevant_memories_sql(&on_m), with_scope(args![q], &on_m))?);
    }
    Ok(stmts)
}

/// What a turn recalls, from the results of `recall_statements` (plus embedding matches
/// when EMBEDDINGS_MODEL is set).
pub async fn recall(ctx: &Ctx, conv: &ConvKey, people: &[i64], messages: &[HistoryMessage], results: &[worker::D1Result]) -> worker::Result<Memories> {
    let text = recent_text(messages);
    let summary = results.first().map(crate::storage::rows::<SummaryRow>).transpose()?.and_then(|r| r.into_iter().next());
    let mut found: Vec<Memory> = results.get(1).map(crate::storage::rows).transpose()?.unwrap_or_default();
    if let Some(relevant) = results.get(2) {
        for m in crate::storage::rows::<Memory>(relevant)? {
            if !found.iter().any(|f| f.id == m.id) {
                found.push(m);
            }
        }
    }
    if !ctx.cfg.embeddings_model.is_empty() && !text.trim().is_empty() {
        match similar(ctx, &chat_scope(conv, people), &text).await {
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
async fn similar(ctx: &Ctx, scope: &Scope, text: &str) -> Result<Vec<Memory>, String> {
    let query = ctx.gemini().embed(&ctx.cfg.embeddings_model, &[text.to_string()]).await?.into_iter().next().unwrap_or_default();
    let on = scope.memories("", 1);
    let rows: Vec<Embedded> = ctx
        .db()
        .all(
            &format!(
                "SELECT {MEMORY_COLUMNS}, embedding FROM memories
                 WHERE embedding IS NOT NULL AND superseded_by IS NULL AND {} ORDER BY updated_at DESC LIMIT 300",
                on.sql
            ),
            scope_args(&on),
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

/// `search_memory`: full-text search over the memories and notes the conversation may see
/// (`people`: those present, for operator notes about a person).
pub async fn search(ctx: &Ctx, conv: &ConvKey, people: &[i64], query: &str, limit: i64) -> worker::Result<Vec<String>> {
    #[derive(Deserialize)]
    struct Row {
        r#ref: String,
        content: String,
    }
    let Some(q) = fts_query(query, 12) else { return Ok(Vec::new()) };
    let scope = chat_scope(conv, people);
    let on_m = scope.memories("m", 3);
    let on_n = scope.notes("n", 3 + on_m.binds.len());
    let sql = format!(
        "SELECT f.ref AS ref, f.content AS content FROM memory_fts f
           LEFT JOIN memories m ON f.ref LIKE 'm%' AND m.id = CAST(substr(f.ref, 2) AS INTEGER)
           LEFT JOIN notes n ON f.ref LIKE 'n%' AND n.id = CAST(substr(f.ref, 2) AS INTEGER)
         WHERE memory_fts MATCH ?1
           AND ((m.id IS NOT NULL AND m.superseded_by IS NULL AND {}) OR (n.id IS NOT NULL AND {}))
         ORDER BY bm25(memory_fts) LIMIT ?2",
        on_m.sql, on_n.sql
    );
    let rows: Vec<Row> = ctx.db().all(&sql, with_scope(with_scope(args![q, limit.clamp(1, 50)], &on_m), &on_n)).await?;
    Ok(rows.into_iter().map(|r| format!("[{}] {}", r.r#ref, r.content)).collect())
}

#[derive(Deserialize)]
struct NoteLine {
    id: i64,
    content: String,
}

/// `/memory`: what this chat remembers about the user (and about the chat itself): the
/// `Scope::Own` view, so a group never lists what was learned in a private chat. Operator
/// notes are not listed (they are not the user's to erase).
pub async fn list_for_user(ctx: &Ctx, conv: &ConvKey, user_id: Option<i64>) -> worker::Result<String> {
    let db = ctx.db();
    let scope = Scope::Own { chat_id: conv.chat_id, user_id };
    let on_n = scope.notes("", 1);
    let on_m = scope.memories("", 1);
    let results = db
        .batch(vec![
            db.stmt(&format!("SELECT id, content FROM notes WHERE {} ORDER BY id LIMIT 100", on_n.sql), scope_args(&on_n))?,
            db.stmt(
                &format!("SELECT {MEMORY_COLUMNS} FROM memories WHERE superseded_by IS NULL AND {} ORDER BY id LIMIT 100", on_m.sql),
                scope_args(&on_m),
            )?,
        ])
        .await?;
    let notes: Vec<NoteLine> = crate::storage::rows(&results[0])?;
    let memories: Vec<Memory> = crate::storage::rows(&results[1])?;
    if notes.is_empty() && memories.is_empty() {
        return Ok("I don't remember anything about you yet.".to_string());
    }
    let mut out = String::from("What I remember (/forget <id> erases one, /forget all everything about you):\n");
    // Stored text is outside text: escaped, so it shows exactly as written (no links, no mentions).
    for n in &notes {
        out.push_str(&format!("\nn{} · {}", n.id, agent_core::format::escape_markdown(&n.content)));
    }
    for m in &memories {
        out.push_str(&format!("\nm{} · {}", m.id, agent_core::format::escape_markdown(&render(m))));
    }
    Ok(out)
}

/// `/forget <id>` or `/forget all`: deletes memories about the user, from every table that
/// holds them (notes, memories, and through triggers the search index). `<id>` is erased only
/// if `/memory` here would list it (`Scope::Own`): never an operator note, never what this
/// chat may not see. `all` erases `Scope::Erase`: in a group what the group sees about the
/// user; in a private chat everything about the user and what was learned in that chat.
pub async fn forget_for_user(ctx: &Ctx, conv: &ConvKey, user_id: Option<i64>, what: &ForgetTarget) -> worker::Result<String> {
    let db = ctx.db();
    let private = conv.chat_id > 0;
    if *what == ForgetTarget::All {
        let scope = Scope::Erase { chat_id: conv.chat_id, user_id };
        let on_n = scope.notes("", 1);
        let on_m = scope.memories("", 1);
        let results = db
            .batch(vec![
                db.stmt(&format!("DELETE FROM notes WHERE {} RETURNING id", on_n.sql), scope_args(&on_n))?,
                db.stmt(&format!("DELETE FROM memories WHERE {} RETURNING id", on_m.sql), scope_args(&on_m))?,
                db.stmt("DELETE FROM summaries WHERE ?2 AND conv = ?1", args![conv.to_string(), private])?,
            ])
            .await?;
        // Counted from RETURNING: D1's change counts include the search index's trigger writes.
        let mut n = 0;
        for r in results.iter().take(2) {
            n += crate::storage::rows::<serde_json::Value>(r)?.len();
        }
        return Ok(format!("Done: I forgot {n} things about you."));
    }
    let scope = Scope::Own { chat_id: conv.chat_id, user_id };
    let (table, id, on) = match what {
        ForgetTarget::Note(id) => ("notes", *id, scope.notes("", 2)),
        ForgetTarget::Memory(id) => ("memories", *id, scope.memories("", 2)),
        ForgetTarget::All | ForgetTarget::Unclear => {
            return Ok("Tell me which one: /forget <id> (see /memory) or /forget all.".to_string())
        }
    };
    let what = what.label();
    let sql = format!("DELETE FROM {table} WHERE id = ?1 AND {} RETURNING id", on.sql);
    let n = db.all::<serde_json::Value>(&sql, with_scope(args![id], &on)).await?.len();
    Ok(if n > 0 { format!("Forgotten: {what}.") } else { format!("I have no memory {what} about you.") })
}
