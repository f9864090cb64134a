//! Model calls: one row per Gemini call (usage, status, duration), the source of costs and
//! budgets, and the totals they add up to.
use crate::args;
use crate::storage::{Arg, Db};
use agent_core::usage::ModelUsage;
use worker::Result;

const INSERT_MODEL_CALL: &str = "INSERT INTO model_calls (turn_id, conv, chat_id, purpose, model, status, prompt_tokens,
       candidates_tokens, cached_tokens, thoughts_tokens, total_tokens, finish_reason, error, duration_ms, created_at,
       search_queries, persona, image_tokens)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)";

/// A call outside a turn and outside consolidation (media, a picture, a guest answer): a row of
/// `model_calls`. A turn's own calls go in its row instead (`call_json`, migration 0037), a
/// consolidation's in its conversation's (migration 0038).
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

/// A turn's call as its row keeps it (`turns.calls`, migration 0037): the columns of
/// `model_calls` by name, so the `calls` view and the totals below read every form alike (a
/// conversation's row keeps its consolidations' calls the same way, migration 0038).
/// `turn_id`: the turn whose call it is (its persona, in crew mode); `None` for a conversation's.
pub fn call_json(turn_id: Option<&str>, purpose: &str, call: &agent_core::turn::CallRecord, now: i64) -> serde_json::Value {
    let u = &call.usage;
    serde_json::json!({
        "purpose": purpose,
        "model": call.model,
        "status": call.status,
        "prompt_tokens": u.prompt_token_count,
        "candidates_tokens": u.candidates_token_count,
        "cached_tokens": u.cached_content_token_count,
        "thoughts_tokens": u.thoughts_token_count,
        "total_tokens": u.total_token_count,
        "finish_reason": call.finish_reason,
        // Capped: the row keeps many calls (Gemini's messages are far shorter).
        "error": call.error.as_deref().map(|e| e.chars().take(300).collect::<String>()),
        "duration_ms": call.duration_ms,
        "created_at": now,
        "search_queries": call.search_queries,
        "persona": turn_id.and_then(agent_core::crew::persona_of_turn),
        "image_tokens": agent_core::image::image_tokens(u),
    })
}

/// The bot's daily token counter (`token_days`, what the global budget reads) raised by calls
/// kept in a row of their own (a turn's, a conversation's): `model_calls` raises it by a
/// trigger, those rows by this statement in the same batch. `None` when the calls used no token.
pub fn token_day_stmt(db: &Db, now: i64, tokens: u64) -> Result<Option<worker::D1PreparedStatement>> {
    if tokens == 0 {
        return Ok(None);
    }
    let day = agent_core::limits::day_start(now);
    Ok(Some(db.stmt(
        "INSERT INTO token_days (day_ms, tokens) VALUES (?1, ?2) ON CONFLICT (day_ms) DO UPDATE SET tokens = tokens + excluded.tokens",
        args![day, tokens as i64],
    )?))
}

/// A conversation's turns from a time, joined on the turns' key: a turn id begins with its
/// conversation and its start time (`chat_state::turn_id`: `<conv>/<ms>-<nonce>`, the time 13
/// digits until the year 2286), so they are the range from `<conv>/<time>` to `<conv>0` ('0'
/// follows '/'); `c` a `conversations` row, `?S` the time as 13 digits.
const TURNS_OF_CONV: &str = "t.turn_id >= c.conv || '/' || ?S AND t.turn_id < c.conv || '0'";

/// The conversations of one chat (`?C` its id as text): its own and its topics' (`<chat>:<topic>`;
/// ';' follows ':'), on the conversations' key.
const CONVS_OF_CHAT: &str = "(c.conv = ?C OR (c.conv > ?C || ':' AND c.conv < ?C || ';'))";

/// The turns of one chat (`chat`) or of every chat from a time: the `FROM` of `conversations c`
/// joined with `turns t` on the key ranges of each conversation's turns from that time, and
/// the `WHERE` condition. What they read grows with the period's turns and the chat's (or the
/// bot's) conversations, not with every turn ever kept (turns are not pruned). `first` numbers
/// their two arguments (`turn_args`).
fn turns_since(first: usize, chat: bool) -> (String, String) {
    let (s, c) = (first, first + 1);
    let from = format!("FROM conversations c JOIN turns t ON {}", TURNS_OF_CONV.replace("?S", &format!("?{s}")));
    let cond = if chat { CONVS_OF_CHAT.replace("?C", &format!("?{c}")) } else { format!("?{c} IS NULL") };
    (from, cond)
}

/// The arguments of `turns_since`: the time as 13 digits and the chat's id as text (NULL: all).
fn turn_args(chat_id: Option<i64>, since: i64) -> Vec<Arg> {
    args![format!("{:013}", since.max(0)), chat_id.map(|c| c.to_string())]
}

/// A chat's tokens of a day (`since`, its start), in its turns and its conversations' own calls
/// (consolidation's, migration 0038: the day's count each row keeps, not the calls themselves),
/// for the budget check (`access::select_usage`), its arguments from `?first`
/// (`chat_tokens_args`), as one expression.
pub fn chat_tokens_sql(first: usize) -> String {
    let (from, cond) = turns_since(first, true);
    format!(
        "(SELECT COALESCE(SUM(t.tokens), 0) {from} WHERE {cond})
           + (SELECT COALESCE(SUM(c.call_tokens), 0) FROM conversations c WHERE {cond} AND c.call_day = CAST(?{first} AS INTEGER))"
    )
}

pub fn chat_tokens_args(chat_id: i64, since: i64) -> Vec<Arg> {
    turn_args(Some(chat_id), since)
}

