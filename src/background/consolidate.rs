//! Memory consolidation: the cron finds conversations with messages not yet consolidated and
//! queues one job each (fan-out keeps every invocation small); a job reads the new messages,
//! (with what is known of their media: descriptions, what a voice note said; media no turn
//! described are described first, within `MEDIA_DESCRIBE_BUDGET`) asks Gemini
//! (through the model port, like turns) for structured memories, merges them (`agent_core::memory::merge`), writes a
//! summary of older history when it no longer fits the budget, and moves the watermark.
//!
//! Invariants (INVARIANTS.md): "Consolidation commits once", "Memory privacy is one rule",
//! "Only people seen in the conversation", "Outside words never become memories", "Budgets",
//! "Summaries stand in for cut history".
//!
//! Also:
//! - The watermark commits with everything merged, so a retried or repeated job never
//!   processes a message twice; the lease keeps two jobs from consolidating a conversation at
//!   once.
//! - Memories of other chats are neither shown to the model nor touched by ids it returns
//!   (`Scope::LearnedIn`), and every update is also guarded by `chat_id` in SQL.
//! - A memory about a person records who supplied it (`supplied_by`, from who wrote the
//!   messages it cites): only the person's own words are ever shown outside this chat.
//! - A chat or a bot over its daily tokens gets no consolidation call, media description or
//!   embedding (the job ends; the messages wait).
//! - The summary covers messages up to `summaries.until_seq`.

use crate::bot::access;
use crate::bot::answer::media as answer_media;
use crate::config::{now_ms, prompts, Ctx};
use crate::outbound::queues;
use crate::storage::consolidation::{self as rows, Lease};
use crate::storage::turns::HISTORY_ROWS;
use crate::storage::{self, Db};
use agent_core::access::authority;
use agent_core::conversation::ConvKey;
use agent_core::gemini::{Content, GenerateContentRequest, GenerationConfig, ModelError, Outcome, Part};
use agent_core::history::{self, HistoryMessage};
use agent_core::background::jobs::{Job, JobOutcome};
use agent_core::turn::media;
use agent_core::memory::{self as mem, Extraction};
use agent_core::turn::{CallRecord, ModelPort};
use serde_json::Value;
use worker::D1PreparedStatement;

/// Messages one job reads; the rest go to a follow-up job.
const BATCH: i64 = 200;
/// How long a job holds a conversation.
const LEASE_MS: i64 = 5 * 60 * 1000;
/// Messages one summary call folds in at most.
const SUMMARY_BATCH: i64 = 400;

/// Cron: queues a consolidation job for each conversation with new messages (up to 100 per
/// run; the next run takes the rest). Returns how many were queued.
pub async fn enqueue_due(ctx: &Ctx) -> worker::Result<usize> {
    let due = rows::due(&ctx.db(), now_ms()).await?;
    let jobs: Vec<Job> = due.iter().map(|conv| Job::Consolidate { conv: *conv, attempt: 1 }).collect();
    queues::enqueue_all(ctx, jobs).await?;
    Ok(due.len())
}

/// Calls Gemini, through the same model port as turns, for JSON matching `schema`; records
/// the call.
async fn structured_call(ctx: &Ctx, system: String, text: String, schema: Value, calls: &mut Vec<CallRecord>) -> Result<Value, ModelError> {
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
    let result = ctx.gemini().generate(&model, &request).await;
    calls.push(CallRecord::of(&model, &result, now_ms() - started));
    match result?.outcome() {
        Outcome::Content(c) => {
            let text = c.visible_text();
            serde_json::from_str(text.trim()).map_err(|e| ModelError::InvalidResponse(format!("not the JSON asked for: {e}")))
        }
        Outcome::Empty { reason } => Err(ModelError::InvalidResponse(format!("no answer: {reason}"))),
    }
}

fn outcome_of(e: &ModelError) -> JobOutcome {
    if e.is_transient() {
        JobOutcome::Retry { error: e.to_string(), after_ms: e.retry_after_ms() }
    } else {
        JobOutcome::Failed { error: e.to_string() }
    }
}

