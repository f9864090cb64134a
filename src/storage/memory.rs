//! Memories, summaries and the search index, as a turn, `search_memory`, `/memory` and
//! `/forget` read and erase them. (Consolidation's writes are in `consolidation`.)
//!
//! Invariants (INVARIANTS.md): "Memory privacy is one rule" (every query takes its `WHERE`
//! fragment from `agent_core::memory::scope::Scope`), "Every SQL value is bound".

use crate::args;
use crate::storage::{rows, scope_args, Arg, Db};
use agent_core::memory::Memory;
use agent_core::memory::scope::{Predicate, Scope};
use serde::Deserialize;
use worker::{D1PreparedStatement, Result};
use crate::storage::D1Rows;

/// Columns of `memories` as `agent_core::memory::Memory`.
pub const MEMORY_COLUMNS: &str = "id, kind, chat_id, about_user_id, entity, attribute, value, topics, status, due,
    confidence, happened_on, superseded_by, updated_at, source_ids, supplied_by";

/// `args` followed by the scope predicate's values (placeholders ?{args.len()+1}...).
fn with_scope(mut args: Vec<Arg>, p: &Predicate) -> Vec<Arg> {
    args.extend(scope_args(p));
    args
}

/// `m.`-prefixed memory columns.
fn memory_columns_of(alias: &str) -> String {
    MEMORY_COLUMNS.split(',').map(|c| format!("{alias}.{}", c.trim())).collect::<Vec<_>>().join(", ")
}

/// The summary of a conversation's older history.
#[derive(Debug, Clone, Deserialize)]
pub struct Summary {
    pub summary: String,
    /// The last message seq it covers.
    pub until_seq: i64,
}

const SELECT_SUMMARY: &str = "SELECT summary, until_seq FROM summaries WHERE conv = ?1";

/// Memories about the people present (facts, aliases, open commitments), newest and surest
/// first. ?1 people (JSON), then the scope's values.
fn people_memories_sql(scope: &Predicate) -> String {
    format!(
        "SELECT {MEMORY_COLUMNS} FROM memories
         WHERE superseded_by IS NULL AND kind IN ('fact', 'alias', 'commitment') AND (kind != 'commitment' OR status = 'open')
           AND (about_user_id IN (SELECT value FROM json_each(?1)) OR about_user_id IS NULL)
           AND {}
         ORDER BY confidence DESC, updated_at DESC LIMIT 40",
        scope.sql
    )
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

/// The statements of a recall in `scope` (summary, people's memories, with `embedded` the ids
/// of the memories that have an embedding, and with `fts` the memories matching it), to run
/// in the turn's batch; [`recall_rows`] reads their results.
pub fn recall_statements(db: &Db, conv: &str, scope: &Scope, people: &[i64], fts: Option<String>, embedded: bool) -> Result<Vec<D1PreparedStatement>> {
    let people_json = serde_json::to_string(people).unwrap_or_else(|_| "[]".into());
    let on_people = scope.memories("", 2);
    let mut stmts = vec![
        db.stmt(SELECT_SUMMARY, args![conv])?,
        db.stmt(&people_memories_sql(&on_people), with_scope(args![people_json], &on_people))?,
    ];
    if embedded {
        let on = scope.memories("", 1);
        stmts.push(db.stmt(&embedded_ids_sql(&on), scope_args(&on))?);
    }
    if let Some(q) = fts {
        // Matched within the scope's chats and people (migration 0017), not every chat's.
        let q = agent_core::memory::in_content(&q, scope.memories_fts());
        let on_m = scope.memories("m", 2);
        stmts.push(db.stmt(&relevant_memories_sql(&on_m), with_scope(args![q], &on_m))?);
    }
    Ok(stmts)
}

/// What a recall read: the summary, the memories (people's first, then matches not already
/// in), and with `embedded` the ids of the memories that have an embedding.
pub struct Recalled {
    pub summary: Option<Summary>,
    pub found: Vec<Memory>,
    pub embedded: Option<Vec<i64>>,
}

/// The results of [`recall_statements`] (`embedded` as it was given).
pub fn recall_rows(results: &[D1Rows], embedded: bool) -> Result<Recalled> {
    #[derive(Deserialize)]
    struct Id {
        id: i64,
    }
    let summary = results.first().map(rows::<Summary>).transpose()?.and_then(|r| r.into_iter().next());
    let mut found: Vec<Memory> = results.get(1).map(rows).transpose()?.unwrap_or_default();
    let ids = if embedded { Some(results.get(2).map(rows::<Id>).transpose()?.unwrap_or_default().into_iter().map(|r| r.id).collect()) } else { None };
    if let Some(relevant) = results.get(if embedded { 3 } else { 2 }) {
        for m in rows::<Memory>(relevant)? {
            if !found.iter().any(|f| f.id == m.id) {
                found.push(m);
            }
        }
    }
    Ok(Recalled { summary, found, embedded: ids })
}

/// The ids of the newest memories in the scope that have an embedding, newest first (up to
/// 300). ?1... the scope's values. This query alone decides which memories a turn may recall
/// by similarity; the vectors come from [`embeddings`] or the worker's cache
/// (`agent_core::memory::vector::Cache`).
fn embedded_ids_sql(scope: &Predicate) -> String {
    format!(
        "SELECT id FROM memories
         WHERE embedding IS NOT NULL AND superseded_by IS NULL AND {} ORDER BY updated_at DESC LIMIT 300",
        scope.sql
    )
}

/// The stored embeddings of memories `ids` (listed by the recall's scoped ids statement, so in scope).
pub async fn embeddings(db: &Db, ids: &[i64]) -> Result<Vec<(i64, String)>> {
    #[derive(Deserialize)]
    struct Row {
        id: i64,
        embedding: String,
    }
    let ids = serde_json::to_string(ids).unwrap_or_else(|_| "[]".into());
    let found: Vec<Row> = db
        .all("SELECT id, embedding FROM memories WHERE id IN (SELECT value FROM json_each(?1)) AND embedding IS NOT NULL", args![ids])
        .await?;
    Ok(found.into_iter().map(|r| (r.id, r.embedding)).collect())
}

/// The memories `ids` that are current and in `scope`, in the order of `ids`.
pub async fn memories_by_id(db: &Db, scope: &Scope, ids: &[i64]) -> Result<Vec<Memory>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let on = scope.memories("", 2);
    let json = serde_json::to_string(ids).unwrap_or_else(|_| "[]".into());
    let mut found: Vec<Memory> = db
        .all(
            &format!("SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN (SELECT value FROM json_each(?1)) AND superseded_by IS NULL AND {}", on.sql),
            with_scope(args![json], &on),
        )
        .await?;
    agent_core::order::sort_by_key(&mut found, |m| ids.iter().position(|id| *id == m.id));
    Ok(found)
}

