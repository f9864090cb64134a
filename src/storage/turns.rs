//! Turns: what a turn loads before it calls the model (conversation, chat, the session's
//! recent messages, the last answered seq, the bot's stored turns), the turn's row from start
//! to finish, and what became of each plan step.
use crate::args;
use crate::storage::{rows, Db};
use agent_core::conversation::ConvKey;
use agent_core::turn::window::RowCache;
use agent_core::history::{BotTurn, HistoryMessage};
use agent_core::chat::status::TurnStatus;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use worker::Result;

use super::messages::MessageRow;


#[derive(Debug, Clone, Deserialize, Default)]
pub struct ConversationRow {
    pub session_start_seq: i64,
    pub session_started_at: Option<i64>,
    pub plan: Option<String>,
    /// The first message the last turn showed, when it cut the history.
    pub history_cut_seq: Option<i64>,
    /// The newest message the conversation's summary covers.
    pub summary_until: Option<i64>,
    /// Bumped by every change to the stored messages other than a new one or an edit
    /// (migrations 0018, 0019).
    #[serde(default)]
    pub history_version: i64,
    /// The conversation's newest edit mark (`messages.rev`, migration 0019), if any.
    #[serde(default)]
    pub edit_rev: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ChatRow {
    pub kind: String,
    pub title: Option<String>,
    pub model: Option<String>,
    pub blocked_at: Option<i64>,
    /// The person of a private chat said `/rich off` (1).
    #[serde(default)]
    pub rich_off: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
struct LastTurnRow {
    upto_seq: Option<i64>,
}

/// What a turn loads before it calls the model.
#[derive(Debug, Clone, Default)]
pub struct TurnContext {
    pub conversation: ConversationRow,
    pub chat: Option<ChatRow>,
    /// Newest last.
    pub messages: Vec<HistoryMessage>,
    /// The last message seq an earlier turn already answered.
    pub answered_seq: i64,
    /// The copy of the rows for the chat object to keep for its next turn.
    pub kept: RowCache,
}

/// Messages a turn reads at most (the token budget usually cuts earlier).
pub const HISTORY_ROWS: i64 = 400;

const SELECT_CONVERSATION: &str = "SELECT session_start_seq, session_started_at, plan, history_cut_seq, history_version,
       (SELECT until_seq FROM summaries WHERE conv = ?1) AS summary_until,
       (SELECT MAX(rev) FROM messages WHERE conv = ?1 AND rev IS NOT NULL) AS edit_rev
     FROM conversations WHERE conv = ?1";
/// The chat, and (a private chat's id is its person's) that person's `/rich` setting.
const SELECT_CHAT: &str = "SELECT kind, title, model, blocked_at, (SELECT rich_off FROM users WHERE user_id = ?1) AS rich_off FROM chats WHERE chat_id = ?1";
/// The newest messages of the current session (it starts at `conversations.session_start_seq`),
/// only those after ?3 when the chat object's copy of the older ones still holds: the
/// conversation's `history_version` is ?4 and its session start ?5 (`RowCache`; the turn
/// decides the same way from the conversation's row, read in the same batch). Without a copy
/// ?3 is -1 and the version NULL.
const SELECT_RECENT_MESSAGES: &str = concat!(
    "SELECT ",
    crate::message_columns!(replies),
    ", t.upto_seq AS tu
     FROM messages m LEFT JOIN turns t ON t.turn_id = m.turn_id
     WHERE m.conv = ?1 AND m.excluded = 0 AND m.seq >= COALESCE((SELECT
         CASE WHEN c.history_version = ?4 AND c.session_start_seq = ?5 THEN MAX(?3 + 1, c.session_start_seq) ELSE c.session_start_seq END
       FROM conversations c WHERE c.conv = ?1), 0)
     ORDER BY m.seq DESC LIMIT ?2"
);
/// The rows of the chat object's copy (seq ?3 and older) edited since it was taken (an edit
/// mark after ?2; the partial index `messages_edited`, migration 0019, holds only edited rows).
const SELECT_EDITED_MESSAGES: &str = concat!(
    "SELECT ",
    crate::message_columns!(replies),
    ", t.upto_seq AS tu
     FROM messages m LEFT JOIN turns t ON t.turn_id = m.turn_id
     WHERE m.conv = ?1 AND m.rev IS NOT NULL AND m.rev > ?2 AND m.seq <= ?3 AND m.excluded = 0"
);
/// The newest message an earlier turn (not this one, which may be a retry) answered. A
/// scheduled run answers nobody: people's messages it saw still get their own turn.
const SELECT_ANSWERED: &str = "SELECT MAX(upto_seq) AS upto_seq FROM turns
     WHERE conv = ?1 AND turn_id != ?2 AND status IN ('planned', 'done') AND COALESCE(trigger, '') != 'schedule'";
const SELECT_TURNS: &str = "SELECT turn_id, contents, step_outcomes FROM turns
     WHERE turn_id IN (SELECT value FROM json_each(?1))";

/// Loads the conversation, chat, recent messages of the current session and the last answered
/// seq, in one round trip. (Notes, stored turns and memories depend on who and what is in the
/// history; the turn reads them in its second round trip.)
/// `copy`: the chat object's copy of the rows (`RowCache`) when it may serve this load; the
/// messages then are only those after it, and those of it edited since, if it still holds
/// (the caller merges them).
pub async fn load_turn_context(db: &Db, conv: &str, chat_id: i64, turn_id: &str, rows_limit: usize, copy: Option<RowCache>) -> Result<TurnContext> {
    let (after, version, start) = copy.as_ref().map_or((-1, None, None), |c| (c.upto, Some(c.version), Some(c.session_start)));
    let mut stmts = vec![
        db.stmt(SELECT_CONVERSATION, args![conv])?,
        db.stmt(SELECT_CHAT, args![chat_id])?,
        // One row more than a turn uses: if it comes back, it is the newest message cut off.
        db.stmt(SELECT_RECENT_MESSAGES, args![conv, rows_limit as i64 + 1, after, version, start])?,
        db.stmt(SELECT_ANSWERED, args![conv, turn_id])?,
    ];
    if let Some(c) = &copy {
        stmts.push(db.stmt(SELECT_EDITED_MESSAGES, args![conv, c.rev, c.upto])?);
    }
    let r = db.batch(stmts).await?;
    let found = rows::<ConversationRow>(&r[0])?.into_iter().next();
    let chat = rows::<ChatRow>(&r[1])?.into_iter().next();
    let mut messages: Vec<HistoryMessage> = rows::<MessageRow>(&r[2])?.into_iter().map(MessageRow::into_history).collect();
    messages.reverse();
    // The copy held when the query used it (the conversation's row, read in the same batch,
    // decides as the query did): the rows read are only the newer ones, and the edited ones.
    if let (Some(copy), Some(c)) = (copy, &found) {
        let edited: Vec<HistoryMessage> = match r.get(4) {
            Some(e) => rows::<MessageRow>(e)?.into_iter().map(MessageRow::into_history).collect(),
            None => Vec::new(),
        };
        copy.merge(c.history_version, c.session_start_seq, edited, &mut messages, rows_limit);
    }
    let conversation = found.unwrap_or_default();
    let rev = conversation.edit_rev.unwrap_or(0);
    let kept = RowCache::keep(conv, conversation.history_version, conversation.session_start_seq, rev, &messages, rows_limit);
    let answered_seq = rows::<LastTurnRow>(&r[3])?.into_iter().next().and_then(|r| r.upto_seq).unwrap_or(0);
    Ok(TurnContext { conversation, chat, messages, answered_seq, kept })
}

#[derive(Deserialize)]
struct TurnContentsRow {
    turn_id: String,
    contents: Option<String>,
    step_outcomes: Option<String>,
}

/// The statement loading the stored turns of the bot messages in `messages`.
pub fn bot_turns_stmt(db: &Db, messages: &[HistoryMessage]) -> Result<worker::D1PreparedStatement> {
    let ids: Vec<&str> = messages.iter().filter_map(|m| m.turn_id.as_deref()).collect();
    db.stmt(SELECT_TURNS, args![serde_json::to_string(&ids).unwrap_or_else(|_| "[]".into())])
}

/// The stored turns, with step outcomes merged in.
pub fn bot_turns(result: &crate::storage::D1Rows) -> Result<BTreeMap<String, BotTurn>> {
    let found: Vec<TurnContentsRow> = rows(result)?;
    let mut out = BTreeMap::new();
    for row in found {
        let mut turn: BotTurn = row.contents.as_deref().and_then(|c| serde_json::from_str(c).ok()).unwrap_or_default();
        let outcomes: BTreeMap<String, Value> =
            row.step_outcomes.as_deref().and_then(|c| serde_json::from_str(c).ok()).unwrap_or_default();
        for (k, v) in outcomes {
            if let Ok(i) = k.parse::<usize>() {
                turn.outcomes.insert(i, v);
            }
        }
        out.insert(row.turn_id, turn);
    }
    Ok(out)
}

const UPSERT_TURN_START: &str = "INSERT INTO turns (turn_id, conv, chat_id, status, trigger, target_message_id, upto_seq,
       model, history_format, attempts, history_cut_seq, created_at, updated_at)
     VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)
     ON CONFLICT (turn_id) DO UPDATE SET status = 'running', target_message_id = excluded.target_message_id,
       upto_seq = excluded.upto_seq, model = excluded.model, history_format = excluded.history_format,
       attempts = excluded.attempts, history_cut_seq = excluded.history_cut_seq, updated_at = excluded.updated_at";
