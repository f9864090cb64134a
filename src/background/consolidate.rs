//! Memory consolidation: the cron finds conversations with messages not yet consolidated and
//! queues one job each (fan-out keeps every invocation small); a job reads the new messages,
//! asks Gemini for structured memories, merges them (`agent_core::memory::merge`), writes a
//! summary of older history when it no longer fits the budget, and moves the watermark.
//!
//! Invariants:
//! - The watermark and everything merged commit in one D1 batch (a transaction): a retried or
//!   repeated job never processes a message twice.
//! - A lease on the conversation keeps two jobs from consolidating it at once, and the commit
//!   checks it in the batch itself: every statement that changes memories, the summary or the
//!   watermark runs only while `consolidating_until` still holds this job's value, so a job
//!   that outlived its lease (another job took the conversation over) commits nothing.
//! - A chat's consolidation reads and changes only what was learned in that chat
//!   (`Scope::LearnedIn`): memories of other chats are neither shown to the model nor touched
//!   by ids it returns, and every update is also guarded by `chat_id` in SQL.
//! - Only people seen in the conversation (users with messages in the chat) may be the
//!   subject of a memory learned there; other subjects are dropped.
//! - Messages stay in D1; consolidation deletes nothing.
//! - The summary covers messages up to `summaries.until_seq`; a turn whose history is cut
//!   beyond what it covers says so in its prompt (never a silent drop).

use crate::args;
use crate::config::{now_ms, Ctx};
use crate::outbound::queues;
use crate::storage::memory::MEMORY_COLUMNS;
use crate::storage::messages::MessageRow;
use crate::storage::{self, scope_args, Db};
use agent_core::conversation::ConvKey;
use agent_core::gemini::{Content, GenerateContentRequest, GenerateContentResponse, GenerationConfig, ModelError, Outcome, Part};
use agent_core::history::{self, HistoryMessage};
use agent_core::jobs::{Job, JobOutcome};
use agent_core::memory::{self as mem, Extraction, Memory};
use agent_core::scope::Scope;
use agent_core::turn::CallRecord;
use serde::Deserialize;
use serde_json::Value;

/// Messages one job reads; the rest go to a follow-up job.
const BATCH: i64 = 200;
/// How long a job holds a conversation.
const LEASE_MS: i64 = 5 * 60 * 1000;
/// Messages one summary call folds in at most.
const SUMMARY_BATCH: i64 = 400;

#[derive(Deserialize)]
struct Due {
    conv: String,
}

/// Cron: queues a consolidation job for each conversation with new messages (up to 100 per
/// run; the next run takes the rest). Returns how many were queued.
pub async fn enqueue_due(ctx: &Ctx) -> worker::Result<usize> {
    let due: Vec<Due> = ctx
        .db()
        .all(
            // `last_seq` is kept by a trigger on messages (migration 0009): the newest message
            // consolidation reads (not the bot's, not excluded). No scan of `messages`.
            "SELECT conv FROM conversations
             WHERE last_seq > COALESCE(consolidated_seq, 0)
               AND (consolidating_until IS NULL OR consolidating_until < ?1)
             LIMIT 100",
            args![now_ms()],
        )
        .await?;
    if due.is_empty() {
        return Ok(0);
    }
    let jobs: Vec<Job> = due.iter().map(|d| Job::Consolidate { conv: d.conv.clone(), attempt: 1 }).collect();
    queues::enqueue_all(ctx, jobs).await?;
    Ok(due.len())
}

#[derive(Deserialize)]
struct Lease {
    consolidated_seq: i64,
}

/// The lease a job holds: the `consolidating_until` it wrote. Statements guarded by it do
/// nothing once another job has taken the conversation.
#[derive(Clone, Copy)]
struct Held {
    until: i64,
}

/// `EXISTS` the lease, with placeholders ?{a} (conv) and ?{b} (until).
fn lease_guard(a: usize, b: usize) -> String {
    format!("EXISTS (SELECT 1 FROM conversations WHERE conv = ?{a} AND consolidating_until = ?{b})")
}

