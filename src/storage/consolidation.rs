//! What memory consolidation reads and writes: the conversations due, the lease a job holds
//! on a conversation, the new messages, the memories learned in the chat, the merge, the
//! summary, the watermark, and the embeddings.
//!
//! Invariants (INVARIANTS.md): "Consolidation commits once" (the lease,
//! `conversations.consolidating_until`, is checked in each statement itself), "Memory privacy
//! is one rule" (here `Scope::LearnedIn`: an id the model names from another chat changes
//! nothing).

use super::memory::MEMORY_COLUMNS;
use super::messages::MessageRow;
use crate::args;
use crate::storage::{rows, scope_args, Db};
use agent_core::conversation::ConvKey;
use agent_core::history::HistoryMessage;
use agent_core::memory::{MergePlan, Memory};
use agent_core::memory::scope::Scope;
use agent_core::turn::CallRecord;
use serde::Deserialize;
use serde_json::Value;
use worker::{D1PreparedStatement, Result};

/// Conversations with messages not yet consolidated and no live lease (up to 100).
pub async fn due(db: &Db, now: i64) -> Result<Vec<ConvKey>> {
    #[derive(Deserialize)]
    struct Due {
        conv: String,
    }
    let due: Vec<Due> = db
        .all(
            // `last_seq` is kept by a trigger on messages (migrations 0009, 0023): past
            // `consolidated_seq` when a message consolidation reads (not the bot's, not
            // excluded) came after it. No scan of `messages`.
            "SELECT conv FROM conversations
             WHERE last_seq > COALESCE(consolidated_seq, 0)
               AND (consolidating_until IS NULL OR consolidating_until < ?1)
             LIMIT 100",
            args![now],
        )
        .await?;
    Ok(due.iter().filter_map(|d| ConvKey::parse(&d.conv)).collect())
}

/// The lease a job holds: the `consolidating_until` it wrote.
#[derive(Clone, Copy, Debug)]
pub struct Lease {
    pub until: i64,
}

/// `EXISTS` the lease, with placeholders ?{a} (conv) and ?{b} (until).
fn lease_guard(a: usize, b: usize) -> String {
    format!("EXISTS (SELECT 1 FROM conversations WHERE conv = ?{a} AND consolidating_until = ?{b})")
}

/// Takes the conversation until `until` unless another job holds it; the watermark then.
pub async fn claim(db: &Db, conv: &ConvKey, now: i64, until: i64) -> Result<Option<(i64, Lease)>> {
    #[derive(Deserialize)]
    struct Claimed {
        consolidated_seq: i64,
    }
    let row: Option<Claimed> = db
        .first(
            "INSERT INTO conversations (conv, chat_id, thread_id, consolidating_until, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (conv) DO UPDATE SET consolidating_until = excluded.consolidating_until
               WHERE consolidating_until IS NULL OR consolidating_until < ?5
             RETURNING consolidated_seq",
            args![conv.to_string(), conv.chat_id, conv.thread_id, until, now],
        )
        .await?;
    Ok(row.map(|r| (r.consolidated_seq, Lease { until })))
}

/// Gives the lease up, unless another job holds it by now.
pub async fn release(db: &Db, conv: &ConvKey, lease: Lease) {
    let _ = db
        .run(
            "UPDATE conversations SET consolidating_until = NULL WHERE conv = ?1 AND consolidating_until = ?2",
            args![conv.to_string(), lease.until],
        )
        .await;
}

/// Messages of `conv` with `after < seq < before` (not excluded), with the bot's answers kept
/// apart (migration 0041) placed at `after` or later, before `before` and before the last
/// message read: oldest first or, with `newest_first`, the newest `limit` (returned oldest
/// first either way).
/// An answer placed at or after the last message read (`seq`, its place, is that message's)
/// belongs to the next read, which starts from that message (`after`): each answer is read by
/// exactly one of a conversation's consecutive consolidations, even one sent during a read.
pub async fn messages(db: &Db, conv: &ConvKey, after: i64, before: i64, limit: i64, newest_first: bool) -> Result<Vec<HistoryMessage>> {
    let order = if newest_first { "DESC" } else { "ASC" };
    let sql = format!(
        "SELECT {}, 0 AS o FROM messages m WHERE m.conv = ?1 AND m.seq > ?2 AND m.seq < ?3 AND m.excluded = 0
         UNION ALL
         SELECT a.after_seq, a.message_id, 'bot', a.user_id, a.name, a.username, a.parts, NULL, NULL, a.date, NULL, a.turn_id, NULL, 1
           FROM answers a WHERE a.conv = ?1 AND a.after_seq >= ?2 AND a.after_seq < ?3
         ORDER BY s {order}, o {order} LIMIT ?4",
        crate::message_columns!()
    );
    let mut found: Vec<MessageRow> = db.all(&sql, args![conv.to_string(), after, before, limit]).await?;
    if newest_first {
        found.reverse();
    }
    let last_message = found.iter().rposition(|m| m.apart.is_none_or(|o| o == 0)).map_or(0, |i| i + 1);
    found.truncate(last_message);
    Ok(found.into_iter().map(MessageRow::into_history).collect())
}