const UPSERT_CONVERSATION: &str = "INSERT INTO conversations (conv, chat_id, thread_id, session_start_seq, session_started_at,
       history_cut_seq, updated_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
     ON CONFLICT (conv) DO UPDATE SET session_start_seq = MAX(session_start_seq, excluded.session_start_seq),
       session_started_at = COALESCE(excluded.session_started_at, session_started_at),
       history_cut_seq = excluded.history_cut_seq, updated_at = excluded.updated_at";

#[derive(Debug, Clone)]
pub struct TurnStart<'a> {
    pub turn_id: &'a str,
    pub conv: &'a ConvKey,
    pub trigger: &'a str,
    pub target_message_id: Option<i64>,
    pub upto_seq: i64,
    pub model: &'a str,
    pub history_format: &'a str,
    pub attempt: u32,
    pub history_cut_seq: Option<i64>,
    pub session_start_seq: i64,
    pub session_started_at: Option<i64>,
    pub now: i64,
}

/// The statements recording a turn (upserting its row) and the conversation's session
/// window; they run in the turn's final batch, before `finish_turn`'s update.
pub fn start_turn_stmts(db: &Db, t: &TurnStart<'_>) -> Result<Vec<worker::D1PreparedStatement>> {
    let conv = t.conv.to_string();
    Ok(vec![
        db.stmt(
            UPSERT_TURN_START,
            args![
                t.turn_id,
                conv.clone(),
                t.conv.chat_id,
                t.trigger,
                t.target_message_id,
                t.upto_seq,
                t.model,
                t.history_format,
                t.attempt,
                t.history_cut_seq,
                t.now
            ],
        )?,
        db.stmt(
            UPSERT_CONVERSATION,
            args![conv, t.conv.chat_id, t.conv.thread_id, t.session_start_seq, t.session_started_at, t.history_cut_seq, t.now],
        )?,
    ])
}

