//! Sends under keys made of the step and the chunk; what is recorded sent is never sent again.
//! A message chunk is recorded once sent, by the bot's message stored under its key (no row
//! before the send, none to mark after): a turn's send step's chunk under `messages.chunk_key`
//! (migration 0038, no index), any other under `messages.send_key` (migration 0037); every
//! other action is written to the outbox (pending) before it is sent and marked sent (with
//! what was sent stored as the bot's message) or failed after.

use crate::args;
use crate::storage::Db;
use agent_core::conversation::{ConvKey, Part};
use serde::Deserialize;
use worker::Result;

/// A row of the outbox, as a step's re-run reads it.
#[derive(Deserialize)]
pub struct OutboxRow {
    pub key: String,
    pub status: String,
    pub tg_message_id: Option<i64>,
    /// The request as written before the send (for a message: its text as first tried).
    #[serde(default)]
    pub body: Option<String>,
    /// A chunk recorded by the bot's message alone (`Sent::unrecorded`): the message's text.
    #[serde(default)]
    pub sent_text: Option<String>,
}

/// The rows of one step (all its chunks).
pub async fn of_step(db: &Db, step_key: &str) -> Result<Vec<OutboxRow>> {
    db.all(SELECT_STEP, step_args(step_key, None)).await
}

/// The rows of one step of a turn whose row may not be written yet (a chunk sent early while
/// the answer streams): its chunks are after `after_seq` (the newest message the attempt saw,
/// which is at most what the turn's first commit saw).
pub async fn of_step_after(db: &Db, step_key: &str, after_seq: i64) -> Result<Vec<OutboxRow>> {
    db.all(SELECT_STEP, step_args(step_key, Some(after_seq))).await
}

/// A step's rows, found by their keys (`<step_key>/<chunk>`) on the key's own index: the range
/// from `<step_key>/` to `<step_key>0` ('0' follows '/') holds exactly the keys that start with
/// `<step_key>/` (migration 0023 dropped `outbox_by_step`, an index entry per row written);
/// the chunks recorded by the bot's message alone, found the same way on its `send_key`
/// (migration 0037), the step's own (`<step_key>/<chunk>`, no further `/`: not a sub-step's);
/// and those of a turn's send step recorded by their message's `chunk_key`, which has no index
/// (migration 0038): among the conversation's messages (`?4`) after the turn's `upto_seq` (or
/// `?5`), which every chunk of the turn comes after (`chat_state::chunk_anchor`); and, the same
/// way, those kept among the conversation's answers (migration 0041), each placed at or after it.
const SELECT_STEP: &str = "SELECT key, status, tg_message_id, body, NULL AS sent_text FROM outbox WHERE key > ?2 AND key < ?3 AND step_key = ?1
     UNION ALL
     SELECT send_key, 'sent', message_id, NULL, text FROM messages
      WHERE send_key > ?2 AND send_key < ?3 AND instr(substr(send_key, length(?2) + 1), '/') = 0
     UNION ALL
     SELECT chunk_key, 'sent', message_id, NULL, text FROM messages
      WHERE conv = ?4 AND seq > COALESCE(?5, (SELECT upto_seq FROM turns WHERE turn_id = ?6))
        AND chunk_key > ?2 AND chunk_key < ?3 AND instr(substr(chunk_key, length(?2) + 1), '/') = 0
     UNION ALL
     SELECT chunk_key, 'sent', message_id, NULL, text FROM answers
      WHERE conv = ?4 AND after_seq >= COALESCE(?5, (SELECT upto_seq FROM turns WHERE turn_id = ?6))
        AND chunk_key > ?2 AND chunk_key < ?3 AND instr(substr(chunk_key, length(?2) + 1), '/') = 0";

fn step_args(step_key: &str, after_seq: Option<i64>) -> Vec<crate::storage::Arg> {
    let (conv, turn) = agent_core::chat_state::chunk_anchor(step_key).unzip();
    args![step_key, format!("{step_key}/"), format!("{step_key}0"), conv, after_seq, turn]
}

/// Writes an action as pending (a repeat counts an attempt); a row already sent is left as it
/// is (its text tells a re-run what went out).
const UPSERT_PENDING: &str = "INSERT INTO outbox (key, step_key, conv, chat_id, method, body, status, attempts, created_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', 1, ?7)
     ON CONFLICT (key) DO UPDATE SET attempts = attempts + 1, body = excluded.body WHERE outbox.status != 'sent'";

