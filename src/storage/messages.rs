//! Messages: what the webhook records (one batch per update: the refused sender's counter, the
//! chat, sender and message or reaction; the message's own key is the dedup of redeliveries), the rows a turn and consolidation read back
//! as history, and the messages of API conversations (no Telegram ids).
//!
//! Invariants (INVARIANTS.md): "A refused sender costs a counter, not rows", "Refused text
//! stays out of every model call". How: the statements that would write a refused sender's
//! update and message past the limit are guarded by [`over_limit_sql`], evaluated in the same
//! batch after the counter (`agent_core::access::policy::RefusedLimit`) moved, and the batch
//! says so (`Recorded::over_limit`) so the webhook hands nothing on.
use crate::args;
use crate::storage::{rows, Arg, D1Rows, Db};
use agent_core::conversation::{ChatInfo, ConvKey, InboundMessage, InboundReaction, Part};
use agent_core::history::{HistoryMessage, Role};
use agent_core::access::policy::RefusedLimit;
use serde::Deserialize;
use serde_json::Value;
use worker::{D1PreparedStatement, Result};


/// Whether the sender is refused, as the message's `excluded` is decided: `?{u}` the sender,
/// `?{r}`..`?{r+2}` the refusals for no stored level, `allowed` and `blocked` (the negations of
/// `agent_core::access::policy::admitted_by_level`).
fn refused_sql(u: usize, r: usize) -> String {
    format!("CASE (SELECT access FROM users WHERE user_id = ?{u}) WHEN 'allowed' THEN ?{a} WHEN 'blocked' THEN ?{b} ELSE ?{r} END", a = r + 1, b = r + 2)
}

/// Whether this update is past its refused sender's hourly limit: refused, and the counter
/// (already moved by [`COUNT_REFUSED`] in the same batch) over it. `?{l}`, `?{l+1}`, `?{l+2}`:
/// the limit's sender, window and count ([`limit_args`]). An admitted sender is never over,
/// whatever an earlier hour's or a refused spell's counter says.
fn over_limit_sql(u: usize, r: usize, l: usize) -> String {
    format!(
        "({} AND EXISTS (SELECT 1 FROM refused_senders WHERE window_start = ?{w} AND sender = ?{l} AND n > ?{c}))",
        refused_sql(u, r),
        w = l + 1,
        c = l + 2
    )
}

fn limit_args(limit: &RefusedLimit) -> Vec<Arg> {
    args![limit.sender, limit.window_start, limit.per_hour]
}

/// The refused sender's counter for the hour: moved by a refused update up to the limit + 1,
/// not at all for an admitted one (?1 sender, ?2 window, ?3 now, ?4 the person, ?5..?7 the
/// refusals by level, ?8 the limit). Past the limit it writes nothing.
const COUNT_REFUSED: &str = "INSERT INTO refused_senders (window_start, sender, n, last_at)
     SELECT ?2, ?1, 1, ?3 WHERE CASE (SELECT access FROM users WHERE user_id = ?4) WHEN 'allowed' THEN ?6 WHEN 'blocked' THEN ?7 ELSE ?5 END
     ON CONFLICT (window_start, sender) DO UPDATE SET n = n + 1, last_at = excluded.last_at WHERE refused_senders.n <= ?8";

/// The sender's stored access level and whether the update is past the limit: ?1 the person,
/// ?2..?4 refusals, ?5..?7 the limit.
fn select_access_sql() -> String {
    format!("SELECT (SELECT access FROM users WHERE user_id = ?1) AS access, {} AS over_limit", over_limit_sql(1, 2, 5))
}
/// Chats and users are rewritten only when something changed (or hourly for last_seen_at), so
/// the common update writes one row less each.
/// Past the sender's limit (?7 the person, ?8..?10 refusals, ?11..?13 the limit), nothing.
const UPSERT_CHAT: &str = "INSERT INTO chats (chat_id, kind, title, username, is_forum, first_seen_at, last_seen_at)
     SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?6 WHERE NOT {over}
     ON CONFLICT (chat_id) DO UPDATE SET kind = excluded.kind, title = excluded.title,
       username = excluded.username, is_forum = excluded.is_forum, last_seen_at = excluded.last_seen_at,
       blocked_at = NULL, blocked_reason = NULL
     WHERE chats.kind IS NOT excluded.kind OR chats.title IS NOT excluded.title
       OR chats.username IS NOT excluded.username OR chats.is_forum IS NOT excluded.is_forum
       OR chats.blocked_at IS NOT NULL OR chats.last_seen_at < excluded.last_seen_at - 3600000";
