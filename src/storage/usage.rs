//! Model calls: one row per Gemini call (usage, status, duration), the source of costs and
//! budgets, and the totals they add up to.
use crate::args;
use crate::storage::{Arg, Db};
use agent_core::usage::ModelUsage;
use serde::Deserialize;
use worker::Result;

const INSERT_MODEL_CALL: &str = "INSERT INTO model_calls (turn_id, conv, chat_id, purpose, model, status, prompt_tokens,
       candidates_tokens, cached_tokens, thoughts_tokens, total_tokens, finish_reason, error, duration_ms, created_at,
       search_queries, persona, image_tokens)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)";

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
            now,
            call.search_queries,
            // Crew mode: the persona of the turn (from its id), if it is one.
            turn_id.and_then(agent_core::crew::persona_of_turn),
            // A picture's image output tokens, priced apart (`core::image::image_tokens`).
            agent_core::image::image_tokens(u)
        ],
    )
}

/// How usage rows are grouped in time: per UTC day (the costs API), or per stretch between
/// two price changes (`agent_core::gemini::prices::boundaries`; `/usage` and the per-persona totals),
/// where a row's `day` is its first call's day, priced as the whole stretch is (prices change
/// at UTC midnight), so a chat's all-time totals stay a few rows per model.
pub enum Grouping<'a> {
    Day,
    PricePeriods(&'a [i64]),
}

impl Grouping<'_> {
    /// The `day` column and the GROUP BY key; the boundaries bound from `?{first}` on.
    fn sql(&self, first: usize) -> (String, String) {
        match self {
            Grouping::Day => ("strftime('%Y-%m-%d', created_at / 1000, 'unixepoch')".into(), "day".into()),
            Grouping::PricePeriods(at) => {
                let key: Vec<String> = (0..at.len()).map(|i| format!("(created_at >= ?{})", first + i)).collect();
                // No price changes (a `PRICES` table has no dates): one stretch. Not a bare
                // integer, which GROUP BY would read as a column's position.
                let key = if key.is_empty() { "'all'".to_string() } else { key.join(" + ") };
                ("strftime('%Y-%m-%d', MIN(created_at) / 1000, 'unixepoch')".into(), key)
            }
        }
    }

    fn args(&self) -> Vec<Arg> {
        match self {
            Grouping::Day => Vec::new(),
            Grouping::PricePeriods(at) => at.iter().map(|t| Arg::from(*t)).collect(),
        }
    }
}

const TOTALS: &str = "COUNT(*) AS calls, SUM(prompt_tokens) AS prompt_tokens, SUM(candidates_tokens) AS candidates_tokens,
           SUM(thoughts_tokens) AS thoughts_tokens, SUM(cached_tokens) AS cached_tokens, SUM(search_queries) AS search_queries,
           SUM(image_tokens) AS image_tokens";

/// Usage totals per chat, model and day or price period, from `since_ms`, for one chat or all:
/// `/usage` (one chat, all time, summed per model after each period is priced at its price)
/// and the costs API (per day) alike. The day is in `usage.day`.
#[derive(Debug, Clone, Deserialize)]
pub struct UsageTotal {
    pub chat_id: Option<i64>,
    #[serde(flatten)]
    pub usage: ModelUsage,
}

pub async fn totals(db: &Db, chat_id: Option<i64>, since_ms: i64, by: Grouping<'_>) -> Result<Vec<UsageTotal>> {
    let (day, key) = by.sql(3);
    let mut values = args![since_ms, chat_id];
    values.extend(by.args());
    db.all(
        &format!(
            "SELECT chat_id, {day} AS day, model, {TOTALS}
             FROM model_calls WHERE created_at >= ?1 AND (?2 IS NULL OR chat_id = ?2)
             GROUP BY chat_id, {key}, model ORDER BY day DESC, chat_id, model LIMIT 1000"
        ),
        values,
    )
    .await
}

/// Crew mode: usage totals per persona, model and price period (for one chat or all), from
/// `since_ms`.
#[derive(Debug, Clone, Deserialize)]
pub struct PersonaTotal {
    pub persona: String,
    #[serde(flatten)]
    pub usage: ModelUsage,
}

pub async fn persona_totals(db: &Db, chat_id: Option<i64>, since_ms: i64, boundaries: &[i64]) -> Result<Vec<PersonaTotal>> {
    let by = Grouping::PricePeriods(boundaries);
    let (day, key) = by.sql(3);
    let mut values = args![since_ms, chat_id];
    values.extend(by.args());
    db.all(
        &format!(
            "SELECT persona, model, {day} AS day, {TOTALS}
             FROM model_calls WHERE persona IS NOT NULL AND created_at >= ?1 AND (?2 IS NULL OR chat_id = ?2)
             GROUP BY persona, model, {key} ORDER BY persona, model, day LIMIT 1000"
        ),
        values,
    )
    .await
}
