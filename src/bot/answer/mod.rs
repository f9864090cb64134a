//! Answering a turn (`answer_turn`): load the turn's inputs from D1, make the request with the
//! core, run the core's turn loop (`core::turn::run_turn`) against Gemini (with the typing
//! indicator up), store what came back. The chat object decides when (`chat::turn_life`); this
//! module answers one turn, as a short sequence of named steps (each in its own file):
//! [`inputs`] loads, [`media`] fetches the photos, voice notes and
//! documents the turn answers, [`request`] builds, [`tools`] are the ports the model's tools
//! run through, [`typing`] shows the bot at work, [`record`] stores.
//!
//! Invariants (INVARIANTS.md): "Dedup" (a turn with nothing new since the last answered
//! turn makes no model call), "One turn at a time per conversation" (a turn whose result is
//! already stored is resumed, not run again). Also: every model call's usage is stored,
//! failed calls included.

mod inputs;
pub mod media;
mod record;
mod request;
mod tools;
mod typing;

pub use inputs::RowCacheSlot;
pub use record::{record_step_outcome, record_steps, step_calls};

use crate::bot::stream::{Live, StreamingModel};
use crate::config::{now_ms, Ctx};
use crate::storage;
use agent_core::chat_state::TurnRun;
use agent_core::conversation::ConvKey;
use agent_core::chat::plan::Step;
use agent_core::chat::status::TurnStatus;
use agent_core::gemini::ModelError;
use agent_core::turn::media::{any_inline, by_message, to_describe, undescribed, without_bytes};
use agent_core::turn;

/// How a turn ended.
pub enum Answer {
    /// The model answered (or a stored answer was found): carry out these steps.
    /// `schedules_changed`: the turn created or cancelled a schedule. `step_calls`: which
    /// function call each step came from (`None` for a stored result: its row has it).
    Planned { steps: Vec<Step>, schedules_changed: bool, step_calls: Option<Vec<Option<usize>>> },
    /// Nothing new to answer, or the chat is blocked: no model call was made.
    NothingToDo,
    /// An early start abandoned for a newer message (`ModelError::Abandoned`): recorded as
    /// stale with its call's cost; nothing to send, retry or apologise for.
    Abandoned,
}

pub enum AnswerError {
    Transient { error: String, after_ms: Option<u64> },
    Permanent { error: String },
}

impl From<worker::Error> for AnswerError {
    fn from(e: worker::Error) -> Self {
        AnswerError::Transient { error: format!("storage: {e}"), after_ms: None }
    }
}

/// Answers one turn of `conv` (or finds its stored result).
/// `live`: a Telegram chat's check that the turn is still current (typing and drafts are
/// shown); `None` for the API chat.
/// `copy`: the chat object's slot for the history rows it keeps (see `inputs::RowCacheSlot`).
pub async fn answer_turn(ctx: &Ctx, conv: &ConvKey, turn: &TurnRun, live: Option<Live>, copy: Option<&inputs::RowCacheSlot>) -> Result<Answer, AnswerError> {
    if let Some(steps) = stored_result(ctx, turn).await? {
        // Whether its tools changed a schedule is not stored: the object re-reads (once).
        return Ok(Answer::Planned { steps, schedules_changed: true, step_calls: None });
    }
    let now = now_ms();
    if let Some(run) = &turn.scheduled {
        // Claimed here, on every attempt (idempotent): a turn taken over after a crash between
        // the state's write and the claim still claims, and a run cancelled meanwhile is not run.
        if !storage::schedules::claim(&ctx.db(), run.schedule_id, run.due_ms, run.next_ms, &turn.turn_id, now).await? {
            worker::console_log!("turn {}: schedule #{} was cancelled or already run; nothing to do", turn.turn_id, run.schedule_id);
            return Ok(Answer::NothingToDo);
        }
    }
    let Some(c) = inputs::load(ctx, conv, turn, now, copy).await? else {
        return Ok(Answer::NothingToDo);
    };
    let model = request::model_of(ctx, &c, turn);
    // Written with the result, in the turn's last round trip.
    let start = record::start_statements(&ctx.db(), conv, turn, &c, &model, ctx, now)?;
    // "typing…" is up from here: fetching media can take a while too.
    let show_typing = live.is_some();
    // A crew persona's turn also has a time limit of its own.
    let work = crate::bot::crew::within_limit(turn, ask_model(ctx, conv, turn, &c, &model, now, live));
    // A crew persona with its own bot shows "typing…" through it.
    let group = c.chat.as_ref().is_some_and(|ch| agent_core::conversation::ChatKind::from_telegram(&ch.kind, 0).is_group());
    let outcome = if show_typing { typing::with_typing(&crate::bot::crew::speaking_for(ctx, &turn.turn_id, group), conv, work).await } else { work.await };
    record::finish(ctx, turn, start, outcome).await
}