/// The live memories learned in the chat that a consolidation shows the model (facts,
/// aliases and open commitments; newest first, up to 120).
pub async fn existing(db: &Db, chat_id: i64) -> Result<Vec<Memory>> {
    let on = Scope::LearnedIn { chat_id }.memories("", 1);
    db.all(
        &format!(
            "SELECT {MEMORY_COLUMNS} FROM memories WHERE superseded_by IS NULL
             AND (kind != 'commitment' OR status = 'open') AND kind != 'episode'
             AND {}
             ORDER BY updated_at DESC LIMIT 120",
            on.sql
        ),
        scope_args(&on),
    )
    .await
}

/// Which of `users` have written in the chat (an admitted message: `chat_members`, one row per
/// person and chat, migration 0034).
pub async fn seen_in_chat(db: &Db, chat_id: i64, users: &[i64]) -> Result<Vec<i64>> {
    #[derive(Deserialize)]
    struct Seen {
        user_id: i64,
    }
    let found: Vec<Seen> = db
        .all(
            "SELECT user_id FROM chat_members WHERE chat_id = ?1 AND user_id IN (SELECT value FROM json_each(?2))",
            args![chat_id, serde_json::to_string(users).unwrap_or_else(|_| "[]".into())],
        )
        .await?;
    Ok(found.into_iter().map(|r| r.user_id).collect())
}

/// `?17` is who supplied it (migration 0022), after the lease guard's `?15` and `?16`.
const INSERT_MEMORY: &str = "INSERT INTO memories (kind, chat_id, conv, about_user_id, entity, attribute, value, topics, status, due,
       confidence, source_ids, happened_on, created_at, updated_at, supplied_by)
     SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?14, ?17";

/// The statements of a merge, each guarded by the lease (?c conv, ?u until) and, for updates,
/// by the chat: an id from another chat changes nothing even if the model names it.
pub fn merge_statements(db: &Db, conv: &ConvKey, plan: &MergePlan, now: i64, lease: Lease) -> Result<Vec<D1PreparedStatement>> {
    let conv_s = conv.to_string();
    let mut stmts = Vec::new();
    let insert = format!("{INSERT_MEMORY} WHERE {}", lease_guard(15, 16));
    let in_chat = |first: usize| Scope::LearnedIn { chat_id: conv.chat_id }.memories("", first);
    for n in &plan.inserts {
        stmts.push(db.stmt(
            &insert,
            args![
                n.kind.as_str(),
                conv.chat_id,
                conv_s.clone(),
                n.about_user_id,
                n.entity.clone(),
                n.attribute.clone(),
                n.value.clone(),
                n.topics.clone(),
                n.status.clone(),
                n.due.clone(),
                n.confidence,
                serde_json::to_string(&n.source_message_ids).unwrap_or_default(),
                n.happened_on.clone(),
                now,
                conv_s.clone(),
                lease.until,
                n.supplied_by
            ],
        )?);
        if let Some(old) = n.supersedes {
            // Right after its insert, last_insert_rowid() is the new fact (both run or neither:
            // the lease cannot change inside the batch).
            let on = in_chat(5);
            stmts.push(db.stmt(
                &format!(
                    "UPDATE memories SET superseded_by = last_insert_rowid(), updated_at = ?2 WHERE id = ?1 AND {} AND {}",
                    lease_guard(3, 4),
                    on.sql
                ),
                [args![old, now, conv_s.clone(), lease.until], scope_args(&on)].concat(),
            )?);
        }
    }
    for (id, confidence) in &plan.refreshes {
        let on = in_chat(6);
        stmts.push(db.stmt(
            &format!("UPDATE memories SET confidence = ?2, updated_at = ?3 WHERE id = ?1 AND {} AND {}", lease_guard(4, 5), on.sql),
            [args![*id, *confidence, now, conv_s.clone(), lease.until], scope_args(&on)].concat(),
        )?);
    }
    for (id, status) in &plan.status_changes {
        let on = in_chat(6);
        stmts.push(db.stmt(
            &format!("UPDATE memories SET status = ?2, updated_at = ?3 WHERE id = ?1 AND {} AND {}", lease_guard(4, 5), on.sql),
            [args![*id, status.clone(), now, conv_s.clone(), lease.until], scope_args(&on)].concat(),
        )?);
    }
    Ok(stmts)
}