/// Past the sender's limit (?6..?8 refusals, ?9..?11 the limit), nothing: a refused stranger
/// renaming themselves writes no row either.
const UPSERT_USER: &str = "INSERT INTO users (user_id, name, username, is_bot, updated_at)
     SELECT ?1, ?2, ?3, ?4, ?5 WHERE NOT {over}
     ON CONFLICT (user_id) DO UPDATE SET name = excluded.name, username = excluded.username,
       is_bot = excluded.is_bot, updated_at = excluded.updated_at
     WHERE users.name IS NOT excluded.name OR users.username IS NOT excluded.username
       OR users.is_bot IS NOT excluded.is_bot";
/// `excluded` picks, by the sender's stored access level, one of the three answers of
/// `agent_core::access::policy::admitted_by_level` (?20 none, ?21 allowed, ?22 blocked).
/// Past the sender's limit (?23..?25), nothing is written.
const INSERT_MESSAGE: &str = "INSERT INTO messages (conv, chat_id, message_id, role, user_id, name, username, is_bot,
       parts, text, reply_to, forwarded_from, media_group_id, date, edited_at, update_id,
       reply_to_user_id, reply_to_name, reply_excerpt, excluded)
     SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
       CASE (SELECT access FROM users WHERE user_id = ?5) WHEN 'allowed' THEN ?21 WHEN 'blocked' THEN ?22 ELSE ?20 END
     WHERE NOT {over}
     ON CONFLICT (chat_id, message_id) DO NOTHING";
/// An edit marks the row with the conversation's next edit mark itself (migration 0019's
/// trigger would mark it too, writing the row a second time), and is judged by the access
/// policy as it is now: a person blocked after writing cannot rewrite what the model reads
/// (`excluded` recomputed; a change moves `history_version` by 0019's trigger). A redelivered
/// edit (the same edit date, text and judgement) writes nothing: the message's key is the
/// dedup (no update row since migration 0023).
const UPSERT_EDITED_MESSAGE: &str = "INSERT INTO messages (conv, chat_id, message_id, role, user_id, name, username, is_bot,
       parts, text, reply_to, forwarded_from, media_group_id, date, edited_at, update_id,
       reply_to_user_id, reply_to_name, reply_excerpt, excluded)
     SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
       CASE (SELECT access FROM users WHERE user_id = ?5) WHEN 'allowed' THEN ?21 WHEN 'blocked' THEN ?22 ELSE ?20 END
     WHERE NOT {over}
     ON CONFLICT (chat_id, message_id) DO UPDATE SET parts = excluded.parts, text = excluded.text,
       edited_at = excluded.edited_at, excluded = excluded.excluded,
       rev = (SELECT COALESCE(MAX(e.rev), 0) + 1 FROM messages e WHERE e.conv = messages.conv AND e.rev IS NOT NULL)
     WHERE messages.edited_at IS NOT excluded.edited_at OR messages.parts IS NOT excluded.parts
       OR messages.excluded IS NOT excluded.excluded";
/// A reaction is an event in the conversation of the message it is on, with no message id of
/// its own: a redelivery is found by its update id among such rows (the partial index
/// `messages_by_update`, migration 0016, holds only them).
const INSERT_REACTION: &str = "INSERT INTO messages (conv, chat_id, message_id, role, user_id, name, username, is_bot,
       parts, text, date, update_id, excluded)
     SELECT COALESCE((SELECT conv FROM messages WHERE chat_id = ?1 AND message_id = ?2), ?3), ?1, NULL, 'event',
       ?4, ?5, ?6, 0, ?7, ?8, ?9, ?10,
       CASE (SELECT access FROM users WHERE user_id = ?4) WHEN 'allowed' THEN ?12 WHEN 'blocked' THEN ?13 ELSE ?11 END
     WHERE NOT EXISTS (SELECT 1 FROM messages WHERE update_id = ?10 AND message_id IS NULL) AND NOT {over}";