fn storage_retry(e: worker::Error) -> JobOutcome {
    JobOutcome::Retry { error: e.to_string(), after_ms: None }
}

fn today() -> String {
    chrono::DateTime::from_timestamp_millis(now_ms()).unwrap_or_default().format("%Y-%m-%d").to_string()
}

/// Runs one consolidation job for `conv`.
pub async fn run(ctx: &Ctx, conv: ConvKey) -> JobOutcome {
    // The chat's and the bot's daily tokens, as for a turn: over one, nothing goes to the model
    // (its messages wait, unconsolidated, for a day with budget).
    if !access::work_within_budget(ctx, conv.chat_id, None, None).await {
        worker::console_warn!("consolidation of {conv}: over a token budget; no model call");
        return JobOutcome::Done;
    }
    let db = ctx.db();
    let now = now_ms();
    let (watermark, lease) = match rows::claim(&db, &conv, now, now + LEASE_MS).await {
        Ok(Some(claimed)) => claimed,
        Ok(None) => return JobOutcome::Done, // another job holds it
        Err(e) => return storage_retry(e),
    };
    let outcome = consolidate(ctx, &db, &conv, watermark, lease).await;
    if !matches!(outcome, JobOutcome::Done) {
        rows::release(&db, &conv, lease).await;
    }
    outcome
}

/// The subjects of `x` that are seen in the chat: `people` (who wrote in this batch) and
/// anyone else it names who has written in the chat before.
async fn seen_subjects(db: &Db, chat_id: i64, people: &[i64], x: &Extraction) -> worker::Result<Vec<i64>> {
    let mut seen = people.to_vec();
    let others: Vec<i64> = x.subject_ids().into_iter().filter(|u| !people.contains(u)).collect();
    if !others.is_empty() {
        seen.extend(rows::seen_in_chat(db, chat_id, &others).await?);
    }
    Ok(seen)
}

/// A failed step of a job: its model calls are still recorded.
struct Failed {
    outcome: JobOutcome,
}

impl From<worker::Error> for Failed {
    fn from(e: worker::Error) -> Self {
        Failed { outcome: storage_retry(e) }
    }
}

impl From<ModelError> for Failed {
    fn from(e: ModelError) -> Self {
        Failed { outcome: outcome_of(&e) }
    }
}

/// Messages with what is known of their media put in (descriptions, what a voice note said),
/// so memories can come from what was shown and said, not only typed. With `describe`, media
/// no turn has described are described first (at most `MEDIA_DESCRIBE_BUDGET`, the newest
/// first, through the turns' own path) and what can never be viewed is kept as such.
async fn with_media_known(ctx: &Ctx, db: &Db, conv: &ConvKey, mut messages: Vec<HistoryMessage>, describe: bool) -> worker::Result<Vec<HistoryMessage>> {
    let mut known = storage::media::known(db, &media::unique_ids(&messages)).await?;
    if describe {
        let extra = media::undescribed(&messages, &known, &[], ctx.cfg.media_describe_budget);
        let never = media::unviewable(&messages, &known, &media::MediaLimits { bytes_per_turn: ctx.cfg.media_bytes_per_turn });
        if !extra.is_empty() || !never.is_empty() {
            known.extend(answer_media::describe(ctx, conv, None, &[], &[], &extra, never).await);
        }
    }
    media::annotate(&mut messages, &known);
    Ok(messages)
}

