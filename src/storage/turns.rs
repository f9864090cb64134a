//! Turns: what a turn loads before it calls the model (conversation, chat, the session's
//! recent messages, the last answered seq, the bot's stored turns), the turn's row from start
//! to finish, and what became of each plan step.
use crate::args;
use crate::storage::{rows, Arg, Db};
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
    /// The person of a private chat has a Telegram Business connection that is on (1).
    #[serde(default)]
    pub business_owner: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
struct LastTurnRow {
    upto_seq: Option<i64>,
}

/// What a turn loads before it calls the model.
#[derive(Debug, Clone, Default)]
pub struct ContextRows {
    pub conversation: ConversationRow,
    pub chat: Option<ChatRow>,
    /// Newest last.
    pub messages: Vec<HistoryMessage>,
    /// The last message seq an earlier turn already answered.
    pub answered_seq: i64,
    /// The copy of the rows for the chat object to keep for its next turn.
    pub kept: RowCache,
    /// The bot's answers kept apart (migration 0041) from the last turn's start on, in their
    /// places (read every time: the copy holds only `messages` rows).
    pub answers: Vec<HistoryMessage>,
}

/// Messages a turn reads at most (the token budget usually cuts earlier).
pub const HISTORY_ROWS: i64 = 400;

const SELECT_CONVERSATION: &str = "SELECT session_start_seq, session_started_at, plan, history_cut_seq, history_version,
       (SELECT until_seq FROM summaries WHERE conv = ?1) AS summary_until,
       (SELECT MAX(rev) FROM messages WHERE conv = ?1 AND rev IS NOT NULL) AS edit_rev
     FROM conversations WHERE conv = ?1";
/// The chat, and (a private chat's id is its person's) that person's `/rich` setting.
const SELECT_CHAT: &str = "SELECT kind, title, model, blocked_at, (SELECT rich_off FROM users WHERE user_id = ?1) AS rich_off,
       (SELECT 1 FROM business_connections WHERE owner_id = ?1 AND is_enabled = 1 LIMIT 1) AS business_owner FROM chats WHERE chat_id = ?1";
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
/// The bot's answers kept apart (migration 0041) placed at or after where the last turn's
/// window started (its cut, or the session's start): every answer a new window shows, since a
/// window starts there or later. A row of the answers' key range each, with its turn's
/// `upto_seq` (where the history shows it).
const SELECT_ANSWERS: &str = "SELECT a.after_seq AS s, a.message_id AS i, 'bot' AS r, a.user_id AS u, a.name AS n, a.username AS un,
       a.parts AS p, NULL AS rt, NULL AS f, a.date AS d, NULL AS e, a.turn_id AS t, NULL AS g, t.upto_seq AS tu
     FROM answers a LEFT JOIN turns t ON t.turn_id = a.turn_id
     WHERE a.conv = ?1 AND a.after_seq >= COALESCE((SELECT MAX(c.session_start_seq, COALESCE(c.history_cut_seq, 0)) FROM conversations c WHERE c.conv = ?1), 0)
     ORDER BY a.after_seq, a.turn_id, length(a.chunk_key), a.chunk_key";
/// The newest message an earlier turn (not this one, which may be a retry) answered. A
/// scheduled run answers nobody: people's messages it saw still get their own turn.
/// A conversation's turns are read by their key's range (`?3` = `<conv>/`, `?4` = `<conv>0`):
/// a turn id starts with its conversation (migration 0024, which dropped `turns_by_conv`).
const SELECT_ANSWERED: &str = "SELECT MAX(upto_seq) AS upto_seq FROM turns
     WHERE turn_id > ?3 AND turn_id < ?4 AND conv = ?1 AND turn_id != ?2 AND status IN ('planned', 'done') AND COALESCE(trigger, '') != 'schedule'";
const SELECT_TURNS: &str = "SELECT turn_id, contents, step_outcomes FROM turns
     WHERE turn_id IN (SELECT value FROM json_each(?1))";