/// The reacted-to message's conversation and the bot's newest message there: a `messages` row
/// found by its id, or the newest of the answers kept apart (migration 0041) of the chat's
/// conversation without a topic (`?3`; the only one that keeps them). The bot's newest is the
/// newest answer unless a bot row (a picture, a sticker, a previous release's answer) came
/// after it: only the rows after the newest answer are looked through.
const REACTION_TARGET: &str = "SELECT k.conv AS conv,
       COALESCE((SELECT b.message_id FROM messages b WHERE b.conv = k.conv AND b.role = 'bot' AND b.message_id IS NOT NULL
          AND b.seq > COALESCE((SELECT MAX(a.after_seq) FROM answers a WHERE a.conv = k.conv), -1)
          ORDER BY b.seq DESC LIMIT 1),
        (SELECT a.message_id FROM answers a WHERE a.conv = k.conv ORDER BY a.after_seq DESC, length(a.chunk_key) DESC, a.chunk_key DESC LIMIT 1)) AS last_bot_message_id
     FROM (SELECT COALESCE((SELECT m.conv FROM messages m WHERE m.chat_id = ?1 AND m.message_id = ?2),
             (SELECT ?3 WHERE ?2 = (SELECT a.message_id FROM answers a WHERE a.conv = ?3
                ORDER BY a.after_seq DESC, length(a.chunk_key) DESC, a.chunk_key DESC LIMIT 1))) AS conv) k
     WHERE k.conv IS NOT NULL";

#[derive(Debug, Clone, Default)]
pub struct Recorded {
    /// First delivery of this update_id.
    pub is_new: bool,
    /// `users.access` of the sender.
    pub access: Option<String>,
    /// A refused sender past their hourly limit: nothing but the counter was written; hand
    /// nothing on.
    pub over_limit: bool,
}

#[derive(Deserialize)]
struct AccessRow {
    access: Option<String>,
    #[serde(default)]
    over_limit: Option<i64>,
}

/// Whether the sender is admitted, by stored access level: `(none, allowed, blocked)`, from
/// `agent_core::access::policy::admitted_by_level`.
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

/// The refusals by stored level (`!admitted_by_level`), as bound values.
fn refusal_args(admitted: AdmittedByLevel) -> Vec<Arg> {
    args![!admitted.0, !admitted.1, !admitted.2]
}

/// The statements around an update's own rows: the refused sender's counter first (before
/// anything is written), and last the sender's access level with whether the update was past
/// the limit. (Until migration 0023 an `updates` row was written too, the dedup of
/// redeliveries: two rows written per update, with its index entry, that the message's own
/// unique key already does.)
struct Gate {
    count: D1PreparedStatement,
    access: D1PreparedStatement,
}

fn gate(db: &Db, user: Option<i64>, admitted: AdmittedByLevel, limit: &RefusedLimit, now: i64) -> Result<Gate> {
    let mut count = args![limit.sender, limit.window_start, now, user];
    count.extend(refusal_args(admitted));
    count.extend(args![limit.per_hour]);
    let mut access = args![user];
    access.extend(refusal_args(admitted));
    access.extend(limit_args(limit));
    Ok(Gate { count: db.stmt(COUNT_REFUSED, count)?, access: db.stmt(&select_access_sql(), access)? })
}

/// For an update that stores nothing of its own (an ephemeral command): the refused sender's
/// counter moves as for any refused update (up to its limit + 1), and the sender's stored
/// access level comes back with whether the update is past the limit, in one round trip.
pub async fn count_refused(db: &Db, user: Option<i64>, admitted: AdmittedByLevel, limit: &RefusedLimit, now: i64) -> Result<(Option<String>, bool)> {
    let g = gate(db, user, admitted, limit, now)?;
    let results = db.batch(vec![g.count, g.access]).await?;
    let row = rows::<Value>(&results[1])?.into_iter().next().unwrap_or_default();
    let access = row.get("access").and_then(Value::as_str).map(str::to_string);
    Ok((access, row.get("over_limit").and_then(Value::as_i64) == Some(1)))
}

