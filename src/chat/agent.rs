//! A turn at the edge: load the context from D1, assemble the prompt and history with the
//! core, run the core's turn loop against Gemini (with the typing indicator up), store what
//! came back. The chat object decides when; this module does one turn.
//!
//! Invariants:
//! - A turn with nothing new since the last answered turn makes no model call (a late
//!   redelivery or a recovered signal never answers the same messages twice).
//! - A turn whose result is already stored is not run again (a retried job resumes its plan).
//! - Every model call's usage is stored, failed calls included.

use crate::config::{now_ms, Ctx};
use crate::config::prompts;
use crate::outbound::net;
use crate::storage::turns::{TurnEnd, TurnStart};
use crate::{args, storage};
use agent_core::chat_state::TurnRun;
use agent_core::config::HistoryFormat;
use agent_core::conversation::{ChatKind, ConvKey, Part};
use agent_core::fetch::{self, FetchResponse, LinkSet};
use agent_core::gemini::{GenerationConfig, ModelError, ThinkingConfig};
use agent_core::history::{self, Role};
use agent_core::plan::Step;
use agent_core::prompt::{self, ChatDetails, PromptInput, Reaction, Situation};
use agent_core::session::{in_session, session_start};
use agent_core::turn::{self, Clock, ToolPort, TurnRequest, TurnSafety};
use futures::future::{select, Either};
use std::collections::BTreeMap;
use std::time::Duration;
use worker::Delay;

/// How a turn ended.
pub enum TurnOutput {
    /// The model answered (or a stored answer was found): carry out these steps.
    Planned { steps: Vec<Step> },
    /// Nothing new to answer, or the chat is blocked: no model call was made.
    NothingToDo,
}

pub enum TurnError {
    Transient { error: String, after_ms: Option<u64> },
    Permanent { error: String },
}

impl From<worker::Error> for TurnError {
    fn from(e: worker::Error) -> Self {
        TurnError::Transient { error: format!("storage: {e}"), after_ms: None }
    }
}

struct WorkerClock;
impl Clock for WorkerClock {
    fn now_ms(&self) -> i64 {
        now_ms()
    }
}

/// The tools the model can call that return results.
struct EdgeTools<'a> {
    ctx: &'a Ctx,
    conv: ConvKey,
    /// The people present (for the memory scope of `search_memory`).
    people: Vec<i64>,
}

impl EdgeTools<'_> {
    /// Refuses a tool call once the turn has spent its share of the invocation's subrequests.
    fn within_budget(&self) -> Result<(), String> {
        if self.ctx.meter.count() + 2 > TURN_TOOL_BUDGET {
            return Err("no more tool calls in this turn; answer with what you have".into());
        }
        Ok(())
    }
}