async fn consolidate(ctx: &Ctx, db: &Db, conv: &ConvKey, watermark: i64, lease: Lease) -> JobOutcome {
    let messages = match rows::messages(db, conv, watermark, i64::MAX, BATCH, false).await {
        Ok(m) => m,
        Err(e) => return storage_retry(e),
    };
    let messages = match with_media_known(ctx, db, conv, messages, true).await {
        Ok(m) => m,
        Err(e) => return storage_retry(e),
    };
    let Some(last_seq) = messages.last().map(|m| m.seq) else {
        rows::release(db, conv, lease).await;
        return JobOutcome::Done;
    };
    let more = messages.len() as i64 == BATCH;
    let mut calls = Vec::new();
    let now = now_ms();
    let stmts = match statements(ctx, db, conv, &messages, now, lease, &mut calls).await {
        Ok(s) => s,
        Err(f) => {
            if !calls.is_empty() {
                rows::record_calls(db, conv, &calls, now_ms(), rows::CallsKept::at(now_ms(), ctx.cfg.retention_days)).await;
            }
            return f.outcome;
        }
    };
    // The watermark moves (and the lease is given up) last: every statement before it checks
    // the lease, which the commit then clears. It says whether the lease held.
    match rows::commit(db, conv, stmts, last_seq, now, lease, &calls, rows::CallsKept::at(now, ctx.cfg.retention_days)).await {
        Ok(true) => {}
        Ok(false) => {
            worker::console_warn!("consolidation of {conv}: the lease moved to another job; nothing committed");
            return JobOutcome::Done;
        }
        Err(e) => return storage_retry(e),
    }
    after_commit(ctx, db, conv, more).await;
    JobOutcome::Done
}

/// The statements of a job: the merge of what the new messages teach (if people spoke), then
/// the summary of older history when it no longer fits the budget.
async fn statements(
    ctx: &Ctx,
    db: &Db,
    conv: &ConvKey,
    messages: &[HistoryMessage],
    now: i64,
    lease: Lease,
    calls: &mut Vec<CallRecord>,
) -> Result<Vec<D1PreparedStatement>, Failed> {
    let mut stmts = Vec::new();
    if messages.iter().any(|m| m.role == history::Role::User) {
        let plan = extract(ctx, db, conv, messages, calls).await?;
        stmts.extend(rows::merge_statements(db, conv, &plan, now, lease)?);
    }
    if let Some(s) = summary_statement(ctx, db, conv, calls, lease).await? {
        stmts.push(s);
    }
    Ok(stmts)
}

/// Asks the model what the messages teach and merges it into what the chat remembers (only
/// what was learned in this chat, about people seen in it).
async fn extract(ctx: &Ctx, db: &Db, conv: &ConvKey, messages: &[HistoryMessage], calls: &mut Vec<CallRecord>) -> Result<mem::MergePlan, Failed> {
    // Only what was learned in this chat: a group's request never carries private memories.
    let existing = rows::existing(db, conv.chat_id).await?;
    let (template, _) = prompts::memory_prompts();
    let system = mem::consolidation_instruction(template, &existing, &today());
    // Forwarded text and documents' contents are not the people's own words: left out, so
    // they never become a memory about a person (`mem::input`). An album is one unit here
    // too: one line with all its items.
    let mut lines = mem::for_extraction(messages);
    media::join_albums(&mut lines);
    let value = structured_call(ctx, system, history::compact_lines(&lines), mem::extraction_schema(), calls).await?;
    let extraction: Extraction = serde_json::from_value(value).unwrap_or_default();
    let mut people: Vec<i64> = messages.iter().filter(|m| m.role == history::Role::User).filter_map(|m| m.user_id).collect();
    agent_core::order::sort(&mut people);
    people.dedup();
    let seen = seen_subjects(db, conv.chat_id, &people, &extraction).await?;
    let (extraction, dropped) = extraction.only_seen_subjects(&seen);
    if dropped > 0 {
        worker::console_warn!("consolidation of {conv}: dropped {dropped} items about people never seen in the chat");
    }
    let mut plan = mem::merge(&existing, &extraction, &today());
    // Whose words each memory about a person is, by who wrote the messages it cites.
    let authors: Vec<(i64, Option<i64>)> =
        messages.iter().filter(|m| m.role == history::Role::User).filter_map(|m| m.message_id.map(|id| (id, m.user_id))).collect();
    for n in &mut plan.inserts {
        n.supplied_by = authority::supplier(n.about_user_id, &n.source_message_ids, &authors);
    }
    Ok(plan)
}