/// An action about to be sent, as the outbox records it.
pub struct Pending<'a> {
    pub key: &'a str,
    pub step_key: &'a str,
    pub conv: &'a ConvKey,
    pub method: &'a str,
    pub body: &'a str,
}

/// Records an action as pending before it is sent (a repeat counts an attempt).
pub async fn record_pending(db: &Db, p: &Pending<'_>, now: i64) -> Result<()> {
    db.run(UPSERT_PENDING, args![p.key, p.step_key, p.conv.to_string(), p.conv.chat_id, p.method, p.body, now]).await?;
    Ok(())
}

/// The rows of one step as they were, and `first` (the step's first action) recorded as
/// pending unless it was sent already, in one round trip: the common case, a step's first
/// try, then needs no round trip of its own before its send.
pub async fn of_step_recording(db: &Db, step_key: &str, first: &Pending<'_>, now: i64) -> Result<Vec<OutboxRow>> {
    let p = first;
    let stmts = vec![
        db.stmt(SELECT_STEP, step_args(step_key, None))?,
        db.stmt(UPSERT_PENDING, args![p.key, p.step_key, p.conv.to_string(), p.conv.chat_id, p.method, p.body, now])?,
    ];
    let results = db.batch(stmts).await?;
    crate::storage::rows(&results[0])
}

/// Who sent: the bot, for its rows in `messages`.
pub struct BotRow {
    pub id: i64,
    pub name: String,
    pub username: Option<String>,
}

/// What went out.
pub struct Sent<'a> {
    pub key: &'a str,
    pub conv: &'a ConvKey,
    pub message_id: Option<i64>,
    pub plain: bool,
    pub parts: Vec<Part>,
    pub turn_id: Option<&'a str>,
    /// No outbox row was written before the send: the bot's message, stored under the key, is
    /// the record (a message chunk; migration 0037): as its `chunk_key` where the key is a
    /// turn's send step's (`chat_state::chunk_anchor`, migration 0038), else its `send_key`.
    pub unrecorded: bool,
}

/// The text a bot message is stored with (`messages.text`), which a step's re-run compares.
pub fn stored_text(parts: &[Part]) -> String {
    parts.iter().map(Part::render_compact).collect::<Vec<_>>().join(" ")
}

const INSERT_BOT_MESSAGE: &str = "INSERT INTO messages (conv, chat_id, message_id, role, user_id, name, username, is_bot, parts, text, date, turn_id, send_key, chunk_key)
     VALUES (?1, ?2, ?3, 'bot', ?4, ?5, ?6, 1, ?7, ?8, ?9, ?10, ?11, ?12)
     ON CONFLICT (chat_id, message_id) DO NOTHING";
/// Written once: a chunk already kept after the turn's `upto_seq` (or where it would be placed
/// now) is not kept again.
const INSERT_ANSWER: &str = "INSERT INTO answers (conv, after_seq, chunk_key, turn_id, chat_id, message_id, user_id, name, username, parts, text, date)
     SELECT ?1, COALESCE((SELECT MAX(seq) FROM messages WHERE conv = ?1), 0), ?12, ?10, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9
     WHERE NOT EXISTS (SELECT 1 FROM answers WHERE conv = ?1 AND chunk_key = ?12 AND message_id = ?3
       AND after_seq >= COALESCE((SELECT upto_seq FROM turns WHERE turn_id = ?10), (SELECT MAX(seq) FROM messages WHERE conv = ?1), 0))
     ON CONFLICT DO NOTHING";

