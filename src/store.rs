//! Named D1 queries: every SQL statement the worker runs lives here (schema in `migrations/`),
//! every value bound. Grouped by who uses them: the webhook, the turn, delivery, access.

use crate::args;
use crate::db::{rows, Arg, Db};
use agent_core::conversation::{ConvKey, InboundMessage, InboundReaction, Part};
use agent_core::history::{BotTurn, HistoryMessage, Role};
use agent_core::status::TurnStatus;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use worker::Result;

// ---------------------------------------------------------------------------------------------
// Webhook: one batch per update.

const INSERT_UPDATE: &str = "INSERT INTO updates (update_id, kind, chat_id, outcome, received_at)
     VALUES (?1, ?2, ?3, 'stored', ?4) ON CONFLICT (update_id) DO NOTHING RETURNING update_id";
/// Chats and users are rewritten only when something changed (or hourly for last_seen_at), so
/// the common update writes one row less each.
const UPSERT_CHAT: &str = "INSERT INTO chats (chat_id, kind, title, username, is_forum, first_seen_at, last_seen_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
     ON CONFLICT (chat_id) DO UPDATE SET kind = excluded.kind, title = excluded.title,
       username = excluded.username, is_forum = excluded.is_forum, last_seen_at = excluded.last_seen_at,
       blocked_at = NULL, blocked_reason = NULL
     WHERE chats.kind IS NOT excluded.kind OR chats.title IS NOT excluded.title
       OR chats.username IS NOT excluded.username OR chats.is_forum IS NOT excluded.is_forum
       OR chats.blocked_at IS NOT NULL OR chats.last_seen_at < excluded.last_seen_at - 3600000";
const UPSERT_USER: &str = "INSERT INTO users (user_id, name, username, is_bot, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
     ON CONFLICT (user_id) DO UPDATE SET name = excluded.name, username = excluded.username,
       is_bot = excluded.is_bot, updated_at = excluded.updated_at
     WHERE users.name IS NOT excluded.name OR users.username IS NOT excluded.username
       OR users.is_bot IS NOT excluded.is_bot";
/// `excluded` picks, by the sender's stored access level, one of the three answers of
/// `agent_core::policy::admitted_by_level` (?20 none, ?21 allowed, ?22 blocked).
const INSERT_MESSAGE: &str = "INSERT INTO messages (conv, chat_id, message_id, role, user_id, name, username, is_bot,
       parts, text, reply_to, forwarded_from, media_group_id, date, edited_at, update_id,
       reply_to_user_id, reply_to_name, reply_excerpt, excluded)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
       CASE (SELECT access FROM users WHERE user_id = ?5) WHEN 'allowed' THEN ?21 WHEN 'blocked' THEN ?22 ELSE ?20 END)
     ON CONFLICT (chat_id, message_id) DO NOTHING";
const UPSERT_EDITED_MESSAGE: &str = "INSERT INTO messages (conv, chat_id, message_id, role, user_id, name, username, is_bot,
       parts, text, reply_to, forwarded_from, media_group_id, date, edited_at, update_id,
       reply_to_user_id, reply_to_name, reply_excerpt, excluded)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
       CASE (SELECT access FROM users WHERE user_id = ?5) WHEN 'allowed' THEN ?21 WHEN 'blocked' THEN ?22 ELSE ?20 END)
     ON CONFLICT (chat_id, message_id) DO UPDATE SET parts = excluded.parts, text = excluded.text,
       edited_at = excluded.edited_at";
const SELECT_ACCESS: &str = "SELECT access FROM users WHERE user_id = ?1";
/// A reaction is an event in the conversation of the message it is on.
const INSERT_REACTION: &str = "INSERT INTO messages (conv, chat_id, message_id, role, user_id, name, username, is_bot,
       parts, text, date, update_id, excluded)
     SELECT COALESCE((SELECT conv FROM messages WHERE chat_id = ?1 AND message_id = ?2), ?3), ?1, NULL, 'event',
       ?4, ?5, ?6, 0, ?7, ?8, ?9, ?10,
       CASE (SELECT access FROM users WHERE user_id = ?4) WHEN 'allowed' THEN ?12 WHEN 'blocked' THEN ?13 ELSE ?11 END
     WHERE NOT EXISTS (SELECT 1 FROM messages WHERE update_id = ?10)";