async fn claim(db: &Db, conv: &ConvKey, now: i64) -> worker::Result<Option<i64>> {
    let row: Option<Lease> = db
        .first(
            "INSERT INTO conversations (conv, chat_id, thread_id, consolidating_until, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (conv) DO UPDATE SET consolidating_until = excluded.consolidating_until
               WHERE consolidating_until IS NULL OR consolidating_until < ?5
             RETURNING consolidated_seq",
            args![conv.to_string(), conv.chat_id, conv.thread_id, now + LEASE_MS, now],
        )
        .await?;
    Ok(row.map(|r| r.consolidated_seq))
}

/// Gives the lease up, unless another job holds it by now.
async fn release(db: &Db, conv: &str, lease: Held) {
    let _ = db
        .run("UPDATE conversations SET consolidating_until = NULL WHERE conv = ?1 AND consolidating_until = ?2", args![conv, lease.until])
        .await;
}

fn message_sql(order: &str) -> String {
    format!(
        "SELECT m.seq, m.message_id, m.role, m.user_id, m.name, m.username, m.parts, m.reply_to, m.forwarded_from,
           m.date, m.edited_at, m.turn_id, NULL AS turn_upto_seq
         FROM messages m WHERE m.conv = ?1 AND m.seq > ?2 AND m.seq < ?3 AND m.excluded = 0 ORDER BY m.seq {order} LIMIT ?4"
    )
}

/// Calls Gemini for JSON matching `schema`; records the call.
async fn structured_call(ctx: &Ctx, system: String, text: String, schema: Value, calls: &mut Vec<CallRecord>) -> Result<Value, ModelError> {
    let gemini = ctx.gemini();
    let request = GenerateContentRequest {
        system_instruction: Some(Content { role: None, parts: vec![Part::text(system)] }),
        contents: vec![Content::user(vec![Part::text(text)])],
        tools: Vec::new(),
        tool_config: None,
        generation_config: Some(GenerationConfig {
            response_mime_type: Some("application/json".into()),
            response_schema: Some(schema),
            max_output_tokens: Some(8192),
            thinking_config: None,
        }),
    };
    let model = ctx.cfg.gemini_model.clone();
    let started = now_ms();
    let result = async {
        let body = serde_json::to_string(&request).map_err(|e| ModelError::InvalidResponse(e.to_string()))?;
        let raw = gemini.post(&model, "generateContent", body).await?;
        let response: GenerateContentResponse = serde_json::from_str(&raw).map_err(|e| ModelError::InvalidResponse(e.to_string()))?;
        Ok::<_, ModelError>(response)
    }
    .await;
    let duration_ms = now_ms() - started;
    match result {
        Ok(response) => {
            calls.push(CallRecord {
                model: response.model_version.clone().unwrap_or(model),
                usage: response.usage_metadata.clone().unwrap_or_default(),
                duration_ms,
                finish_reason: response.finish_reason().map(String::from),
                status: 200,
                error: None,
            });
            match response.outcome() {
                Outcome::Content(c) => {
                    let text = c.visible_text();
                    serde_json::from_str(text.trim()).map_err(|e| ModelError::InvalidResponse(format!("not the JSON asked for: {e}")))
                }
                Outcome::Empty { reason } => Err(ModelError::InvalidResponse(format!("no answer: {reason}"))),
            }
        }
        Err(e) => {
            let status = match &e {
                ModelError::Http { status, .. } => *status,
                _ => 0,
            };
            calls.push(CallRecord { model, usage: Default::default(), duration_ms, finish_reason: None, status, error: Some(e.to_string()) });
            Err(e)
        }
    }
}

fn outcome_of(e: &ModelError) -> JobOutcome {
    if e.is_transient() {
        JobOutcome::Retry { error: e.to_string(), after_ms: e.retry_after_ms() }
    } else {
        JobOutcome::Failed { error: e.to_string() }
    }
}

fn today() -> String {
    chrono::DateTime::from_timestamp_millis(now_ms()).unwrap_or_default().format("%Y-%m-%d").to_string()
}

