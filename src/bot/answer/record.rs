//! What a turn stores: its row from start to finish (what the start knew rides in the final
//! batch, in the same statement as the result: one row written; with every model call, failed
//! ones included), and what became of each plan step.
//!
//! Invariants:
//! - A turn is stored in one round trip at its end: its row, the conversation's session
//!   window, its result (contents exactly as the model returned them, plan, step calls) and
//!   its model calls.
//! - A step's cancellation never overwrites a real outcome (the step may have been sent
//!   meanwhile); a real outcome always overwrites a cancellation.

use super::inputs::AnswerInputs;
use super::{AnswerError, Answer};
use crate::config::{now_ms, Ctx};
use crate::storage::turns::{self, FinishedTurnRow, NewTurnRow};
use crate::storage::{self, Db};
use agent_core::chat_state::TurnRun;
use agent_core::conversation::ConvKey;
use agent_core::gemini::ModelError;
use agent_core::chat::plan::StepOutcome;
use agent_core::chat::status::TurnStatus;
use agent_core::turn::{self, TurnFailure, TurnResult};

/// The statements recording the turn's start and the session window (run in the final batch).
pub fn start_statements(db: &Db, conv: &ConvKey, turn: &TurnRun, c: &AnswerInputs, model: &str, ctx: &Ctx, now: i64) -> worker::Result<turns::StartRecord> {
    let w = &c.window;
    turns::start_turn_stmts(
        db,
        &NewTurnRow {
            turn_id: &turn.turn_id,
            conv,
            trigger: &serde_json::to_value(turn.trigger).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default(),
            target_message_id: turn.target_message_id,
            upto_seq: w.newest_seq,
            model,
            history_format: ctx.cfg.history_format.as_str(),
            attempt: turn.attempt,
            history_cut_seq: w.cut_seq,
            session_start_seq: w.session_start,
            session_started_at: w.session_started_at,
            now,
        },
    )
}

/// The turn's end as stored: its result, or its error.
fn end_of<'a>(turn_id: &'a str, outcome: &Result<TurnResult, TurnFailure>, now: i64) -> FinishedTurnRow<'a> {
    let mut end = FinishedTurnRow {
        turn_id,
        // Done when the model answered: the plan's sends are recorded by their keys, and the
        // row is not written again when they have gone (migration 0037; `planned` before).
        status: TurnStatus::Done,
        contents: None,
        plan: None,
        step_calls: None,
        finish_reason: None,
        empty_reason: None,
        error: None,
        subrequests: 0,
        d1_round_trips: 0,
        d1_statements: 0,
        now,
    };
    match outcome {
        Ok(result) => {
            end.contents = serde_json::to_string(&result.turn).ok();
            end.plan = serde_json::to_string(&result.steps).ok();
            end.step_calls = serde_json::to_string(&result.step_calls).ok();
            end.finish_reason = result.finish_reason.clone();
            end.empty_reason = if result.silent {
                Some(result.empty_reason.clone().map_or("no reply, on purpose".into(), |r| format!("no reply, on purpose ({r})")))
            } else {
                result.empty_reason.clone()
            };
        }
        Err(failure) => {
            end.status = if failure.error.is_abandoned() {
                TurnStatus::Stale
            } else if failure.error.is_transient() {
                TurnStatus::Retrying
            } else {
                TurnStatus::Failed
            };
            end.error = Some(failure.error.to_string());
        }
    }
    end
}

/// Stores the turn (start, end, model calls) in one round trip and says how it ended.
pub async fn finish(
    ctx: &Ctx,
    turn: &TurnRun,
    start: turns::StartRecord,
    outcome: Result<TurnResult, TurnFailure>,
) -> Result<Answer, AnswerError> {
    let db = ctx.db();
    let done_at = now_ms();
    let calls = match &outcome {
        Ok(r) => &r.calls,
        Err(f) => &f.calls,
    };
    let calls = turns::TurnCalls {
        json: serde_json::Value::Array(calls.iter().map(|c| storage::usage::call_json(Some(&turn.turn_id), "turn", c, done_at)).collect()).to_string(),
        tokens: calls.iter().map(|c| c.usage.total_token_count).sum(),
    };
    let mut end = end_of(&turn.turn_id, &outcome, done_at);
    // This final batch counts too.
    end.subrequests = ctx.meter.count() + 1;
    end.d1_round_trips = ctx.meter.d1_round_trips() + 1;
    end.d1_statements = ctx.meter.d1_statements() + (start.statements() + calls.statements()) as u32;
    turns::finish_turn(&db, start, &end, &calls).await?;
    match outcome {
        Ok(result) => {
            if result.silent && !result.steps.iter().any(agent_core::chat::plan::Step::is_visible) {
                worker::console_log!("turn {}: no reply, on purpose", turn.turn_id);
            } else if let Some(reason) = &result.empty_reason {
                worker::console_warn!("turn {}: no usable answer ({reason}); sending a graceful reply", turn.turn_id);
            }
            Ok(Answer::Planned { steps: result.steps, schedules_changed: result.schedules_changed, step_calls: Some(result.step_calls) })
        }
        Err(failure) if failure.error.is_abandoned() => Ok(Answer::Abandoned),
        Err(failure) => {
            let error = failure.error.to_string();
            if failure.error.is_transient() {
                return Err(AnswerError::Transient { after_ms: failure.error.retry_after_ms(), error });
            }
            if matches!(failure.error, ModelError::Http { status: 400 | 403, .. }) {
                worker::console_error!("turn {}: Gemini refused the request: {error}", turn.turn_id);
            }
            Err(AnswerError::Permanent { error })
        }
    }
}

/// Records the outcome of a plan step against the function call it came from.
pub async fn record_step_outcome(ctx: &Ctx, turn_id: &str, step_calls: &[Option<usize>], index: usize, outcome: &StepOutcome) {
    record_steps(ctx, turn_id, step_calls, &[(index, outcome.clone())], None).await;
}

/// Records the outcomes of plan steps (each against the function call it came from) and, with
/// `status`, the turn's new status, in one round trip (none when there is nothing to write).
/// Failures are logged: these records are for the model's later turns and the operator.
pub async fn record_steps(ctx: &Ctx, turn_id: &str, step_calls: &[Option<usize>], outcomes: &[(usize, StepOutcome)], status: Option<(TurnStatus, Option<String>)>) {
    let db = ctx.db();
    let now = now_ms();
    let steps: Vec<turns::StepRecord> = outcomes
        .iter()
        .filter_map(|(index, outcome)| match step_calls.get(*index) {
            Some(Some(call)) => Some(turns::StepRecord {
                call: *call,
                outcome: turn::step_outcome_value(outcome),
                only_if_absent: matches!(outcome, StepOutcome::Cancelled),
            }),
            _ => None,
        })
        .collect();
    // One statement: the turn's row is written once, not once per outcome and once more for
    // its status.
    let stmt = match turns::steps_stmt(&db, turn_id, &steps, status, now) {
        Ok(Some(stmt)) => stmt,
        Ok(None) => return,
        Err(e) => {
            worker::console_warn!("turn {turn_id}: could not record its steps: {e}");
            return;
        }
    };
    if let Err(e) = db.batch(vec![stmt]).await {
        worker::console_warn!("turn {turn_id}: could not record its steps: {e}");
    }
}

/// Loads a turn's step → call mapping (for outcome records).
pub async fn step_calls(ctx: &Ctx, turn_id: &str) -> Vec<Option<usize>> {
    turns::step_calls(&ctx.db(), turn_id).await
}
