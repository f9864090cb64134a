//! A turn at the edge: load the context from D1, make the request with the core, run the
//! core's turn loop against Gemini (with the typing indicator up), store what came back. The
//! chat object decides when; this module does one turn, as a short sequence of named steps
//! (each in its own file): [`context`] loads, [`media`] fetches the photos, voice notes and
//! documents the turn answers, [`request`] builds, [`tools`] are the ports the model's tools
//! run through, [`typing`] shows the bot at work, [`record`] stores.
//!
//! Invariants:
//! - A turn with nothing new since the last answered turn makes no model call (a late
//!   redelivery or a recovered signal never answers the same messages twice).
//! - A turn whose result is already stored is not run again (a retried job resumes its plan).
//! - Every model call's usage is stored, failed calls included.

mod context;
mod media;
mod record;
mod request;
mod tools;
mod typing;

pub use record::{record_step_outcome, step_calls};

use crate::config::{now_ms, Ctx};
use crate::storage;
use agent_core::chat_state::TurnRun;
use agent_core::conversation::ConvKey;
use agent_core::plan::Step;
use agent_core::status::TurnStatus;
use agent_core::turn;

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

/// Runs one turn of `conv` (or finds its stored result).
pub async fn run(ctx: &Ctx, conv: &ConvKey, turn: &TurnRun, show_typing: bool) -> Result<TurnOutput, TurnError> {
    if let Some(steps) = stored_result(ctx, turn).await? {
        return Ok(TurnOutput::Planned { steps });
    }
    let now = now_ms();
    let Some(c) = context::load(ctx, conv, turn, now).await? else {
        return Ok(TurnOutput::NothingToDo);
    };
    let model = request::model_of(ctx, &c);
    // Written with the result, in the turn's last round trip.
    let start = record::start_statements(&ctx.db(), conv, turn, &c, &model, ctx, now)?;
    let wanted = agent_core::media::wanted(&c.window.messages, c.answered_seq);
    let media = media::load(ctx, &wanted).await;
    let request = request::build(ctx, conv, turn, &c, &model, &media, now);
    let tools = tools::EdgeTools { ctx, conv: *conv, people: c.window.people.clone() };
    let gemini = ctx.gemini();
    let work = turn::run_turn(&request, &gemini, &tools, &tools::WorkerClock);
    let outcome = if show_typing { typing::with_typing(ctx, conv, work).await } else { work.await };
    record::finish(ctx, conv, turn, start, outcome).await
}

/// A retried turn whose result is stored resumes without calling the model again.
async fn stored_result(ctx: &Ctx, turn: &TurnRun) -> Result<Option<Vec<Step>>, TurnError> {
    if turn.attempt <= 1 {
        return Ok(None);
    }
    let Some(stored) = storage::turns::stored_plan(&ctx.db(), &turn.turn_id).await? else { return Ok(None) };
    if !TurnStatus::parse(&stored.status).is_some_and(|s| s.has_result()) {
        return Ok(None);
    }
    Ok(Some(stored.plan.as_deref().and_then(|p| serde_json::from_str(p).ok()).unwrap_or_default()))
}