/// Full-text search over the memories and notes `scope` may see, and over the descriptions and
/// transcripts of media sent in `chat_id` (what a photo showed, what a voice note said):
/// `[ref] content` lines, memories and notes first. One round trip.
pub async fn search(db: &Db, scope: &Scope, chat_id: i64, fts: &str, terms: &[String], limit: i64) -> Result<Vec<String>> {
    #[derive(Deserialize)]
    struct Row {
        r#ref: String,
        content: String,
    }
    let limit = limit.clamp(1, 50);
    // Narrowed to the scope's chats and people (the predicates below still decide).
    let fts = agent_core::memory::in_content(fts, scope.search_fts());
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
    let mut stmts = vec![db.stmt(&sql, with_scope(with_scope(args![fts, limit], &on_m), &on_n))?];
    if !terms.is_empty() {
        stmts.push(media_search_stmt(db, chat_id, terms, limit)?);
    }
    let results = db.batch(stmts).await?;
    let mut found: Vec<Row> = rows(&results[0])?;
    if let Some(media) = results.get(1) {
        found.extend(rows::<Row>(media)?);
    }
    Ok(found.into_iter().take(limit as usize).map(|r| format!("[{}] {}", r.r#ref, r.content)).collect())
}

/// Described media whose description or transcript has one of `terms` (plain words: letters
/// and digits only), among the files sent in this chat by people it admits: read through the
/// chat's own (chat, file, message) records (`media_messages`, migration 0021), each file's
/// media row by its key and the message that carried it by its (chat, message) key (still
/// stored, admitted, and still holding the file: an edit that replaced it, or a pruned
/// message, leaves a record that finds nothing), so the rows read follow this chat's media,
/// not every chat's. ?1 chat, ?2 limit, then one pattern
/// per term.
fn media_search_stmt(db: &Db, chat_id: i64, terms: &[String], limit: i64) -> Result<D1PreparedStatement> {
    let likes: Vec<String> = (0..terms.len()).map(|i| format!("(md.description LIKE ?{0} OR md.transcript LIKE ?{0})", i + 3)).collect();
    let sql = format!(
        "SELECT 'media ' || md.kind AS ref,
           md.description || CASE WHEN md.transcript IS NULL THEN '' ELSE '; said: \"' || substr(md.transcript, 1, 500) || '\"' END AS content
         FROM media_messages mm JOIN media md ON md.file_unique_id = mm.file_unique_id
         WHERE mm.chat_id = ?1 AND md.status = 'ok' AND ({})
           AND EXISTS (SELECT 1 FROM messages m WHERE m.chat_id = mm.chat_id AND m.message_id = mm.message_id AND m.excluded = 0
                       AND instr(m.parts, mm.file_unique_id) > 0)
         GROUP BY md.file_unique_id
         ORDER BY md.updated_at DESC LIMIT ?2",
        likes.join(" OR ")
    );
    let mut values = args![chat_id, limit];
    values.extend(terms.iter().map(|t| Arg::from(format!("%{t}%"))));
    db.stmt(&sql, values)
}

/// A note as `/memory` lists it.
#[derive(Deserialize)]
pub struct NoteLine {
    pub id: i64,
    pub content: String,
}

/// What `scope` lists (`Scope::Own` for `/memory`): its notes and live memories, oldest first,
/// in one round trip.
pub async fn listed(db: &Db, scope: &Scope) -> Result<(Vec<NoteLine>, Vec<Memory>)> {
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
    Ok((rows(&results[0])?, rows(&results[1])?))
}

/// Deletes every note and memory in `scope` (and, with `summary_of`, that conversation's
/// summary) in one round trip; returns how many notes and memories went (counted from
/// RETURNING: D1's change counts include the search index's trigger writes).
pub async fn erase(db: &Db, scope: &Scope, summary_of: Option<&str>) -> Result<usize> {
    let on_n = scope.notes("", 1);
    let on_m = scope.memories("", 1);
    let mut stmts = vec![
        db.stmt(&format!("DELETE FROM notes WHERE {} RETURNING id", on_n.sql), scope_args(&on_n))?,
        db.stmt(&format!("DELETE FROM memories WHERE {} RETURNING id", on_m.sql), scope_args(&on_m))?,
    ];
    if let Some(conv) = summary_of {
        stmts.push(db.stmt("DELETE FROM summaries WHERE conv = ?1", args![conv])?);
    }
    let results = db.batch(stmts).await?;
    let mut n = 0;
    for r in results.iter().take(2) {
        n += rows::<serde_json::Value>(r)?.len();
    }
    Ok(n)
}

/// A note (`n12`) or a memory (`m7`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ItemId {
    Note(i64),
    Memory(i64),
}

/// Deletes one note or memory if `scope` holds it (`None`: any, for the operator); whether
/// it did.
pub async fn erase_one(db: &Db, id: ItemId, scope: Option<&Scope>) -> Result<bool> {
    let (table, id) = match id {
        ItemId::Note(id) => ("notes", id),
        ItemId::Memory(id) => ("memories", id),
    };
    let on = scope.map(|s| if table == "notes" { s.notes("", 2) } else { s.memories("", 2) });
    let (guard, binds) = match &on {
        Some(p) => (format!(" AND {}", p.sql), scope_args(p)),
        None => (String::new(), Vec::new()),
    };
    let sql = format!("DELETE FROM {table} WHERE id = ?1{guard} RETURNING id");
    let mut values = args![id];
    values.extend(binds);
    Ok(!db.all::<serde_json::Value>(&sql, values).await?.is_empty())
}

/// A note or memory as the operator sees it (`n12`, `m7`).
#[derive(Deserialize, serde::Serialize)]
pub struct OperatorLine {
    pub id: String,
    pub kind: String,
    pub chat_id: Option<i64>,
    pub about_user_id: Option<i64>,
    pub text: String,
    pub updated_at: i64,
}

/// Every note and live memory `scope` (`Scope::Operator`) holds, newest first.
pub async fn operator_list(db: &Db, scope: &Scope) -> Result<Vec<OperatorLine>> {
    let on_n = scope.notes("", 1);
    let on_m = scope.memories("", 1 + on_n.binds.len());
    db.all(
        &format!(
            "SELECT 'n' || id AS id, 'note:' || source AS kind, chat_id, about_user_id, content AS text, created_at AS updated_at
               FROM notes WHERE {}
             UNION ALL
             SELECT 'm' || id AS id, kind, chat_id, about_user_id,
               trim(coalesce(attribute || ': ', '') || value) AS text, updated_at
               FROM memories WHERE superseded_by IS NULL AND {}
             ORDER BY updated_at DESC LIMIT 500",
            on_n.sql, on_m.sql
        ),
        with_scope(scope_args(&on_n), &on_m),
    )
    .await
}