/// The chat's row (rewritten only when something changed, or hourly), unless past the limit.
fn chat_stmt(db: &Db, c: &ChatInfo, user: Option<i64>, admitted: AdmittedByLevel, limit: &RefusedLimit, now: i64) -> Result<D1PreparedStatement> {
    let mut values = args![c.id, c.kind.as_str(), c.title.clone(), c.username.clone(), c.is_forum, now, user];
    values.extend(refusal_args(admitted));
    values.extend(limit_args(limit));
    db.stmt(&UPSERT_CHAT.replace("{over}", &over_limit_sql(7, 8, 11)), values)
}

/// What the statements say: whether the update is new (its message or reaction was stored
/// now), the sender's access, whether it was past the limit.
fn read_gate(stored: &D1Rows, access: &D1Rows) -> Result<Recorded> {
    let is_new = !rows::<Value>(stored)?.is_empty();
    let row = rows::<AccessRow>(access)?.into_iter().next();
    let over_limit = row.as_ref().and_then(|r| r.over_limit).unwrap_or(0) != 0;
    Ok(Recorded { is_new, access: row.and_then(|r| r.access), over_limit })
}

/// Records a message (or an edit) with its chat and sender, in one round trip; a refused
/// sender past `limit` moves only their counter.
#[allow(clippy::too_many_arguments)]
pub async fn record_message(
    db: &Db,
    update_id: i64,
    m: &InboundMessage,
    edited: bool,
    admitted: AdmittedByLevel,
    limit: &RefusedLimit,
    now: i64,
) -> Result<Recorded> {
    let c = &m.chat;
    let g = gate(db, m.speaker.user_id, admitted, limit, now)?;
    let mut stmts = vec![g.count, chat_stmt(db, c, m.speaker.user_id, admitted, limit, now)?];
    if let Some(uid) = m.speaker.user_id {
        let mut values = args![uid, m.speaker.name.clone(), m.speaker.username.clone(), m.speaker.is_bot, now];
        values.extend(refusal_args(admitted));
        values.extend(limit_args(limit));
        stmts.push(db.stmt(&UPSERT_USER.replace("{over}", &over_limit_sql(1, 6, 9)), values)?);
    }
    let sql = format!("{} RETURNING seq", if edited { UPSERT_EDITED_MESSAGE } else { INSERT_MESSAGE }.replace("{over}", &over_limit_sql(5, 20, 23)));
    let mut values = message_args(m, update_id, admitted);
    values.extend(limit_args(limit));
    stmts.push(db.stmt(&sql, values)?);
    let message = stmts.len() - 1;
    stmts.push(g.access);
    let results = db.batch(stmts).await?;
    read_gate(&results[message], results.last().expect("the access statement"))
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

pub async fn record_reaction(db: &Db, update_id: i64, r: &InboundReaction, admitted: AdmittedByLevel, limit: &RefusedLimit, now: i64) -> Result<RecordedReaction> {
    let c = &r.chat;
    let parts = vec![Part::Event { kind: "reaction".into(), detail: reaction_detail(r) }];
    let text = parts[0].render_compact();
    let g = gate(db, r.speaker.user_id, admitted, limit, now)?;
    let mut values = args![
        c.id,
        r.message_id,
        ConvKey::chat(c.id).to_string(),
        r.speaker.user_id,
        r.speaker.name.clone(),
        r.speaker.username.clone(),
        serde_json::to_string(&parts).unwrap_or_default(),
        text,
        r.date,
        update_id
    ];
    values.extend(refusal_args(admitted));
    values.extend(limit_args(limit));
    let stmts = vec![
        g.count,
        chat_stmt(db, c, r.speaker.user_id, admitted, limit, now)?,
        db.stmt(&format!("{} RETURNING seq", INSERT_REACTION.replace("{over}", &over_limit_sql(4, 11, 14))), values)?,
        db.stmt(REACTION_TARGET, args![c.id, r.message_id, ConvKey::chat(c.id).to_string()])?,
        g.access,
    ];
    let results = db.batch(stmts).await?;
    let target = rows::<ReactionTargetRow>(&results[3])?.into_iter().next();
    Ok(RecordedReaction {
        recorded: read_gate(&results[2], &results[4])?,
        conv: target.as_ref().map(|t| t.conv.clone()),
        last_bot_message_id: target.and_then(|t| t.last_bot_message_id),
    })
}


/// The columns of `messages m` a [`MessageRow`] is read from, under the short names it reads
/// them by (a macro, to be spliced into the queries' constants with `concat!`). A turn reads up
/// to 401 rows, and with the columns' own names the names were about a third of the bytes of
/// JSON that cross from D1 (`JSON.stringify` in the runtime, then parsed in wasm). The reply
/// columns are left out where a query does not need them (they default to none).
#[macro_export]
macro_rules! message_columns {
    () => {
        "m.seq AS s, m.message_id AS i, m.role AS r, m.user_id AS u, m.name AS n, m.username AS un, m.parts AS p,
       m.reply_to AS rt, m.forwarded_from AS f, m.date AS d, m.edited_at AS e, m.turn_id AS t, m.media_group_id AS g"
    };
    // A reply's excerpt is shown only when the replied-to message is stored here and not
    // excluded, and its author is not blocked: no excerpt of refused text reaches a prompt,
    // including text that was never stored (a refused sender past REFUSED_UPDATES_PER_HOUR) or
    // was pruned (the cron's prune of refused messages). The lookups use the unique
    // (chat_id, message_id) index and the users' key, and only rows that reply do them. A
    // reply to the bot (`?6`, its id) shows its excerpt: the bot's answers kept apart
    // (migration 0041) are not among `messages`, and nothing of the bot's is refused text.
    (replies) => {
        concat!(
            $crate::message_columns!(),
            ", m.reply_to_user_id AS ru, m.reply_to_name AS rn,
       CASE WHEN m.reply_excerpt IS NULL
              OR (m.reply_to_user_id IS NOT ?6
                  AND NOT EXISTS (SELECT 1 FROM messages x WHERE x.chat_id = m.chat_id AND x.message_id = m.reply_to AND x.excluded = 0))
              OR EXISTS (SELECT 1 FROM users ux WHERE ux.user_id = m.reply_to_user_id AND ux.access = 'blocked')
            THEN NULL ELSE m.reply_excerpt END AS re"
        )
    };
}

/// A stored message as a turn or consolidation reads it ([`message_columns!`]; `tu`, the
/// `upto_seq` of the bot message's turn, comes from a join, or is absent).
#[derive(Debug, Clone, Deserialize)]
pub struct MessageRow {
    #[serde(rename = "s")]
    pub seq: i64,
    #[serde(rename = "i")]
    pub message_id: Option<i64>,
    #[serde(rename = "r")]
    pub role: String,
    #[serde(rename = "u")]
    pub user_id: Option<i64>,
    #[serde(rename = "n")]
    pub name: String,
    #[serde(rename = "un")]
    pub username: Option<String>,
    #[serde(rename = "p")]
    pub parts: String,
    #[serde(rename = "rt")]
    pub reply_to: Option<i64>,
    #[serde(rename = "ru", default)]
    pub reply_to_user_id: Option<i64>,
    #[serde(rename = "rn", default)]
    pub reply_to_name: Option<String>,
    #[serde(rename = "re", default)]
    pub reply_excerpt: Option<String>,
    #[serde(rename = "f")]
    pub forwarded_from: Option<String>,
    #[serde(rename = "d")]
    pub date: i64,
    #[serde(rename = "e")]
    pub edited_at: Option<i64>,
    #[serde(rename = "t")]
    pub turn_id: Option<String>,
    #[serde(rename = "tu", default)]
    pub turn_upto_seq: Option<i64>,
    #[serde(rename = "g", default)]
    pub media_group_id: Option<String>,
    /// 1: an answer kept apart (migration 0041), read with the messages.
    #[serde(rename = "o", default)]
    pub apart: Option<i64>,
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
            media_group_id: self.media_group_id,
            album_ids: Vec::new(),
        }
    }
}



pub async fn record_api_message(db: &Db, conv: &ConvKey, name: &str, parts: &[Part], now: i64) -> Result<()> {
    let text = parts.iter().map(Part::render_compact).collect::<Vec<_>>().join(" ");
    db.batch(vec![
        // An API conversation is never refused: no limit applies.
        db.stmt(&UPSERT_CHAT.replace("{over}", "0"), args![conv.chat_id, "private", "API", None::<String>, false, now])?,
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