/// Loads the conversation, chat, recent messages of the current session and the last answered
/// seq, in one round trip. (Notes, stored turns and memories depend on who and what is in the
/// history; the turn reads them in its second round trip.)
/// `copy`: the chat object's copy of the rows (`RowCache`) when it may serve this load; the
/// messages then are only those after it, and those of it edited since, if it still holds
/// (the caller merges them).
pub async fn load_turn_context(db: &Db, conv: &str, chat_id: i64, turn_id: &str, rows_limit: usize, copy: Option<RowCache>, bot_id: i64) -> Result<ContextRows> {
    let (after, version, start) = copy.as_ref().map_or((-1, None, None), |c| (c.upto, Some(c.version), Some(c.session_start)));
    let mut stmts = vec![
        db.stmt(SELECT_CONVERSATION, args![conv])?,
        db.stmt(SELECT_CHAT, args![chat_id])?,
        // One row more than a turn uses: if it comes back, it is the newest message cut off.
        db.stmt(SELECT_RECENT_MESSAGES, args![conv, rows_limit as i64 + 1, after, version, start, bot_id])?,
        db.stmt(SELECT_ANSWERED, args![conv, turn_id, format!("{conv}/"), format!("{conv}0")])?,
        db.stmt(SELECT_ANSWERS, args![conv])?,
    ];
    if let Some(c) = &copy {
        stmts.push(db.stmt(SELECT_EDITED_MESSAGES, args![conv, c.rev, c.upto, None::<i64>, None::<i64>, bot_id])?);
    }
    let r = db.batch(stmts).await?;
    let found = rows::<ConversationRow>(&r[0])?.into_iter().next();
    let chat = rows::<ChatRow>(&r[1])?.into_iter().next();
    let mut messages: Vec<HistoryMessage> = rows::<MessageRow>(&r[2])?.into_iter().map(MessageRow::into_history).collect();
    messages.reverse();
    // The copy held when the query used it (the conversation's row, read in the same batch,
    // decides as the query did): the rows read are only the newer ones, and the edited ones.
    if let (Some(copy), Some(c)) = (copy, &found) {
        let edited: Vec<HistoryMessage> = match r.get(5) {
            Some(e) => rows::<MessageRow>(e)?.into_iter().map(MessageRow::into_history).collect(),
            None => Vec::new(),
        };
        copy.merge(c.history_version, c.session_start_seq, edited, &mut messages, rows_limit);
    }
    let conversation = found.unwrap_or_default();
    let rev = conversation.edit_rev.unwrap_or(0);
    let kept = RowCache::keep(conv, conversation.history_version, conversation.session_start_seq, rev, &messages, rows_limit);
    let answered_seq = rows::<LastTurnRow>(&r[3])?.into_iter().next().and_then(|r| r.upto_seq).unwrap_or(0);
    let answers = rows::<MessageRow>(&r[4])?.into_iter().map(MessageRow::into_history).collect();
    Ok(ContextRows { conversation, chat, messages, answered_seq, kept, answers })
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

/// The turn's row, start and end in one statement (one row written: the table is its key,
/// migration 0024), with its model calls (migration 0037: a retried turn's row keeps the calls
/// of every attempt). ?1..?11 what the start knew (?11 its time), ?12..?22 the end, ?23 the
/// attempt's calls (a JSON array), ?24 their tokens.
///
/// Each attempt writes it again (its calls appended), with the attempt's `upto_seq`: a turn's
/// answer chunks are found again after it (`outbox::SELECT_STEP`, migration
/// 0038), which holds because no chunk of a turn goes out before its answer is committed
/// (`ChatState::commit_turn`) and a committed turn's retry answers nothing newer than its first
/// commit saw (`answer::inputs`), so a later attempt never writes an `upto_seq` past a sent chunk.
const UPSERT_TURN: &str = "INSERT INTO turns (turn_id, conv, chat_id, trigger, target_message_id, upto_seq,
       model, history_format, attempts, history_cut_seq, created_at,
       status, contents, plan, step_calls, finish_reason, empty_reason, error, subrequests, updated_at, d1_round_trips, d1_statements,
       calls, tokens)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24)
     ON CONFLICT (turn_id) DO UPDATE SET target_message_id = excluded.target_message_id,
       upto_seq = excluded.upto_seq, model = excluded.model, history_format = excluded.history_format,
       attempts = excluded.attempts, history_cut_seq = excluded.history_cut_seq,
       status = excluded.status, contents = excluded.contents, plan = excluded.plan, step_calls = excluded.step_calls,
       finish_reason = excluded.finish_reason, empty_reason = excluded.empty_reason, error = excluded.error,
       subrequests = excluded.subrequests, updated_at = excluded.updated_at, d1_round_trips = excluded.d1_round_trips,
       d1_statements = excluded.d1_statements,
       calls = (SELECT json_group_array(json(value)) FROM (SELECT value FROM json_each(COALESCE(turns.calls, '[]'))
                                                           UNION ALL SELECT value FROM json_each(excluded.calls))),
       tokens = turns.tokens + excluded.tokens";
/// The session window; rewritten only when it moved (a turn that leaves it as it was writes
/// no row).
const UPSERT_CONVERSATION: &str = "INSERT INTO conversations (conv, chat_id, thread_id, session_start_seq, session_started_at,
       history_cut_seq, updated_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
     ON CONFLICT (conv) DO UPDATE SET session_start_seq = MAX(session_start_seq, excluded.session_start_seq),
       session_started_at = COALESCE(excluded.session_started_at, session_started_at),
       history_cut_seq = excluded.history_cut_seq, updated_at = excluded.updated_at
     WHERE conversations.session_start_seq < excluded.session_start_seq
       OR (excluded.session_started_at IS NOT NULL AND conversations.session_started_at IS NOT excluded.session_started_at)
       OR conversations.history_cut_seq IS NOT excluded.history_cut_seq";