const REACTION_TARGET: &str = "SELECT m.conv AS conv,
       (SELECT b.message_id FROM messages b WHERE b.conv = m.conv AND b.role = 'bot' AND b.message_id IS NOT NULL
        ORDER BY b.seq DESC LIMIT 1) AS last_bot_message_id
     FROM messages m WHERE m.chat_id = ?1 AND m.message_id = ?2";

#[derive(Debug, Clone, Default)]
pub struct Recorded {
    /// First delivery of this update_id.
    pub is_new: bool,
    /// `users.access` of the sender.
    pub access: Option<String>,
}

#[derive(Deserialize)]
struct AccessRow {
    access: Option<String>,
}

/// Whether the sender is admitted, by stored access level: `(none, allowed, blocked)`, from
/// `agent_core::policy::admitted_by_level`.
pub type AdmittedByLevel = (bool, bool, bool);

fn message_args(m: &InboundMessage, update_id: i64, admitted: AdmittedByLevel) -> Vec<Arg> {
    let role = if m.is_event { "event" } else { "user" };
    let mut a = args![
        m.conv.to_string(),
        m.chat.id,
        m.message_id,
        role,
        m.speaker.user_id,
        m.speaker.name.clone(),
        m.speaker.username.clone(),
        m.speaker.is_bot,
        serde_json::to_string(&m.parts).unwrap_or_else(|_| "[]".into()),
        m.render_compact(),
        m.reply_to.as_ref().map(|r| r.message_id),
        m.forwarded_from.clone(),
        m.media_group_id.clone(),
        m.date,
        m.edit_date,
        update_id,
        m.reply_to.as_ref().and_then(|r| r.user_id),
        m.reply_to.as_ref().and_then(|r| r.name.clone()),
        m.reply_to.as_ref().map(|r| r.excerpt.clone()).filter(|e| !e.trim().is_empty()),
    ];
    a.extend(args![!admitted.0, !admitted.1, !admitted.2]);
    a
}

/// Records a message (or an edit) with its chat and sender, in one round trip.
pub async fn record_message(
    db: &Db,
    update_id: i64,
    kind: &str,
    m: &InboundMessage,
    edited: bool,
    admitted: AdmittedByLevel,
    now: i64,
) -> Result<Recorded> {
    let c = &m.chat;
    let mut stmts = vec![
        db.stmt(INSERT_UPDATE, args![update_id, kind, c.id, now])?,
        db.stmt(UPSERT_CHAT, args![c.id, c.kind.as_str(), c.title.clone(), c.username.clone(), c.is_forum, now])?,
    ];
    if let Some(uid) = m.speaker.user_id {
        stmts.push(db.stmt(UPSERT_USER, args![uid, m.speaker.name.clone(), m.speaker.username.clone(), m.speaker.is_bot, now])?);
    }
    let sql = if edited { UPSERT_EDITED_MESSAGE } else { INSERT_MESSAGE };
    stmts.push(db.stmt(sql, message_args(m, update_id, admitted))?);
    if let Some(uid) = m.speaker.user_id {
        stmts.push(db.stmt(SELECT_ACCESS, args![uid])?);
    }
    let results = db.batch(stmts).await?;
    let is_new = !rows::<Value>(&results[0])?.is_empty();
    let access = if m.speaker.user_id.is_some() {
        results.last().map(rows::<AccessRow>).transpose()?.and_then(|r| r.into_iter().next()).and_then(|r| r.access)
    } else {
        None
    };
    Ok(Recorded { is_new, access })
}

#[derive(Debug, Clone, Default)]
pub struct RecordedReaction {
    pub recorded: Recorded,
    /// The conversation of the reacted-to message, if it is on record.
    pub conv: Option<String>,
    /// The bot's most recent message in that conversation.
    pub last_bot_message_id: Option<i64>,
}