/// Stores what was sent as a bot message and marks its outbox row sent (a row written before
/// the send; with none, `unrecorded`, the message carries the key), in one round trip.
pub async fn record_sent(db: &Db, s: Sent<'_>, bot: &BotRow, now: i64) -> Result<()> {
    let text = stored_text(&s.parts);
    // Found again by the anchor only in the conversation the key names (a send elsewhere keeps
    // the indexed key).
    let conv = s.conv.to_string();
    let anchored = agent_core::chat_state::chunk_anchor(s.key).is_some_and(|(c, _)| c == conv);
    let mut stmts = Vec::new();
    if !s.unrecorded {
        stmts.push(db.stmt(
            "UPDATE outbox SET status = 'sent', tg_message_id = ?2, plain = ?3, sent_at = ?4, error = NULL WHERE key = ?1",
            args![s.key, s.message_id, s.plain, now],
        )?);
    }
    // A turn's text chunk in a conversation without a topic is one row of its answers
    // (migration 0041), placed after the conversation's newest message; any other send, a bot
    // message. The same arguments for both (`?11` is unused by the first).
    let apart = anchored && s.unrecorded && s.message_id.is_some() && s.conv.thread_id.is_none() && s.parts.iter().all(|p| matches!(p, Part::Text { .. }));
    let sql = if apart { INSERT_ANSWER } else { INSERT_BOT_MESSAGE };
    stmts.push(db.stmt(
        sql,
        args![
            conv,
            s.conv.chat_id,
            s.message_id,
            bot.id,
            bot.name.clone(),
            bot.username.clone(),
            serde_json::to_string(&s.parts).unwrap_or_default(),
            text,
            now / 1000,
            s.turn_id,
            s.unrecorded.then_some(s.key).filter(|_| !anchored),
            s.unrecorded.then_some(s.key).filter(|_| anchored)
        ],
    )?);
    db.batch(stmts).await?;
    Ok(())
}

/// Marks an outbox row failed.
pub async fn record_failed(db: &Db, key: &str, error: &str) -> Result<()> {
    db.run("UPDATE outbox SET status = 'failed', error = ?2 WHERE key = ?1", args![key, error]).await?;
    Ok(())
}

/// Marks an outbox row sent without storing a bot message: an ephemeral answer (Bot API 10.2)
/// never enters the chat's history. Its `tg_message_id` is Telegram's 0 ("0 for ephemeral
/// messages"): no message of the chat can be found by it.
pub async fn record_sent_unstored(db: &Db, key: &str, message_id: i64, now: i64) -> Result<()> {
    db.run("UPDATE outbox SET status = 'sent', tg_message_id = ?2, sent_at = ?3, error = NULL WHERE key = ?1", args![key, message_id, now]).await?;
    Ok(())
}

/// Marks a row sent with `body` in place of the request (guest mode, Bot API 10.0): a guest
/// query's placeholder keeps the returned `inline_message_id` (the edit that follows, and a
/// redelivered update, need it); a guest answer's edit keeps nothing (`""`). No message of any
/// chat is stored.
pub async fn record_sent_with_body(db: &Db, key: &str, body: &str, now: i64) -> Result<()> {
    db.run("UPDATE outbox SET status = 'sent', tg_message_id = 0, body = ?2, sent_at = ?3, error = NULL WHERE key = ?1", args![key, body, now]).await?;
    Ok(())
}

/// A guest query's placeholder that went out (its `inline_message_id` kept as the row's body)
/// and was never followed by a sent answer.
pub struct OpenGuest {
    /// `guest:<query_id>/placeholder`.
    pub step_key: String,
    pub chat_id: i64,
    pub body: String,
}

/// Guest placeholders sent between `since` and `until` (ms) whose answer was never sent
/// (a crash before the job was queued, a job lost or dead-lettered), at most `limit`; an
/// answer Telegram refused for good (`failed`) is not reopened.
pub async fn open_guests(db: &Db, since: i64, until: i64, limit: u32) -> Result<Vec<OpenGuest>> {
    // Read as JSON values (no row type of its own: less wasm).
    let found: Vec<serde_json::Value> = db.all(
        "SELECT p.step_key, p.chat_id, p.body FROM outbox p
          WHERE p.key >= 'guest:' AND p.key < 'guest;' AND p.key LIKE 'guest:%/placeholder/0' AND p.status = 'sent' AND p.body <> ''
            AND p.created_at >= ?1 AND p.created_at < ?2
            AND NOT EXISTS (SELECT 1 FROM outbox a WHERE a.key = substr(p.step_key, 1, length(p.step_key) - length('placeholder')) || 'answer/0'
                              AND a.status IN ('sent', 'failed'))
          LIMIT ?3",
        args![since, until, limit],
    )
    .await?;
    let text = |r: &serde_json::Value, k: &str| r.get(k).and_then(serde_json::Value::as_str).unwrap_or_default().to_string();
    Ok(found
        .iter()
        .map(|r| OpenGuest { step_key: text(r, "step_key"), chat_id: r.get("chat_id").and_then(serde_json::Value::as_i64).unwrap_or(0), body: text(r, "body") })
        .collect())
}