/// Fetches the media the turn answers and asks the model. If Gemini refuses the request with
/// the files in it, it asks once more with the files named instead (both calls are recorded).
async fn ask_model(ctx: &Ctx, conv: &ConvKey, turn: &TurnRun, c: &inputs::AnswerInputs, model: &str, now: i64, live: Option<Live>) -> Result<turn::TurnResult, turn::TurnFailure> {
    let wanted = agent_core::turn::media::wanted(&c.window.messages, c.answered_seq);
    let (items, refused) = media::load(ctx, &wanted).await;
    let request = request::build(ctx, conv, turn, c, model, &by_message(&items), now);
    // New media are described while the model answers (for later turns' history): those the
    // turn looks at, then, within the budget, others of the window no turn described yet; what
    // can never be viewed is kept as such.
    let budget = ctx.cfg.media_describe_budget;
    let chosen = to_describe(&items, &c.known_media, budget);
    let extra = undescribed(&c.window.messages, &c.known_media, &wanted, budget.saturating_sub(chosen.len()));
    let limits = agent_core::turn::media::MediaLimits { bytes_per_turn: ctx.cfg.media_bytes_per_turn };
    let mut never = agent_core::turn::media::unviewable(&c.window.messages, &c.known_media, &limits);
    never.extend(refused);
    let describing = media::describe(ctx, conv, Some(&turn.turn_id), &items, &chosen, &extra, never);
    // Drafts show a private chat's answer as it is written; a crew persona's answer starts with
    // its name, which drafts do not show, so crew turns are not drafted.
    let port = StreamingModel::new(ctx, conv, is_private(c) && turn.crew.is_none(), live, c.window.newest_seq)
        .with_rich(request::rich_answers(ctx, conv, c));
    let (outcome, _) = futures::join!(call_model(ctx, conv, turn, c, &request, &port), describing);
    if let Some(partial) = port.stopped() {
        return stopped(ctx, turn, outcome, &partial);
    }
    if !(refused_media(&outcome) && any_inline(&items)) {
        return outcome;
    }
    worker::console_warn!("turn {}: the model refused the media; asking again without them", turn.turn_id);
    let first_calls = match &outcome {
        Err(f) => f.calls.clone(),
        Ok(r) => r.calls.clone(),
    };
    let plain = without_bytes(&items, "the model could not read this file");
    let request = request::build(ctx, conv, turn, c, model, &by_message(&plain), now);
    let mut outcome = call_model(ctx, conv, turn, c, &request, &port).await;
    let calls = match &mut outcome {
        Ok(r) => &mut r.calls,
        Err(f) => &mut f.calls,
    };
    calls.splice(0..0, first_calls);
    outcome
}

