//! Model calls: one row per Gemini call (usage, status, duration), the source of costs and
//! budgets.
use crate::args;
use crate::storage::Db;
use worker::Result;

const INSERT_MODEL_CALL: &str = "INSERT INTO model_calls (turn_id, conv, chat_id, purpose, model, status, prompt_tokens,
       candidates_tokens, cached_tokens, thoughts_tokens, total_tokens, finish_reason, error, duration_ms, created_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";

pub fn model_call_stmt(
    db: &Db,
    turn_id: Option<&str>,
    conv: Option<&str>,
    chat_id: Option<i64>,
    purpose: &str,
    call: &agent_core::turn::CallRecord,
    now: i64,
) -> Result<worker::D1PreparedStatement> {
    let u = &call.usage;
    db.stmt(
        INSERT_MODEL_CALL,
        args![
            turn_id,
            conv,
            chat_id,
            purpose,
            call.model.clone(),
            call.status as i64,
            u.prompt_token_count,
            u.candidates_token_count,
            u.cached_content_token_count,
            u.thoughts_token_count,
            u.total_token_count,
            call.finish_reason.clone(),
            call.error.clone(),
            call.duration_ms,
            now
        ],
    )
}