/// A conversation's summary row.
#[derive(Deserialize, Default)]
pub struct SummaryRow {
    pub summary: Option<String>,
    pub until_seq: Option<i64>,
    /// `conversations.history_cut_seq`: where the last turn's history began, when it cut.
    pub history_cut_seq: Option<i64>,
}

pub async fn summary(db: &Db, conv: &ConvKey) -> Result<Option<SummaryRow>> {
    db.first(
        "SELECT (SELECT summary FROM summaries WHERE conv = ?1) AS summary, (SELECT until_seq FROM summaries WHERE conv = ?1) AS until_seq,
           (SELECT history_cut_seq FROM conversations WHERE conv = ?1) AS history_cut_seq",
        args![conv.to_string()],
    )
    .await
}

/// The statement writing a new summary that covers messages up to `until_seq` (`messages`
/// more of them), guarded by the lease.
pub fn summary_statement(db: &Db, conv: &ConvKey, summary: &str, until_seq: i64, messages: usize, now: i64, lease: Lease) -> Result<D1PreparedStatement> {
    db.stmt(
        &format!(
            "INSERT INTO summaries (conv, summary, until_seq, messages, updated_at) SELECT ?1, ?2, ?3, ?4, ?5 WHERE {}
             ON CONFLICT (conv) DO UPDATE SET summary = excluded.summary, until_seq = excluded.until_seq,
               messages = summaries.messages + excluded.messages, updated_at = excluded.updated_at",
            lease_guard(1, 6)
        ),
        args![conv.to_string(), summary, until_seq, messages, now, lease.until],
    )
}

/// Commits a consolidation in one batch (a transaction): the merge and summary statements,
/// then the watermark (which also gives the lease up) with the job's model calls appended to
/// the conversation's row; where the lease no longer held, the calls alone (they happened
/// whatever becomes of the commit): either way the row is written once. Whether the lease held
/// (else nothing else changed).
pub async fn commit(db: &Db, conv: &ConvKey, mut stmts: Vec<D1PreparedStatement>, last_seq: i64, now: i64, lease: Lease, calls: &[CallRecord], keep: CallsKept) -> Result<bool> {
    let (json, tokens) = calls_json(calls, now);
    // Only where the lease did not hold: before the watermark, which clears it.
    if !calls.is_empty() {
        stmts.push(db.stmt(
            &append_calls("conv = ?1 AND consolidating_until IS NOT ?2", 3),
            args![conv.to_string(), lease.until, json.clone(), keep.since, keep.most, keep.day, tokens as i64],
        )?);
    }
    let watermark_at = stmts.len();
    stmts.push(db.stmt(
        // The pointer is set again from the messages: since migration 0023 a message moves it
        // only while the conversation has nothing to consolidate, so one that came during this
        // consolidation (after what it read) is found by the next cron through it.
        &format!(
            "UPDATE conversations SET consolidated_seq = MAX(consolidated_seq, ?2), consolidating_until = NULL, updated_at = ?3,
               last_seq = (SELECT seq FROM messages WHERE conv = ?1 AND role != 'bot' AND excluded = 0 ORDER BY seq DESC LIMIT 1),
               {}
             WHERE conv = ?1 AND consolidating_until = ?4 RETURNING conv",
            calls_set(5)
        ),
        args![conv.to_string(), last_seq, now, lease.until, json, keep.since, keep.most, keep.day, tokens as i64],
    )?);
    stmts.extend(super::usage::token_day_stmt(db, now, tokens)?);
    let results = db.batch(stmts).await?;
    Ok(results.get(watermark_at).and_then(|r| rows::<Value>(r).ok()).is_some_and(|r| !r.is_empty()))
}

/// How much of a conversation's own calls its row keeps, trimmed by the write that appends:
/// those from `since` (the retention cutoff, `RETENTION_DAYS`, as `model_calls` is pruned; 0
/// with none), at most `most` (the newest), so the row stays far under D1's 2 MB whatever the
/// setting; and the day (`limits::day_start`) whose tokens the row counts for the budget check.
#[derive(Clone, Copy, Debug)]
pub struct CallsKept {
    pub since: i64,
    pub most: i64,
    pub day: i64,
}