#[derive(Deserialize)]
struct ReactionTargetRow {
    conv: String,
    last_bot_message_id: Option<i64>,
}

/// The event text of a reaction, e.g. `👍 to #35`.
pub fn reaction_detail(r: &InboundReaction) -> String {
    let emoji = if r.emoji.is_empty() { "(removed)".to_string() } else { r.emoji.join("") };
    format!("{emoji} to #{}", r.message_id)
}

pub async fn record_reaction(db: &Db, update_id: i64, r: &InboundReaction, admitted: AdmittedByLevel, now: i64) -> Result<RecordedReaction> {
    let c = &r.chat;
    let parts = vec![Part::Event { kind: "reaction".into(), detail: reaction_detail(r) }];
    let text = parts[0].render_compact();
    let mut stmts = vec![
        db.stmt(INSERT_UPDATE, args![update_id, "message_reaction", c.id, now])?,
        db.stmt(UPSERT_CHAT, args![c.id, c.kind.as_str(), c.title.clone(), c.username.clone(), c.is_forum, now])?,
        db.stmt(
            INSERT_REACTION,
            args![
                c.id,
                r.message_id,
                ConvKey::chat(c.id).to_string(),
                r.speaker.user_id,
                r.speaker.name.clone(),
                r.speaker.username.clone(),
                serde_json::to_string(&parts).unwrap_or_default(),
                text,
                r.date,
                update_id,
                !admitted.0,
                !admitted.1,
                !admitted.2
            ],
        )?,
        db.stmt(REACTION_TARGET, args![c.id, r.message_id])?,
    ];
    if let Some(uid) = r.speaker.user_id {
        stmts.push(db.stmt(SELECT_ACCESS, args![uid])?);
    }
    let results = db.batch(stmts).await?;
    let is_new = !rows::<Value>(&results[0])?.is_empty();
    let target = rows::<ReactionTargetRow>(&results[3])?.into_iter().next();
    let access = if r.speaker.user_id.is_some() {
        rows::<AccessRow>(&results[4])?.into_iter().next().and_then(|r| r.access)
    } else {
        None
    };
    Ok(RecordedReaction {
        recorded: Recorded { is_new, access },
        conv: target.as_ref().map(|t| t.conv.clone()),
        last_bot_message_id: target.and_then(|t| t.last_bot_message_id),
    })
}

// ---------------------------------------------------------------------------------------------
// The turn: context in, results out.