const FINISH_TURN: &str = "UPDATE turns SET status = ?2, contents = ?3, plan = ?4, step_calls = ?5, finish_reason = ?6,
       empty_reason = ?7, error = ?8, subrequests = ?9, updated_at = ?10, d1_round_trips = ?11, d1_statements = ?12
     WHERE turn_id = ?1";

pub struct TurnEnd<'a> {
    pub turn_id: &'a str,
    pub status: TurnStatus,
    pub contents: Option<String>,
    pub plan: Option<String>,
    pub step_calls: Option<String>,
    pub finish_reason: Option<String>,
    pub empty_reason: Option<String>,
    pub error: Option<String>,
    pub subrequests: u32,
    /// D1 round trips and statements of the turn, this final batch included.
    pub d1_round_trips: u32,
    pub d1_statements: u32,
    pub now: i64,
}

/// Stores a turn (its start statements first), its result and its model calls, in one round
/// trip.
pub async fn finish_turn(
    db: &Db,
    start: Vec<worker::D1PreparedStatement>,
    end: &TurnEnd<'_>,
    calls: Vec<worker::D1PreparedStatement>,
) -> Result<()> {
    let mut stmts = start;
    stmts.push(db.stmt(
        FINISH_TURN,
        args![
            end.turn_id,
            end.status.as_str(),
            end.contents.clone(),
            end.plan.clone(),
            end.step_calls.clone(),
            end.finish_reason.clone(),
            end.empty_reason.clone(),
            end.error.clone(),
            end.subrequests,
            end.now,
            end.d1_round_trips,
            end.d1_statements
        ],
    )?);
    stmts.extend(calls);
    db.batch(stmts).await?;
    Ok(())
}