#[derive(Debug, Clone)]
pub struct NewTurnRow<'a> {
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
/// What a turn's start records, written with its end (`finish_turn`): the turn's start values
/// and the session window's statement.
pub struct StartRecord {
    turn: Vec<Arg>,
    conversation: worker::D1PreparedStatement,
}

impl StartRecord {
    /// The statements it adds to the turn's last round trip (for the turn's own count).
    pub fn statements(&self) -> usize {
        2
    }
}

pub fn start_turn_stmts(db: &Db, t: &NewTurnRow<'_>) -> Result<StartRecord> {
    let conv = t.conv.to_string();
    Ok(StartRecord {
        turn: args![
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
        conversation: db.stmt(
            UPSERT_CONVERSATION,
            args![conv, t.conv.chat_id, t.conv.thread_id, t.session_start_seq, t.session_started_at, t.history_cut_seq, t.now],
        )?,
    })
}

/// A turn attempt's model calls, as its row keeps them (`usage::call_json`).
pub struct TurnCalls {
    /// A JSON array.
    pub json: String,
    /// Their total tokens.
    pub tokens: u64,
}

impl TurnCalls {
    /// The statements the turn's batch adds for them (the token counter's, if any).
    pub fn statements(&self) -> usize {
        usize::from(self.tokens > 0)
    }
}

pub struct FinishedTurnRow<'a> {
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

/// Writes the turn's row (its start, its end and its model calls in one statement), the session
/// window and the bot's daily token counter, in one round trip.
pub async fn finish_turn(db: &Db, start: StartRecord, end: &FinishedTurnRow<'_>, calls: &TurnCalls) -> Result<()> {
    let mut turn = start.turn;
    turn.extend(args![
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
        end.d1_statements,
        calls.json.clone(),
        calls.tokens as i64
    ]);
    let mut stmts = vec![db.stmt(UPSERT_TURN, turn)?, start.conversation];
    stmts.extend(crate::storage::usage::token_day_stmt(db, end.now, calls.tokens)?);
    db.batch(stmts).await?;
    Ok(())
}

const SET_TURN_STATUS: &str = "UPDATE turns SET status = ?2, error = COALESCE(?3, error), updated_at = ?4 WHERE turn_id = ?1";

pub async fn set_turn_status(db: &Db, turn_id: &str, status: TurnStatus, error: Option<String>, now: i64) -> Result<()> {
    db.run(SET_TURN_STATUS, args![turn_id, status.as_str(), error, now]).await?;
    Ok(())
}

/// `set_turn_status` as a statement, for a batch.

/// One step outcome to record: the function call's index, the outcome, and whether it is
/// written only if the call has none yet (a cancellation must not overwrite "sent" when the
/// step was at Telegram as the new message came).
pub struct StepRecord {
    pub call: usize,
    pub outcome: Value,
    pub only_if_absent: bool,
}

/// Step outcomes and, with `status`, the turn's new status, as one statement: the turn's row
/// is written once however many it records (each statement on it writes it once: a
/// one-message plan's outcome and its status were two rows). `None` when there is nothing.
pub fn steps_stmt(
    db: &Db,
    turn_id: &str,
    steps: &[StepRecord],
    status: Option<(TurnStatus, Option<String>)>,
    now: i64,
) -> Result<Option<worker::D1PreparedStatement>> {
    if steps.is_empty() && status.is_none() {
        return Ok(None);
    }
    let mut values = args![turn_id, now];
    let mut outcomes = "step_outcomes".to_string();
    for step in steps {
        let f = if step.only_if_absent { "json_insert" } else { "json_set" };
        let (k, v) = (values.len() + 1, values.len() + 2);
        outcomes = format!("{f}({outcomes}, '$.\"' || ?{k} || '\"', json(?{v}))");
        values.extend(args![step.call.to_string(), step.outcome.to_string()]);
    }
    let mut sql = format!("UPDATE turns SET step_outcomes = {outcomes}, updated_at = ?2");
    if let Some((status, error)) = status {
        let (s, e) = (values.len() + 1, values.len() + 2);
        sql.push_str(&format!(", status = ?{s}, error = COALESCE(?{e}, error)"));
        values.extend(args![status.as_str(), error]);
    }
    sql.push_str(" WHERE turn_id = ?1");
    Ok(Some(db.stmt(&sql, values)?))
}

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