impl CallsKept {
    /// At most 1,500 calls (each at most about 600 bytes of JSON, an error's text capped:
    /// `usage::call_json`): a month of a job every half hour with one call each; a conversation
    /// consolidated more often keeps fewer days. An idle conversation keeps its calls until it
    /// is consolidated again.
    pub fn at(now: i64, retention_days: u32) -> Self {
        let since = if retention_days == 0 { 0 } else { now - i64::from(retention_days) * 86_400_000 };
        CallsKept { since, most: 1_500, day: agent_core::limits::day_start(now) }
    }
}

/// The calls as the conversation's row keeps them (`usage::call_json`, as a turn's row does)
/// and their tokens.
fn calls_json(calls: &[CallRecord], now: i64) -> (String, u64) {
    let json = Value::Array(calls.iter().map(|c| super::usage::call_json(None, "consolidate", c, now)).collect()).to_string();
    (json, calls.iter().map(|c| c.usage.total_token_count).sum())
}

/// `conversations.calls` with the calls `?{j}` appended, those before `?{j+1}` dropped and at
/// most the newest `?{j+2}` kept, oldest first (migration 0038).
fn calls_appended(j: usize) -> String {
    let (since, most) = (j + 1, j + 2);
    format!(
        "(SELECT json_group_array(json(value)) FROM (SELECT value, at FROM (
           SELECT value, json_extract(value, '$.created_at') AS at FROM json_each(COALESCE(conversations.calls, '[]'))
             WHERE json_extract(value, '$.created_at') >= ?{since}
           UNION ALL SELECT value, json_extract(value, '$.created_at') FROM json_each(?{j})
           ORDER BY at DESC LIMIT ?{most}) ORDER BY at))"
    )
}

/// The calls appended (`calls_appended`) and the day's tokens counted: `?{j+3}` the day,
/// `?{j+4}` the calls' tokens (`conversations.call_tokens` of `call_day`, what the budget check
/// reads without opening the calls).
fn calls_set(j: usize) -> String {
    let (day, tokens) = (j + 3, j + 4);
    format!(
        "calls = {}, call_tokens = CASE WHEN call_day IS ?{day} THEN call_tokens + ?{tokens} ELSE ?{tokens} END, call_day = ?{day}",
        calls_appended(j)
    )
}

/// The conversation's calls appended where `cond` holds (`?{j}`.. as `calls_set`).
fn append_calls(cond: &str, j: usize) -> String {
    format!("UPDATE conversations SET {} WHERE {cond}", calls_set(j))
}

/// Records the model calls of a consolidation that does not commit, on the conversation's row.
pub async fn record_calls(db: &Db, conv: &ConvKey, calls: &[CallRecord], now: i64, keep: CallsKept) {
    let (json, tokens) = calls_json(calls, now);
    let mut stmts: Vec<D1PreparedStatement> =
        db.stmt(&append_calls("conv = ?1", 2), args![conv.to_string(), json, keep.since, keep.most, keep.day, tokens as i64]).into_iter().collect();
    stmts.extend(super::usage::token_day_stmt(db, now, tokens).ok().flatten());
    let _ = db.batch(stmts).await;
}

/// A memory without an embedding yet, as the text to embed.
#[derive(Deserialize)]
pub struct Unembedded {
    pub id: i64,
    pub text: String,
}

pub async fn unembedded(db: &Db, conv: &ConvKey) -> Result<Vec<Unembedded>> {
    db.all(
        "SELECT id, trim(coalesce(entity, '') || ' ' || coalesce(attribute, '') || ' ' || value) AS text
         FROM memories WHERE conv = ?1 AND embedding IS NULL LIMIT 50",
        args![conv.to_string()],
    )
    .await
}

/// Stores embeddings, one per memory, in one round trip.
pub async fn store_embeddings(db: &Db, found: &[Unembedded], vectors: Vec<Vec<f32>>) -> Result<()> {
    let stmts = found
        .iter()
        .zip(vectors)
        .filter_map(|(r, v)| {
            db.stmt("UPDATE memories SET embedding = ?2 WHERE id = ?1", args![r.id, agent_core::memory::vector::encode(&v)]).ok()
        })
        .collect();
    db.batch(stmts).await?;
    Ok(())
}