/// After a commit: embeddings for the new memories (when configured), and a follow-up job
/// when this one did not read everything.
async fn after_commit(ctx: &Ctx, db: &Db, conv: &ConvKey, more: bool) {
    if !ctx.cfg.embeddings_model.is_empty() {
        if let Err(e) = embed_new(ctx, db, conv).await {
            worker::console_warn!("embeddings for {conv} failed (search still works): {e}");
        }
    }
    if more {
        let job = Job::Consolidate { conv: *conv, attempt: 1 };
        if let Err(e) = queues::enqueue(ctx, &job, 1).await {
            worker::console_warn!("consolidation of {conv}: follow-up job not queued ({e}); the next cron run takes it");
        }
    }
}

/// A summary statement when older messages beyond the budget are not yet summarised.
async fn summary_statement(ctx: &Ctx, db: &Db, conv: &ConvKey, calls: &mut Vec<CallRecord>, lease: Lease) -> Result<Option<D1PreparedStatement>, Failed> {
    let current = rows::summary(db, conv).await?.unwrap_or_default();
    let until = current.until_seq.unwrap_or(0);
    let structured = ctx.cfg.history_format == agent_core::config::HistoryFormat::Structured;
    let cut_seq = match current.history_cut_seq {
        // Turns cut the history there (and keep that start for many turns): the summary
        // covers what they do not show, and changes only when the cut moves.
        Some(cut) if cut > until => cut,
        Some(_) => return Ok(None),
        None => {
            // No turn has cut yet: where the next turn would cut (it starts right after the
            // summary when what follows fits).
            let recent = rows::messages(db, conv, until, i64::MAX, HISTORY_ROWS, true).await?;
            let more_before = recent.len() as i64 == HISTORY_ROWS;
            let limits = agent_core::turn::window::Limits {
                row_limit: HISTORY_ROWS as usize,
                session_idle_secs: ctx.cfg.session_idle_secs,
                token_budget: ctx.cfg.history_token_budget,
                structured,
            };
            let first_kept = agent_core::turn::window::stable_start(&recent, more_before, Default::default(), limits);
            // If the loaded window starts right after `until`, everything before the cut is older.
            if first_kept > 0 {
                recent[first_kept].seq
            } else if more_before {
                recent[0].seq
            } else {
                return Ok(None);
            }
        }
    };
    let older = with_media_known(ctx, db, conv, rows::messages(db, conv, until, cut_seq, SUMMARY_BATCH, false).await?, false).await?;
    if (older.len() as i64) < (ctx.cfg.consolidate_min_messages as i64).min(SUMMARY_BATCH) {
        return Ok(None);
    }
    let new_until = older.last().map_or(until, |m| m.seq);
    let (_, template) = prompts::memory_prompts();
    let system = mem::summary_instruction(template, current.summary.as_deref());
    let value = structured_call(ctx, system, history::compact_lines(&older), mem::summary_schema(), calls).await?;
    let summary = value.get("summary").and_then(Value::as_str).unwrap_or_default().trim().to_string();
    if summary.is_empty() {
        return Err(ModelError::InvalidResponse("empty summary".into()).into());
    }
    Ok(Some(rows::summary_statement(db, conv, &summary, new_until, older.len(), now_ms(), lease)?))
}

async fn embed_new(ctx: &Ctx, db: &Db, conv: &ConvKey) -> Result<(), String> {
    let found = rows::unembedded(db, conv).await.map_err(|e| e.to_string())?;
    if found.is_empty() {
        return Ok(());
    }
    let texts: Vec<String> = found.iter().map(|r| r.text.clone()).collect();
    let vectors = ctx.gemini().embed(&ctx.cfg.embeddings_model, &texts).await?;
    rows::store_embeddings(db, &found, vectors).await.map_err(|e| e.to_string())
}