/// A call kept as JSON (`j`, a turn's or a conversation's) as a row with `model_calls`'
/// columns, its chat `t.chat_id` or `c.chat_id`.
fn json_call_columns(chat: &str) -> String {
    format!(
        "SELECT {chat} AS chat_id, json_extract(j.value, '$.model') AS model,
         json_extract(j.value, '$.created_at') AS created_at, json_extract(j.value, '$.persona') AS persona,
         json_extract(j.value, '$.prompt_tokens') AS prompt_tokens, json_extract(j.value, '$.candidates_tokens') AS candidates_tokens,
         json_extract(j.value, '$.thoughts_tokens') AS thoughts_tokens, json_extract(j.value, '$.cached_tokens') AS cached_tokens,
         json_extract(j.value, '$.search_queries') AS search_queries, json_extract(j.value, '$.image_tokens') AS image_tokens"
    )
}

/// The turns' calls as rows with `model_calls`' columns, for `FROM (...)`: those of one chat
/// (`?2`) or, with `?2` NULL, every chat, from `?1` (ms), found by the conversations' key
/// ranges (`turns_since`, `?3` `?4`); then the conversations' own calls (consolidation's,
/// `conversations.calls`, migration 0038) of the same conversations.
fn turn_calls(chat: bool) -> String {
    let (from, cond) = turns_since(3, chat);
    format!(
        "{} {from}, json_each(t.calls) j
       WHERE {cond} AND t.calls IS NOT NULL AND json_extract(j.value, '$.created_at') >= ?1
       UNION ALL
       {} FROM conversations c, json_each(c.calls) j
       WHERE {cond} AND c.calls IS NOT NULL AND json_extract(j.value, '$.created_at') >= ?1",
        json_call_columns("t.chat_id"),
        json_call_columns("c.chat_id")
    )
}
const OLD_CALLS: &str = "SELECT chat_id, model, created_at, persona, prompt_tokens, candidates_tokens, thoughts_tokens, cached_tokens,
         search_queries, image_tokens
       FROM model_calls WHERE created_at >= ?1 AND (?2 IS NULL OR chat_id = ?2)";

/// Every call from `?1`, of one chat (`?2`) or all, in every form (`model_calls`, the turns'
/// rows and the conversations'), as one `FROM` source; its arguments are `calls_args`.
fn all_calls(chat: bool) -> String {
    format!("({OLD_CALLS} UNION ALL {})", turn_calls(chat))
}

fn calls_args(chat_id: Option<i64>, since_ms: i64) -> Vec<Arg> {
    let mut values = args![since_ms, chat_id];
    values.extend(turn_args(chat_id, since_ms));
    values
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
#[derive(Debug, Clone)]
pub struct UsageTotal {
    pub chat_id: Option<i64>,
    pub usage: ModelUsage,
}

/// A totals row read field by field (serde's `flatten` buffers every field first, and cost
/// the wasm more than this).
fn model_usage(v: &serde_json::Value) -> ModelUsage {
    let n = |k: &str| v.get(k).and_then(serde_json::Value::as_i64).unwrap_or(0);
    let t = |k: &str| v.get(k).and_then(serde_json::Value::as_str).unwrap_or_default().to_string();
    ModelUsage {
        model: t("model"),
        calls: n("calls"),
        prompt_tokens: n("prompt_tokens"),
        candidates_tokens: n("candidates_tokens"),
        thoughts_tokens: n("thoughts_tokens"),
        cached_tokens: n("cached_tokens"),
        search_queries: n("search_queries"),
        image_tokens: n("image_tokens"),
        day: t("day"),
    }
}

pub async fn totals(db: &Db, chat_id: Option<i64>, since_ms: i64, by: Grouping<'_>) -> Result<Vec<UsageTotal>> {
    let mut values = calls_args(chat_id, since_ms);
    let (day, key) = by.sql(values.len() + 1);
    values.extend(by.args());
    let from = all_calls(chat_id.is_some());
    let rows: Vec<serde_json::Value> = db
        .all(
            &format!(
                "SELECT chat_id, {day} AS day, model, {TOTALS}
             FROM {from}
             GROUP BY chat_id, {key}, model ORDER BY day DESC, chat_id, model LIMIT 1000"
            ),
            values,
        )
        .await?;
    Ok(rows.iter().map(|v| UsageTotal { chat_id: v.get("chat_id").and_then(serde_json::Value::as_i64), usage: model_usage(v) }).collect())
}

/// Crew mode: usage totals per persona, model and price period (for one chat or all), from
/// `since_ms`.
#[derive(Debug, Clone)]
pub struct PersonaTotal {
    pub persona: String,
    pub usage: ModelUsage,
}

pub async fn persona_totals(db: &Db, chat_id: Option<i64>, since_ms: i64, boundaries: &[i64]) -> Result<Vec<PersonaTotal>> {
    let by = Grouping::PricePeriods(boundaries);
    let mut values = calls_args(chat_id, since_ms);
    let (day, key) = by.sql(values.len() + 1);
    values.extend(by.args());
    let from = all_calls(chat_id.is_some());
    let rows: Vec<serde_json::Value> = db
        .all(
            &format!(
                "SELECT persona, model, {day} AS day, {TOTALS}
             FROM {from} WHERE persona IS NOT NULL
             GROUP BY persona, model, {key} ORDER BY persona, model, day LIMIT 1000"
            ),
            values,
        )
        .await?;
    Ok(rows.iter().map(|v| PersonaTotal { persona: v.get("persona").and_then(serde_json::Value::as_str).unwrap_or_default().to_string(), usage: model_usage(v) }).collect())
}