#[derive(Debug, Clone, Deserialize, Default)]
pub struct ConversationRow {
    pub session_start_seq: i64,
    pub session_started_at: Option<i64>,
    pub plan: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ChatRow {
    pub kind: String,
    pub title: Option<String>,
    pub model: Option<String>,
    pub blocked_at: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct MessageRow {
    pub seq: i64,
    pub message_id: Option<i64>,
    pub role: String,
    pub user_id: Option<i64>,
    pub name: String,
    pub username: Option<String>,
    pub parts: String,
    pub reply_to: Option<i64>,
    #[serde(default)]
    pub reply_to_user_id: Option<i64>,
    #[serde(default)]
    pub reply_to_name: Option<String>,
    #[serde(default)]
    pub reply_excerpt: Option<String>,
    pub forwarded_from: Option<String>,
    pub date: i64,
    pub edited_at: Option<i64>,
    pub turn_id: Option<String>,
    pub turn_upto_seq: Option<i64>,
}

impl MessageRow {
    pub fn into_history(self) -> HistoryMessage {
        let parts: Vec<Part> = serde_json::from_str(&self.parts).unwrap_or_else(|_| vec![Part::Unknown { kind: "unreadable".into() }]);
        HistoryMessage {
            seq: self.seq,
            message_id: self.message_id,
            role: Role::parse(&self.role),
            user_id: self.user_id,
            name: self.name,
            username: self.username,
            reply_to: self.reply_to,
            reply_info: self
                .reply_to
                .filter(|_| self.reply_to_user_id.is_some() || self.reply_to_name.is_some() || self.reply_excerpt.is_some())
                .map(|_| agent_core::history::ReplyInfo {
                    user_id: self.reply_to_user_id,
                    name: self.reply_to_name,
                    excerpt: self.reply_excerpt,
                }),
            forwarded_from: self.forwarded_from,
            parts,
            date: self.date,
            edited: self.edited_at.is_some(),
            turn_id: self.turn_id,
            answered_upto: self.turn_upto_seq,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct NoteRow {
    pub id: i64,
    pub about_user_id: Option<i64>,
    pub content: String,
    pub source: String,
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
}

/// Messages a turn reads at most (the token budget usually cuts earlier).
pub const HISTORY_ROWS: i64 = 400;

const SELECT_CONVERSATION: &str = "SELECT session_start_seq, session_started_at, plan FROM conversations WHERE conv = ?1";
const SELECT_CHAT: &str = "SELECT kind, title, model, blocked_at FROM chats WHERE chat_id = ?1";
/// The newest messages of the current session (it starts at `conversations.session_start_seq`).
const SELECT_RECENT_MESSAGES: &str = "SELECT m.seq, m.message_id, m.role, m.user_id, m.name, m.username, m.parts,
       m.reply_to, m.reply_to_user_id, m.reply_to_name, m.reply_excerpt, m.forwarded_from, m.date, m.edited_at, m.turn_id,
       t.upto_seq AS turn_upto_seq
     FROM messages m LEFT JOIN turns t ON t.turn_id = m.turn_id
     WHERE m.conv = ?1 AND m.seq >= COALESCE((SELECT session_start_seq FROM conversations WHERE conv = ?1), 0)
       AND m.excluded = 0
     ORDER BY m.seq DESC LIMIT ?2";
/// The newest message an earlier turn (not this one, which may be a retry) answered.
const SELECT_ANSWERED: &str = "SELECT MAX(upto_seq) AS upto_seq FROM turns
     WHERE conv = ?1 AND turn_id != ?2 AND status IN ('planned', 'done')";
const SELECT_TURNS: &str = "SELECT turn_id, contents, step_outcomes FROM turns
     WHERE turn_id IN (SELECT value FROM json_each(?1))";

/// Loads the conversation, chat, recent messages of the current session and the last answered
/// seq, in one round trip. (Notes, stored turns and memories depend on who and what is in the
/// history; the turn reads them in its second round trip.)
pub async fn load_turn_context(db: &Db, conv: &str, chat_id: i64, turn_id: &str) -> Result<TurnContext> {
    let stmts = vec![
        db.stmt(SELECT_CONVERSATION, args![conv])?,
        db.stmt(SELECT_CHAT, args![chat_id])?,
        // One row more than a turn uses: if it comes back, it is the newest message cut off.
        db.stmt(SELECT_RECENT_MESSAGES, args![conv, HISTORY_ROWS + 1])?,
        db.stmt(SELECT_ANSWERED, args![conv, turn_id])?,
    ];
    let r = db.batch(stmts).await?;
    let conversation = rows::<ConversationRow>(&r[0])?.into_iter().next().unwrap_or_default();
    let chat = rows::<ChatRow>(&r[1])?.into_iter().next();
    let mut messages: Vec<HistoryMessage> = rows::<MessageRow>(&r[2])?.into_iter().map(MessageRow::into_history).collect();
    messages.reverse();
    let answered_seq = rows::<LastTurnRow>(&r[3])?.into_iter().next().and_then(|r| r.upto_seq).unwrap_or(0);
    Ok(TurnContext { conversation, chat, messages, answered_seq })
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
pub fn bot_turns(result: &worker::D1Result) -> Result<BTreeMap<String, BotTurn>> {
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

/// Notes for a turn: what `agent_core::scope::Scope::Chat` lets the conversation see (notes
/// written in this chat; operator notes for everyone, or about the people present; in a private
/// chat, agent notes about that person from anywhere). Operator notes first.
pub fn notes_stmt(db: &Db, chat_id: i64, people: &[i64]) -> Result<worker::D1PreparedStatement> {
    let scope = agent_core::scope::Scope::Chat { chat_id, people: people.to_vec() };
    let on = scope.notes("", 1);
    let sql = format!(
        "SELECT id, about_user_id, content, source FROM notes WHERE {}
         ORDER BY CASE source WHEN 'operator' THEN 0 ELSE 1 END, id DESC LIMIT 60",
        on.sql
    );
    db.stmt(&sql, crate::db::scope_args(&on))
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

// ---------------------------------------------------------------------------------------------
// Agent tools.

/// Inserts an agent's note. A note about a person is written only if that person has written
/// in this chat (only people seen in the conversation may be the subject of what is learned
/// there); otherwise nothing is written and `None` comes back.
pub async fn insert_note(db: &Db, chat_id: i64, about_user_id: Option<i64>, content: &str, source: &str, now: i64) -> Result<Option<i64>> {
    #[derive(Deserialize)]
    struct Id {
        id: i64,
    }
    let row: Option<Id> = db
        .first(
            "INSERT INTO notes (chat_id, about_user_id, content, source, created_at)
             SELECT ?1, ?2, ?3, ?4, ?5
             WHERE ?2 IS NULL OR EXISTS (SELECT 1 FROM messages WHERE user_id = ?2 AND chat_id = ?1 AND role = 'user' AND excluded = 0)
             RETURNING id",
            args![chat_id, about_user_id, content, source, now],
        )
        .await?;
    Ok(row.map(|r| r.id))
}

pub async fn set_plan(db: &Db, conv: &ConvKey, plan: &str, now: i64) -> Result<()> {
    db.run(
        "INSERT INTO conversations (conv, chat_id, thread_id, plan, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (conv) DO UPDATE SET plan = excluded.plan, updated_at = excluded.updated_at",
        args![conv.to_string(), conv.chat_id, conv.thread_id, if plan.trim().is_empty() { None } else { Some(plan) }, now],
    )
    .await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Failures the operator should see.

pub async fn record_failure(db: &Db, kind: &str, job_key: Option<&str>, conv: Option<&str>, detail: &str, body: Option<&str>, now: i64) -> Result<bool> {
    let changed = db
        .run(
            "INSERT INTO failures (kind, job_key, conv, detail, body, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT DO NOTHING",
            args![kind, job_key, conv, detail, body, now],
        )
        .await?;
    Ok(changed > 0)
}

// ---------------------------------------------------------------------------------------------
// API conversations (POST /api/v1/chat): no Telegram, messages without Telegram ids.

pub async fn record_api_message(db: &Db, conv: &ConvKey, name: &str, parts: &[Part], now: i64) -> Result<()> {
    let text = parts.iter().map(Part::render_compact).collect::<Vec<_>>().join(" ");
    db.batch(vec![
        db.stmt(UPSERT_CHAT, args![conv.chat_id, "private", "API", None::<String>, false, now])?,
        db.stmt(
            "INSERT INTO messages (conv, chat_id, message_id, role, user_id, name, is_bot, parts, text, date)
             VALUES (?1, ?2, NULL, 'user', ?2, ?3, 0, ?4, ?5, ?6)",
            args![conv.to_string(), conv.chat_id, name, serde_json::to_string(parts).unwrap_or_default(), text, now / 1000],
        )?,
    ])
    .await?;
    Ok(())
}

pub async fn record_api_replies(db: &Db, conv: &ConvKey, turn_id: &str, texts: &[String], bot_name: &str, now: i64) -> Result<()> {
    let stmts = texts
        .iter()
        .map(|t| {
            let parts = vec![Part::text(t.clone())];
            db.stmt(
                "INSERT INTO messages (conv, chat_id, message_id, role, user_id, name, is_bot, parts, text, date, turn_id)
                 VALUES (?1, ?2, NULL, 'bot', NULL, ?3, 1, ?4, ?5, ?6, ?7)",
                args![conv.to_string(), conv.chat_id, bot_name, serde_json::to_string(&parts).unwrap_or_default(), t.clone(), now / 1000, turn_id],
            )
        })
        .collect::<Result<Vec<_>>>()?;
    db.batch(stmts).await?;
    Ok(())
}