/// A turn the person stopped (Telegram's Stop button): whatever the loop planned, it sends only
/// what `STOP_KEEPS` says (`core::telegram::drafts::stopped_steps`), never an apology; it is
/// recorded with the finish reason `STOPPED_BY_USER` and the usage of the calls it made (a cut
/// stream's estimated). A failed call after the Stop fails nothing: the turn is over.
fn stopped(ctx: &Ctx, turn: &TurnRun, outcome: Result<turn::TurnResult, turn::TurnFailure>, partial: &str) -> Result<turn::TurnResult, turn::TurnFailure> {
    use agent_core::telegram::drafts::{stopped_steps, STOPPED_REASON};
    worker::console_log!("turn {}: stopped by the person", turn.turn_id);
    let mut r = match outcome {
        Ok(r) => r,
        Err(f) => turn::TurnResult { calls: f.calls, ..Default::default() },
    };
    r.steps = stopped_steps(partial, ctx.cfg.stop_keeps_partial);
    r.step_calls = vec![None; r.steps.len()];
    r.silent = r.steps.is_empty();
    r.finish_reason = Some(STOPPED_REASON.into());
    Ok(r)
}

/// Runs the core's turn loop on `request`.
async fn call_model(ctx: &Ctx, conv: &ConvKey, run: &TurnRun, c: &inputs::AnswerInputs, request: &turn::TurnRequest, port: &StreamingModel) -> Result<turn::TurnResult, turn::TurnFailure> {
    let tools = tools::EdgeTools {
        ctx,
        conv: *conv,
        people: c.window.people.clone(),
        creator: asker(c, run),
        speaker: match &c.scheduled {
            Some(scheduled) => scheduled.creator_user_id,
            None => agent_core::access::authority::burst_sender(&c.window.messages, c.answered_seq),
        },
        turn_id: run.turn_id.clone(),
        group: c.chat.as_ref().is_some_and(|ch| agent_core::conversation::ChatKind::from_telegram(&ch.kind, 0).is_group()),
    };
    let mut outcome = turn::run_turn(request, port, &tools, &tools::WorkerClock).await;
    if let Ok(r) = &mut outcome {
        // A picture counts against the limit of the one person the turn acts for, else of
        // whom it answers.
        agent_core::chat::plan::for_whom(&mut r.steps, tools.speaker.or(tools.creator));
    }
    outcome
}

/// Whether the turn's chat is a private Telegram chat (drafts are shown only there).
fn is_private(c: &inputs::AnswerInputs) -> bool {
    c.chat.as_ref().is_some_and(|ch| agent_core::conversation::ChatKind::from_telegram(&ch.kind, 0) == agent_core::conversation::ChatKind::Private)
}

/// Who asked for this turn: the sender of the message it answers (else the newest person's
/// message); for a scheduled run, who set it.
fn asker(c: &inputs::AnswerInputs, turn: &TurnRun) -> Option<i64> {
    if let Some(run) = &c.scheduled {
        return run.creator_user_id;
    }
    let people = || c.window.messages.iter().rev().filter(|m| m.role == agent_core::history::Role::User);
    let target = turn.target_message_id.and_then(|id| people().find(|m| m.message_id == Some(id)));
    target.or_else(|| people().next()).and_then(|m| m.user_id)
}

/// Whether the model refused the request (a 400: a file it cannot read, among other causes).
fn refused_media(outcome: &Result<turn::TurnResult, turn::TurnFailure>) -> bool {
    matches!(outcome, Err(f) if matches!(f.error, ModelError::Http { status: 400, .. }))
}

/// A retried turn whose result is stored resumes without calling the model again.
async fn stored_result(ctx: &Ctx, turn: &TurnRun) -> Result<Option<Vec<Step>>, AnswerError> {
    if turn.attempt <= 1 {
        return Ok(None);
    }
    let Some(stored) = storage::turns::stored_plan(&ctx.db(), &turn.turn_id).await? else { return Ok(None) };
    if !TurnStatus::parse(&stored.status).is_some_and(|s| s.has_result()) {
        return Ok(None);
    }
    Ok(Some(stored.plan.as_deref().and_then(|p| serde_json::from_str(p).ok()).unwrap_or_default()))
}