impl ToolPort for EdgeTools<'_> {
    async fn fetch_url(&self, url: &str) -> Result<FetchResponse, String> {
        self.within_budget()?;
        // One hop; the core checks the URL before and every redirect after.
        net::get_capped(
            &self.ctx.meter,
            url,
            &[("user-agent", "edge-agent/0.1 (+https://github.com)"), ("accept", "text/html,text/plain,*/*")],
            Duration::from_secs(10),
        )
        .await
    }

    async fn search_memory(&self, query: &str) -> Vec<String> {
        if self.within_budget().is_err() {
            return Vec::new();
        }
        super::memory::search(self.ctx, &self.conv, &self.people, query, 8).await.unwrap_or_default()
    }

    /// A note about a person only if that person has written in this chat.
    async fn remember(&self, content: &str, about_user_id: Option<i64>) -> Result<i64, String> {
        self.within_budget()?;
        match storage::notes::insert_note(&self.ctx.db(), self.conv.chat_id, about_user_id, content, "agent", now_ms()).await {
            Ok(Some(id)) => Ok(id),
            Ok(None) => Err(format!(
                "not stored: user {} has not written in this chat; a note can only be about someone in this conversation (or leave about_user_id out)",
                about_user_id.unwrap_or_default()
            )),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn set_plan(&self, content: &str) -> Result<(), String> {
        self.within_budget()?;
        storage::conversations::set_plan(&self.ctx.db(), &self.conv, content, now_ms()).await.map_err(|e| e.to_string())
    }
}

fn chat_kind(kind: &str) -> ChatKind {
    ChatKind::from_telegram(kind, 0)
}

/// The reaction that triggered a turn, from the newest reaction event of the history.
fn reaction_of(messages: &[history::HistoryMessage]) -> Option<Reaction> {
    let m = messages.iter().rev().find(|m| {
        m.role == Role::Event && m.parts.iter().any(|p| matches!(p, Part::Event { kind, .. } if kind == "reaction"))
    })?;
    let detail = m.parts.iter().find_map(|p| match p {
        Part::Event { detail, .. } => Some(detail.clone()),
        _ => None,
    })?;
    let (emoji, id) = detail.split_once(" to #")?;
    Some(Reaction { emoji: emoji.to_string(), message_id: id.parse().ok()?, by: m.name.clone() })
}

/// Runs one turn of `conv` (or finds its stored result).
pub async fn run(ctx: &Ctx, conv: &ConvKey, turn: &TurnRun, show_typing: bool) -> Result<TurnOutput, TurnError> {
    let db = ctx.db();
    let conv_s = conv.to_string();
    let now = now_ms();

    // A retried turn whose result is stored resumes without calling the model again.
    if turn.attempt > 1 {
        if let Some(stored) = storage::turns::stored_plan(&db, &turn.turn_id).await? {
            if agent_core::status::TurnStatus::parse(&stored.status).is_some_and(|s| s.has_result()) {
                let steps: Vec<Step> = stored.plan.as_deref().and_then(|p| serde_json::from_str(p).ok()).unwrap_or_default();
                return Ok(TurnOutput::Planned { steps });
            }
        }
    }

    let context = storage::turns::load_turn_context(&db, &conv_s, conv.chat_id, &turn.turn_id).await?;
    if context.chat.as_ref().is_some_and(|c| c.blocked_at.is_some()) {
        return Ok(TurnOutput::NothingToDo);
    }
    let newest_seq = context.messages.last().map_or(0, |m| m.seq);
    let has_new = context
        .messages
        .iter()
        .any(|m| m.seq > context.answered_seq && m.role != Role::Bot);
    if !has_new {
        return Ok(TurnOutput::NothingToDo);
    }

    // Session window: an idle gap after the stored start begins a new session.
    let stored_start = context.conversation.session_start_seq;
    let mut loaded = context.messages;
    let start = session_start(&loaded, stored_start, ctx.cfg.session_idle_secs);
    // The newest message that exists but is not shown (over the row limit or the budget).
    let mut last_cut: Option<i64> = None;
    if loaded.len() as i64 > storage::turns::HISTORY_ROWS {
        let extra = loaded.remove(0);
        last_cut = (extra.seq >= start).then_some(extra.seq);
    }
    let mut messages: Vec<history::HistoryMessage> = loaded.into_iter().filter(|m| in_session(m, start)).collect();
    history::chronological(&mut messages);
    // New when an idle gap moved the start, or no turn has answered in it yet (command
    // replies such as /new's do not count).
    let new_session = start > stored_start || !messages.iter().any(|m| m.role == Role::Bot && m.turn_id.is_some());
    let session_started_at = (start != stored_start || context.conversation.session_started_at.is_none()).then_some(now);

    // Budget: keep the newest messages that fit.
    let format = ctx.cfg.history_format;
    let structured = format == HistoryFormat::Structured;
    let first = history::fit_budget(&messages, ctx.cfg.history_token_budget, structured);
    if first > 0 {
        last_cut = Some(last_cut.map_or(messages[first - 1].seq, |c| c.max(messages[first - 1].seq)));
        messages.drain(..first);
    }
    let cut_seq = last_cut.map(|_| messages.first().map_or(newest_seq, |m| m.seq));

    let people: Vec<i64> = {
        let mut p: Vec<i64> = messages.iter().filter(|m| m.role == Role::User).filter_map(|m| m.user_id).collect();
        p.sort_unstable();
        p.dedup();
        p
    };
    // Notes, the bot's stored turns and recall in one round trip.
    let mut stmts = vec![storage::notes::notes_stmt(&db, conv.chat_id, &people)?, storage::turns::bot_turns_stmt(&db, &messages)?];
    stmts.extend(super::memory::recall_statements(&db, conv, &people, &messages)?);
    let results = db.batch(stmts).await?;
    let notes: Vec<storage::notes::NoteRow> = crate::storage::rows(&results[0])?;
    let turns = if structured { storage::turns::bot_turns(&results[1])? } else { BTreeMap::new() };
    let memories = super::memory::recall(ctx, conv, &people, &messages, results.get(2..).unwrap_or_default()).await.unwrap_or_else(|e| {
        worker::console_warn!("recall failed (the turn goes on without memories): {e}");
        Default::default()
    });

    let chat_row = context.chat.clone();
    let model = chat_row.as_ref().and_then(|c| c.model.clone()).unwrap_or_else(|| ctx.cfg.gemini_model.clone());
    // The summary stands in for what the budget cut; if it does not cover all of it, the
    // prompt says so.
    let summary = last_cut.and(memories.summary.as_deref());
    let uncovered = last_cut.is_some_and(|cut| memories.summary_until.is_none_or(|until| until < cut));
    let situation = Situation {
        target_message_id: turn.target_message_id,
        new_session,
        trigger: turn.trigger,
        reaction: if turn.trigger == agent_core::gating::Trigger::Reaction { reaction_of(&messages) } else { None },
        format,
        history_cut_without_summary: uncovered,
    };
    let chat = ChatDetails {
        kind: chat_row.as_ref().map_or(ChatKind::Private, |c| chat_kind(&c.kind)),
        title: chat_row.as_ref().and_then(|c| c.title.clone()),
        topic_id: conv.thread_id,
    };
    let curated: Vec<String> = notes
        .iter()
        .filter(|n| n.source == "operator")
        .map(|n| n.content.clone())
        .chain(prompts::curated_notes())
        .collect();
    let mut learned: Vec<String> = notes
        .iter()
        .filter(|n| n.source != "operator")
        .map(|n| match n.about_user_id {
            Some(u) => format!("(about user {u}) {}", n.content),
            None => n.content.clone(),
        })
        .collect();
    learned.extend(memories.items);
    let values = prompts::template_values(ctx, &model);
    let library = prompts::library();
    let system = prompt::system_instruction(&PromptInput {
        situation: &situation,
        library: &library,
        persona: &ctx.cfg.persona,
        roles: &ctx.cfg.role_prompts,
        values: &values,
        plan: context.conversation.plan.as_deref(),
        curated: &curated,
        memories: &learned,
        memory_budget: ctx.cfg.memory_token_budget,
        now: chrono::DateTime::from_timestamp_millis(now).unwrap_or_default(),
        timezone: &ctx.cfg.timezone,
        chat: &chat,
        summary,
    });
    let history = if structured {
        history::render_structured(&messages, &turns)
    } else {
        history::render_compact(&messages, turn.target_message_id)
    };

    // Written with the result, in the turn's last round trip.
    let start_stmts = storage::turns::start_turn_stmts(
        &db,
        &TurnStart {
            turn_id: &turn.turn_id,
            conv,
            trigger: &serde_json::to_value(turn.trigger).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default(),
            target_message_id: turn.target_message_id,
            upto_seq: newest_seq,
            model: &model,
            history_format: format.as_str(),
            attempt: turn.attempt,
            history_cut_seq: cut_seq,
            session_start_seq: start,
            session_started_at,
            now,
        },
    )?;

    let request = TurnRequest {
        model: model.clone(),
        system_instruction: system,
        history,
        tools: agent_core::tools::declarations(&ctx.cfg.sticker_sets),
        generation_config: Some(GenerationConfig {
            max_output_tokens: Some(ctx.cfg.max_output_tokens),
            thinking_config: (!ctx.cfg.thinking_level.is_empty()).then(|| ThinkingConfig {
                thinking_level: Some(ctx.cfg.thinking_level.clone()),
                include_thoughts: false,
            }),
            ..Default::default()
        }),
        sticker_sets: ctx.cfg.sticker_sets.clone(),
        fetch_allow_private: ctx.cfg.fetch_allow_private,
        safety: TurnSafety {
            people_links: LinkSet::from_people(&messages),
            forwarded_in_view: fetch::forwarded_in_view(&messages),
            max_fetches: ctx.cfg.max_fetches_per_turn,
            fence_seed: fence_seed(),
        },
        silence_allowed: matches!(turn.trigger, agent_core::gating::Trigger::Reaction | agent_core::gating::Trigger::Name),
    };
    let gemini = ctx.gemini();
    let tools = EdgeTools { ctx, conv: *conv, people: people.clone() };
    let work = turn::run_turn(&request, &gemini, &tools, &WorkerClock);
    let outcome = if show_typing { with_typing(ctx, conv, work).await } else { work.await };

    let done_at = now_ms();
    let calls = match &outcome {
        Ok(r) => &r.calls,
        Err(f) => &f.calls,
    };
    let call_stmts = calls
        .iter()
        .map(|c| storage::usage::model_call_stmt(&db, Some(&turn.turn_id), Some(&conv_s), Some(conv.chat_id), "turn", c, done_at))
        .collect::<worker::Result<Vec<_>>>()?;
    match outcome {
        Ok(result) => {
            if result.silent && !result.steps.iter().any(Step::is_visible) {
                worker::console_log!("turn {}: no reply, on purpose", turn.turn_id);
            } else if let Some(reason) = &result.empty_reason {
                worker::console_warn!("turn {}: no usable answer ({reason}); sending a graceful reply", turn.turn_id);
            }
            let end = TurnEnd {
                turn_id: &turn.turn_id,
                status: agent_core::status::TurnStatus::Planned,
                contents: serde_json::to_string(&result.turn).ok(),
                plan: serde_json::to_string(&result.steps).ok(),
                step_calls: serde_json::to_string(&result.step_calls).ok(),
                finish_reason: result.finish_reason.clone(),
                empty_reason: if result.silent { Some(result.empty_reason.clone().map_or("no reply, on purpose".into(), |r| format!("no reply, on purpose ({r})"))) } else { result.empty_reason.clone() },
                error: None,
                subrequests: ctx.meter.count() + 1,
                d1_round_trips: ctx.meter.d1_round_trips() + 1,
                d1_statements: ctx.meter.d1_statements() + (start_stmts.len() + 1 + call_stmts.len()) as u32,
                now: done_at,
            };
            storage::turns::finish_turn(&db, start_stmts, &end, call_stmts).await?;
            Ok(TurnOutput::Planned { steps: result.steps })
        }
        Err(failure) => {
            let transient = failure.error.is_transient();
            let end = TurnEnd {
                turn_id: &turn.turn_id,
                status: if transient { agent_core::status::TurnStatus::Retrying } else { agent_core::status::TurnStatus::Failed },
                contents: None,
                plan: None,
                step_calls: None,
                finish_reason: None,
                empty_reason: None,
                error: Some(failure.error.to_string()),
                subrequests: ctx.meter.count() + 1,
                d1_round_trips: ctx.meter.d1_round_trips() + 1,
                d1_statements: ctx.meter.d1_statements() + (start_stmts.len() + 1 + call_stmts.len()) as u32,
                now: done_at,
            };
            storage::turns::finish_turn(&db, start_stmts, &end, call_stmts).await?;
            let error = failure.error.to_string();
            if transient {
                Err(TurnError::Transient { after_ms: failure.error.retry_after_ms(), error })
            } else {
                if matches!(failure.error, ModelError::Http { status: 400 | 403, .. }) {
                    worker::console_error!("turn {}: Gemini refused the request: {error}", turn.turn_id);
                }
                Err(TurnError::Permanent { error })
            }
        }
    }
}

/// Fresh randomness for the turn's fence boundaries (a page must not be able to guess them).
fn fence_seed() -> u128 {
    let mut bytes = [0u8; 16];
    if let Err(e) = getrandom::fill(&mut bytes) {
        worker::console_warn!("no randomness for the fence ({e}); using the clock");
        return (now_ms() as u128) ^ (js_sys::Math::random().to_bits() as u128) << 64;
    }
    u128::from_le_bytes(bytes)
}

/// Subrequests a turn may spend on tools and typing; the model calls, the turn's D1 round
/// trips and the first plan steps fit in the rest of the invocation's budget.
pub const TURN_TOOL_BUDGET: u32 = 24;

/// Shows "typing…" while `work` runs, refreshed every 4 seconds (Telegram shows it for 5),
/// while the turn's budget allows (a slow model call must not spend the invocation on typing).
async fn with_typing<F: std::future::Future>(ctx: &Ctx, conv: &ConvKey, work: F) -> F::Output {
    let tg = ctx.telegram();
    let typing = async {
        loop {
            if ctx.meter.count() < TURN_TOOL_BUDGET {
                tg.typing(conv.chat_id, conv.thread_id).await;
            }
            Delay::from(Duration::from_secs(4)).await;
        }
    };
    futures::pin_mut!(work);
    futures::pin_mut!(typing);
    match select(work, typing).await {
        Either::Left((out, _)) => out,
        Either::Right(_) => unreachable!("the typing loop never ends"),
    }
}

/// Records the outcome of a plan step against the function call it came from.
pub async fn record_step_outcome(ctx: &Ctx, turn_id: &str, step_calls: &[Option<usize>], index: usize, outcome: &agent_core::plan::StepOutcome) {
    let Some(Some(call)) = step_calls.get(index) else { return };
    let db = ctx.db();
    let value = turn::step_outcome_value(outcome);
    // A cancellation never overwrites a real outcome (the step may have been sent meanwhile);
    // a real outcome always overwrites a cancellation.
    let only_if_absent = matches!(outcome, agent_core::plan::StepOutcome::Cancelled);
    let result = match storage::turns::step_outcome_stmt(&db, turn_id, *call, &value, now_ms(), only_if_absent) {
        Ok(stmt) => db.batch(vec![stmt]).await.map(|_| ()),
        Err(e) => Err(e),
    };
    if let Err(e) = result {
        worker::console_warn!("turn {turn_id}: could not record step {index}: {e}");
    }
}

/// Loads a turn's step → call mapping (for outcome records).
pub async fn step_calls(ctx: &Ctx, turn_id: &str) -> Vec<Option<usize>> {
    #[derive(serde::Deserialize)]
    struct Row {
        step_calls: Option<String>,
    }
    ctx.db()
        .first::<Row>("SELECT step_calls FROM turns WHERE turn_id = ?1", args![turn_id])
        .await
        .ok()
        .flatten()
        .and_then(|r| r.step_calls)
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default()
}