/// Runs one consolidation job for `conv`.
pub async fn run(ctx: &Ctx, conv_s: &str) -> JobOutcome {
    let Some(conv) = ConvKey::parse(conv_s) else { return JobOutcome::Failed { error: format!("bad conversation {conv_s}") } };
    let db = ctx.db();
    let now = now_ms();
    let watermark = match claim(&db, &conv, now).await {
        Ok(Some(w)) => w,
        Ok(None) => return JobOutcome::Done, // another job holds it
        Err(e) => return JobOutcome::Retry { error: e.to_string(), after_ms: None },
    };
    let lease = Held { until: now + LEASE_MS };
    let outcome = consolidate(ctx, &db, &conv, watermark, lease).await;
    if !matches!(outcome, JobOutcome::Done) {
        release(&db, conv_s, lease).await;
    }
    outcome
}

/// The subjects of `x` that are seen in the chat: `people` (who wrote in this batch) and
/// anyone else it names who has written in the chat before.
async fn seen_subjects(db: &Db, chat_id: i64, people: &[i64], x: &Extraction) -> worker::Result<Vec<i64>> {
    #[derive(Deserialize)]
    struct Seen {
        user_id: i64,
    }
    let mut seen = people.to_vec();
    let others: Vec<i64> = x.subject_ids().into_iter().filter(|u| !people.contains(u)).collect();
    if !others.is_empty() {
        let rows: Vec<Seen> = db
            .all(
                "SELECT DISTINCT user_id FROM messages
                 WHERE chat_id = ?1 AND role = 'user' AND excluded = 0 AND user_id IN (SELECT value FROM json_each(?2))",
                args![chat_id, serde_json::to_string(&others).unwrap_or_else(|_| "[]".into())],
            )
            .await?;
        seen.extend(rows.into_iter().map(|r| r.user_id));
    }
    Ok(seen)
}