const SET_TURN_STATUS: &str = "UPDATE turns SET status = ?2, error = COALESCE(?3, error), updated_at = ?4 WHERE turn_id = ?1";

pub async fn set_turn_status(db: &Db, turn_id: &str, status: TurnStatus, error: Option<String>, now: i64) -> Result<()> {
    db.run(SET_TURN_STATUS, args![turn_id, status.as_str(), error, now]).await?;
    Ok(())
}

/// `set_turn_status` as a statement, for a batch.
pub fn turn_status_stmt(db: &Db, turn_id: &str, status: TurnStatus, error: Option<String>, now: i64) -> Result<worker::D1PreparedStatement> {
    db.stmt(SET_TURN_STATUS, args![turn_id, status.as_str(), error, now])
}

const SET_STEP_OUTCOME: &str = "UPDATE turns SET step_outcomes = json_set(step_outcomes, '$.\"' || ?2 || '\"', json(?3)),
       updated_at = ?4 WHERE turn_id = ?1";

/// Like `SET_STEP_OUTCOME`, but never over an outcome already recorded: a cancellation must not
/// overwrite "sent" when the step was at Telegram as the new message came.
const INSERT_STEP_OUTCOME: &str = "UPDATE turns SET step_outcomes = json_insert(step_outcomes, '$.\"' || ?2 || '\"', json(?3)),
       updated_at = ?4 WHERE turn_id = ?1";

/// Records what became of a step. `only_if_absent`: keep an outcome already recorded.
pub fn step_outcome_stmt(
    db: &Db,
    turn_id: &str,
    call_index: usize,
    outcome: &Value,
    now: i64,
    only_if_absent: bool,
) -> Result<worker::D1PreparedStatement> {
    let sql = if only_if_absent { INSERT_STEP_OUTCOME } else { SET_STEP_OUTCOME };
    db.stmt(sql, args![turn_id, call_index.to_string(), outcome.to_string(), now])
}

/// Loads what a retried turn needs to resume without calling the model again.
#[derive(Debug, Clone, Deserialize)]
pub struct StoredPlan {
    pub status: String,
    pub plan: Option<String>,
}

pub async fn stored_plan(db: &Db, turn_id: &str) -> Result<Option<StoredPlan>> {
    db.first("SELECT status, plan FROM turns WHERE turn_id = ?1", args![turn_id]).await
}

/// A turn's step → function-call mapping (for recording step outcomes); empty if unknown.
pub async fn step_calls(db: &Db, turn_id: &str) -> Vec<Option<usize>> {
    #[derive(Deserialize)]
    struct Row {
        step_calls: Option<String>,
    }
    db.first::<Row>("SELECT step_calls FROM turns WHERE turn_id = ?1", args![turn_id])
        .await
        .ok()
        .flatten()
        .and_then(|r| r.step_calls)
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default()
}