async fn consolidate(ctx: &Ctx, db: &Db, conv: &ConvKey, watermark: i64, lease: Held) -> JobOutcome {
    let conv_s = conv.to_string();
    let retry = |e: worker::Error| JobOutcome::Retry { error: e.to_string(), after_ms: None };
    let rows: Vec<MessageRow> = match db.all(&message_sql("ASC"), args![conv_s.clone(), watermark, i64::MAX, BATCH]).await {
        Ok(r) => r,
        Err(e) => return retry(e),
    };
    let Some(last_seq) = rows.last().map(|r| r.seq) else {
        release(db, &conv_s, lease).await;
        return JobOutcome::Done;
    };
    let more = rows.len() as i64 == BATCH;
    let messages: Vec<HistoryMessage> = rows.into_iter().map(MessageRow::into_history).collect();
    let people: Vec<i64> = {
        let mut p: Vec<i64> = messages.iter().filter(|m| m.role == history::Role::User).filter_map(|m| m.user_id).collect();
        p.sort_unstable();
        p.dedup();
        p
    };
    // Only what was learned in this chat: a group's request never carries private memories.
    let on = Scope::LearnedIn { chat_id: conv.chat_id }.memories("", 1);
    let existing: Vec<Memory> = match db
        .all(
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
    {
        Ok(r) => r,
        Err(e) => return retry(e),
    };

    let mut calls = Vec::new();
    let mut stmts = Vec::new();
    let now = now_ms();
    let has_speech = messages.iter().any(|m| m.role == history::Role::User);
    if has_speech {
        let extraction: Extraction = match structured_call(
            ctx,
            mem::consolidation_instruction(&existing, &today()),
            history::compact_lines(&messages),
            mem::extraction_schema(),
            &mut calls,
        )
        .await
        {
            Ok(v) => serde_json::from_value(v).unwrap_or_default(),
            Err(e) => {
                record_calls(db, &conv_s, conv.chat_id, &calls).await;
                return outcome_of(&e);
            }
        };
        let seen = match seen_subjects(db, conv.chat_id, &people, &extraction).await {
            Ok(s) => s,
            Err(e) => {
                record_calls(db, &conv_s, conv.chat_id, &calls).await;
                return retry(e);
            }
        };
        let (extraction, dropped) = extraction.only_seen_subjects(&seen);
        if dropped > 0 {
            worker::console_warn!("consolidation of {conv_s}: dropped {dropped} items about people never seen in the chat");
        }
        let plan = mem::merge(&existing, &extraction, &today());
        match merge_statements(db, conv, &plan, now, lease) {
            Ok(s) => stmts.extend(s),
            Err(e) => return retry(e),
        }
    }

    // Summary: fold in the older messages that no longer fit the history budget.
    match summary_statement(ctx, db, conv, &mut calls, lease).await {
        Ok(Some(s)) => stmts.push(s),
        Ok(None) => {}
        Err(e) => {
            record_calls(db, &conv_s, conv.chat_id, &calls).await;
            return outcome_of(&e);
        }
    }

    // The watermark moves (and the lease is given up) last: every statement before it checks
    // the lease, which this one then clears. Its RETURNING row says whether the lease held.
    let watermark_stmt = db.stmt(
        "UPDATE conversations SET consolidated_seq = MAX(consolidated_seq, ?2), consolidating_until = NULL, updated_at = ?3
         WHERE conv = ?1 AND consolidating_until = ?4 RETURNING conv",
        args![conv_s.clone(), last_seq, now, lease.until],
    );
    let mut batch = stmts;
    let watermark_at = batch.len();
    match watermark_stmt {
        Ok(w) => batch.push(w),
        Err(e) => return retry(e),
    }
    // Model calls happened whatever becomes of the commit: recorded unguarded.
    for c in &calls {
        if let Ok(s) = storage::usage::model_call_stmt(db, None, Some(&conv_s), Some(conv.chat_id), "consolidate", c, now) {
            batch.push(s);
        }
    }
    let held = match db.batch(batch).await {
        Ok(results) => results.get(watermark_at).and_then(|r| crate::storage::rows::<Value>(r).ok()).is_some_and(|r| !r.is_empty()),
        Err(e) => return retry(e),
    };
    if !held {
        worker::console_warn!("consolidation of {conv_s}: the lease moved to another job; nothing committed");
        return JobOutcome::Done;
    }
    if !ctx.cfg.embeddings_model.is_empty() {
        if let Err(e) = embed_new(ctx, db, &conv_s).await {
            worker::console_warn!("embeddings for {conv_s} failed (search still works): {e}");
        }
    }
    if more {
        let job = Job::Consolidate { conv: conv_s.clone(), attempt: 1 };
        if let Err(e) = queues::enqueue(ctx, &job, 1).await {
            worker::console_warn!("consolidation of {conv_s}: follow-up job not queued ({e}); the next cron run takes it");
        }
    }
    JobOutcome::Done
}

async fn record_calls(db: &Db, conv: &str, chat_id: i64, calls: &[CallRecord]) {
    let stmts: Vec<_> = calls
        .iter()
        .filter_map(|c| storage::usage::model_call_stmt(db, None, Some(conv), Some(chat_id), "consolidate", c, now_ms()).ok())
        .collect();
    let _ = db.batch(stmts).await;
}

const INSERT_MEMORY: &str = "INSERT INTO memories (kind, chat_id, conv, about_user_id, entity, attribute, value, topics, status, due,
       confidence, source_ids, happened_on, created_at, updated_at)
     SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?14";

/// The statements of a merge, each guarded by the lease (?c conv, ?u until) and, for updates,
/// by the chat: an id from another chat changes nothing even if the model names it.
fn merge_statements(db: &Db, conv: &ConvKey, plan: &mem::MergePlan, now: i64, lease: Held) -> worker::Result<Vec<worker::D1PreparedStatement>> {
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
                conv.to_string(),
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
                lease.until
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

#[derive(Deserialize)]
struct SummaryRow {
    summary: Option<String>,
    until_seq: Option<i64>,
}

/// A summary statement when older messages beyond the budget are not yet summarised.
async fn summary_statement(ctx: &Ctx, db: &Db, conv: &ConvKey, calls: &mut Vec<CallRecord>, lease: Held) -> Result<Option<worker::D1PreparedStatement>, ModelError> {
    let storage = |e: worker::Error| ModelError::Network(format!("storage: {e}"));
    let conv_s = conv.to_string();
    let current: Option<SummaryRow> = db
        .first("SELECT summary, until_seq FROM summaries WHERE conv = ?1", args![conv_s.clone()])
        .await
        .map_err(storage)?;
    let until = current.as_ref().and_then(|c| c.until_seq).unwrap_or(0);
    // The newest messages the prompt keeps: where the budget cuts today.
    let recent: Vec<MessageRow> = db
        .all(&message_sql("DESC"), args![conv_s.clone(), until, i64::MAX, storage::turns::HISTORY_ROWS])
        .await
        .map_err(storage)?;
    let mut recent: Vec<HistoryMessage> = recent.into_iter().map(MessageRow::into_history).collect();
    recent.reverse();
    let structured = ctx.cfg.history_format == agent_core::config::HistoryFormat::Structured;
    let first_kept = history::fit_budget(&recent, ctx.cfg.history_token_budget, structured);
    // If the loaded window starts right after `until`, everything before the cut is older.
    let cut_seq = if first_kept > 0 {
        recent[first_kept].seq
    } else if recent.len() as i64 == storage::turns::HISTORY_ROWS {
        recent[0].seq
    } else {
        return Ok(None);
    };
    let older: Vec<MessageRow> = db
        .all(&message_sql("ASC"), args![conv_s.clone(), until, cut_seq, SUMMARY_BATCH])
        .await
        .map_err(storage)?;
    if (older.len() as i64) < (ctx.cfg.consolidate_min_messages as i64).min(SUMMARY_BATCH) {
        return Ok(None);
    }
    let older: Vec<HistoryMessage> = older.into_iter().map(MessageRow::into_history).collect();
    let new_until = older.last().map_or(until, |m| m.seq);
    let value = structured_call(
        ctx,
        mem::summary_instruction(current.as_ref().and_then(|c| c.summary.as_deref())),
        history::compact_lines(&older),
        mem::summary_schema(),
        calls,
    )
    .await?;
    let summary = value.get("summary").and_then(Value::as_str).unwrap_or_default().trim().to_string();
    if summary.is_empty() {
        return Err(ModelError::InvalidResponse("empty summary".into()));
    }
    let stmt = db
        .stmt(
            &format!(
                "INSERT INTO summaries (conv, summary, until_seq, messages, updated_at) SELECT ?1, ?2, ?3, ?4, ?5 WHERE {}
                 ON CONFLICT (conv) DO UPDATE SET summary = excluded.summary, until_seq = excluded.until_seq,
                   messages = summaries.messages + excluded.messages, updated_at = excluded.updated_at",
                lease_guard(1, 6)
            ),
            args![conv_s, summary, new_until, older.len(), now_ms(), lease.until],
        )
        .map_err(storage)?;
    Ok(Some(stmt))
}

async fn embed_new(ctx: &Ctx, db: &Db, conv: &str) -> Result<(), String> {
    #[derive(Deserialize)]
    struct Row {
        id: i64,
        text: String,
    }
    let rows: Vec<Row> = db
        .all(
            "SELECT id, trim(coalesce(entity, '') || ' ' || coalesce(attribute, '') || ' ' || value) AS text
             FROM memories WHERE conv = ?1 AND embedding IS NULL LIMIT 50",
            args![conv],
        )
        .await
        .map_err(|e| e.to_string())?;
    if rows.is_empty() {
        return Ok(());
    }
    let vectors = ctx.gemini().embed(&ctx.cfg.embeddings_model, &rows.iter().map(|r| r.text.clone()).collect::<Vec<_>>()).await?;
    let stmts = rows
        .iter()
        .zip(vectors)
        .filter_map(|(r, v)| {
            db.stmt("UPDATE memories SET embedding = ?2 WHERE id = ?1", args![r.id, serde_json::to_string(&v).unwrap_or_default()]).ok()
        })
        .collect();
    db.batch(stmts).await.map_err(|e| e.to_string())?;
    Ok(())
}
