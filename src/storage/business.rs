//! Telegram Business connections and owners' modes (migration 0039; `bot::business`).

//!
//! Rows are read as JSON values, field by field (`int`, `text`): one deserializer for every
//! query here instead of one per row type (the wasm's size, issue 49).

use crate::args;
use crate::storage::{rows, Db};
use agent_core::telegram::{BusinessBotRights, BusinessConnection};
use serde_json::Value;
use worker::Result;

fn int(v: &Value, k: &str) -> Option<i64> {
    v.get(k).and_then(Value::as_i64)
}

fn text(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or_default().to_string()
}

/// The first row of a query, as JSON.
async fn first(db: &Db, sql: &str, args: Vec<crate::storage::Arg>) -> Result<Option<Value>> {
    Ok(db.all::<Value>(sql, args).await?.into_iter().next())
}

/// A stored connection, with its owner's stored access level (`users.access`).
#[derive(Debug, Clone)]
pub struct ConnRow {
    pub id: String,
    pub owner_id: i64,
    pub owner_name: String,
    pub user_chat_id: i64,
    rights: BusinessBotRights,
    enabled: bool,
    pub refused_told_at: Option<i64>,
    pub owner_access: Option<String>,
}

impl ConnRow {
    fn of(v: &Value) -> ConnRow {
        let flag = |k: &str| int(v, k).unwrap_or(0) != 0;
        ConnRow {
            id: text(v, "id"),
            owner_id: int(v, "owner_id").unwrap_or(0),
            owner_name: text(v, "owner_name"),
            user_chat_id: int(v, "user_chat_id").unwrap_or(0),
            rights: BusinessBotRights { can_reply: flag("can_reply"), can_read_messages: flag("can_read_messages") },
            enabled: flag("is_enabled"),
            refused_told_at: int(v, "refused_told_at"),
            owner_access: v.get("owner_access").and_then(Value::as_str).map(str::to_string),
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    pub fn rights(&self) -> BusinessBotRights {
        self.rights
    }
}

const SELECT: &str = "SELECT c.id, c.owner_id, c.owner_name, c.user_chat_id, c.is_enabled, c.refused_told_at,
       json_extract(c.rights, '$.can_reply') AS can_reply, json_extract(c.rights, '$.can_read_messages') AS can_read_messages,
       (SELECT access FROM users WHERE user_id = c.owner_id) AS owner_access
     FROM business_connections c";

/// Keeps a connection as Telegram last said it: an older update (by `update_id`; 0 for a
/// lookup, which only ever adds a connection) changes nothing. Returns the row as stored.
pub async fn record(db: &Db, c: &BusinessConnection, update_id: i64, now: i64) -> Result<Option<ConnRow>> {
    let r = c.rights();
    let rights = format!("{{\"can_reply\":{},\"can_read_messages\":{}}}", r.can_reply, r.can_read_messages);
    let r = db
        .batch(vec![
            db.stmt(
                "INSERT INTO business_connections (id, owner_id, user_chat_id, rights, is_enabled, date, updated_at, owner_name, update_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (id) DO UPDATE SET owner_id = excluded.owner_id, user_chat_id = excluded.user_chat_id, owner_name = excluded.owner_name,
                   rights = excluded.rights, is_enabled = excluded.is_enabled, date = excluded.date, updated_at = excluded.updated_at,
                   update_id = excluded.update_id
                 WHERE excluded.update_id > business_connections.update_id",
                args![c.id.as_str(), c.user.id, c.user_chat_id, rights, c.is_enabled as i64, c.date, now, c.user.display_name(), update_id],
            )?,
            db.stmt(&format!("{SELECT} WHERE c.id = ?1"), args![c.id.as_str()])?,
        ])
        .await?;
    Ok(r.get(1).map(rows::<Value>).transpose()?.and_then(|v| v.first().map(ConnRow::of)))
}

/// A connection by its id, if the bot has heard of it.
pub async fn get(db: &Db, id: &str) -> Result<Option<ConnRow>> {
    Ok(first(db, &format!("{SELECT} WHERE c.id = ?1"), args![id]).await?.as_ref().map(ConnRow::of))
}

/// An owner's newest connection.
pub async fn of_owner(db: &Db, owner_id: i64) -> Result<Option<ConnRow>> {
    Ok(first(db, &format!("{SELECT} WHERE c.owner_id = ?1 ORDER BY c.date DESC LIMIT 1"), args![owner_id]).await?.as_ref().map(ConnRow::of))
}

/// The refused owner was told why (the first time counts).
pub async fn told_refused(db: &Db, id: &str, now: i64) -> Result<()> {
    db.run("UPDATE business_connections SET refused_told_at = ?2 WHERE id = ?1 AND refused_told_at IS NULL", args![id, now]).await?;
    Ok(())
}

/// The owner's mode as stored (`None`: never set).
pub async fn mode(db: &Db, user_id: i64) -> Result<Option<String>> {
    Ok(settings(db, user_id).await?.0)
}

/// The owner's mode and business notes as stored.
pub async fn settings(db: &Db, user_id: i64) -> Result<(Option<String>, Option<String>)> {
    let row = first(db, "SELECT business_mode, business_notes FROM users WHERE user_id = ?1", args![user_id]).await?;
    let get = |k: &str| row.as_ref().and_then(|r| r.get(k)).and_then(Value::as_str).map(str::to_string);
    Ok((get("business_mode"), get("business_notes")))
}

/// Records `/business notes …` (`None` clears them).
pub async fn set_notes(db: &Db, user_id: i64, name: &str, notes: Option<&str>, now: i64) -> Result<()> {
    set_own(db, "business_notes", user_id, name, notes.into(), now).await
}

/// Records `/business <mode>`.
pub async fn set_mode(db: &Db, user_id: i64, name: &str, mode: &str, now: i64) -> Result<()> {
    set_own(db, "business_mode", user_id, name, mode.into(), now).await
}

/// One of the owner's Business settings (`column`: one of this file's two), in their row; a
/// person not known yet gets a row named as given.
async fn set_own(db: &Db, column: &'static str, user_id: i64, name: &str, value: crate::storage::Arg, now: i64) -> Result<()> {
    let sql = format!(
        "INSERT INTO users (user_id, name, {column}, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (user_id) DO UPDATE SET {column} = excluded.{column}, updated_at = excluded.updated_at"
    );
    db.run(&sql, vec![user_id.into(), name.into(), value, now.into()]).await?;
    Ok(())
}

/// Where the owner's last digest ended (ms), and the request whose answer went last.
pub async fn digest_state(db: &Db, user_id: i64) -> Result<(Option<i64>, Option<String>)> {
    let row = first(db, "SELECT business_digest_at, business_digest_key FROM users WHERE user_id = ?1", args![user_id]).await?;
    Ok((row.as_ref().and_then(|r| int(r, "business_digest_at")), row.as_ref().and_then(|r| r.get("business_digest_key")?.as_str().map(str::to_string))))
}

/// Records that the answer to request `key` went out and, for a digest, where it ended (`at`,
/// ms; `None` keeps the last end; never moved back by a digest that started earlier), in one
/// write.
pub async fn digested(db: &Db, user_id: i64, name: &str, key: &str, at: Option<i64>, now: i64) -> Result<()> {
    db.run(
        "INSERT INTO users (user_id, name, business_digest_key, business_digest_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (user_id) DO UPDATE SET business_digest_key = excluded.business_digest_key,
           business_digest_at = CASE WHEN excluded.business_digest_at IS NULL THEN users.business_digest_at
             ELSE MAX(excluded.business_digest_at, COALESCE(users.business_digest_at, 0)) END,
           updated_at = excluded.updated_at",
        args![user_id, name, key, at, now],
    )
    .await?;
    Ok(())
}

/// The most business messages one digest reads (the newest).
const DIGEST_READ: i64 = 1000;

/// The owner's business messages kept from `since` to before `until` (ms; the previous
/// release's rows by their date), oldest first: at most the newest `DIGEST_READ`.
pub async fn said_between(db: &Db, owner: i64, since: i64, until: i64) -> Result<Vec<agent_core::business::digest::Said>> {
    use agent_core::business::{digest::Said, suggest::Side};
    let v: Vec<Value> = db
        .all(
            "SELECT contact_id, side, name, text FROM business_messages
             WHERE owner_id = ?1 AND ((kept_at >= ?2 AND kept_at < ?3) OR (kept_at IS NULL AND date >= ?2 / 1000 AND date < ?3 / 1000))
             ORDER BY COALESCE(kept_at, date * 1000) DESC, message_id DESC LIMIT ?4",
            args![owner, since, until, DIGEST_READ],
        )
        .await?;
    Ok(v.iter().rev().map(|r| Said { contact_id: int(r, "contact_id").unwrap_or(0), name: text(r, "name"), side: Side::parse(&text(r, "side")), text: text(r, "text") }).collect())
}

// ---- business chats: messages and suggestions (draft mode) ----

/// A business message to keep.
pub struct Stored<'a> {
    pub owner: i64,
    pub contact: i64,
    pub message_id: i64,
    pub side: &'a str,
    pub name: &'a str,
    pub text: &'a str,
    pub date: i64,
}

/// The most old rows of one owner a new business message prunes.
const PRUNE_PER_MESSAGE: i64 = 200;

/// Keeps a business message at `now` (ms; a redelivery writes nothing) and, in the same round
/// trip, prunes the owner's business messages kept before `cutoff` (ms; `RETENTION_DAYS`;
/// the previous release's rows by their date) and their settled suggestions made before it,
/// a bounded batch each (through the owner's `kept_at` index).
pub async fn store_message(db: &Db, m: &Stored<'_>, now: i64, cutoff: Option<i64>) -> Result<()> {
    let mut stmts = vec![db.stmt(
        "INSERT INTO business_messages (owner_id, contact_id, message_id, side, name, text, date, kept_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (owner_id, contact_id, message_id) DO NOTHING",
        args![m.owner, m.contact, m.message_id, m.side, m.name, m.text, m.date, now],
    )?];
    if let Some(cutoff) = cutoff {
        stmts.push(db.stmt(
            "DELETE FROM business_messages WHERE owner_id = ?1 AND (contact_id, message_id) IN
               (SELECT contact_id, message_id FROM business_messages
                WHERE owner_id = ?1 AND (kept_at < ?2 OR (kept_at IS NULL AND date < ?2 / 1000)) LIMIT ?3)",
            args![m.owner, cutoff, PRUNE_PER_MESSAGE],
        )?);
        stmts.push(db.stmt(
            "DELETE FROM business_suggestions WHERE id IN (SELECT id FROM business_suggestions
               WHERE owner_id = ?1 AND status NOT IN ('pending', 'sending') AND created_at < ?2 LIMIT ?3)",
            args![m.owner, cutoff, PRUNE_PER_MESSAGE],
        )?);
    }
    db.batch(stmts).await?;
    Ok(())
}

/// An edited business message's new text (an unknown message is not added).
pub async fn edit_message(db: &Db, owner: i64, contact: i64, message_id: i64, text: &str) -> Result<()> {
    db.run(
        "UPDATE business_messages SET text = ?4 WHERE owner_id = ?1 AND contact_id = ?2 AND message_id = ?3 AND text IS NOT ?4",
        args![owner, contact, message_id, text],
    )
    .await?;
    Ok(())
}

/// Deleted business messages, gone from what the model reads.
pub async fn delete_messages(db: &Db, owner: i64, contact: i64, ids: &[i64]) -> Result<()> {
    let ids = serde_json::to_string(ids).unwrap_or_else(|_| "[]".into());
    db.run(
        "DELETE FROM business_messages WHERE owner_id = ?1 AND contact_id = ?2 AND message_id IN (SELECT value FROM json_each(?3))",
        args![owner, contact, ids],
    )
    .await?;
    Ok(())
}

#[derive(Debug, Clone)]
pub struct LineRow {
    pub message_id: i64,
    /// When it was sent (seconds).
    pub date: i64,
    pub side: String,
    pub name: String,
    pub text: String,
}

/// The chat's newest `limit` messages, oldest first.
pub async fn lines(db: &Db, owner: i64, contact: i64, limit: usize) -> Result<Vec<LineRow>> {
    let v: Vec<Value> = db
        .all(
            "SELECT message_id, date, side, name, text FROM business_messages WHERE owner_id = ?1 AND contact_id = ?2
             ORDER BY message_id DESC LIMIT ?3",
            args![owner, contact, limit as i64],
        )
        .await?;
    Ok(v.iter().rev().map(|r| LineRow { message_id: int(r, "message_id").unwrap_or(0), date: int(r, "date").unwrap_or(0), side: text(r, "side"), name: text(r, "name"), text: text(r, "text") }).collect())
}

#[derive(Debug, Clone)]
pub struct Suggestion {
    pub id: i64,
    pub owner_id: i64,
    pub contact_id: i64,
    pub connection_id: String,
    pub contact_name: String,
    pub quoted: String,
    pub html: String,
    pub status: String,
    pub shown_message_id: Option<i64>,
    /// When Telegram stops letting the bot reply (seconds; `suggest::window_ends`).
    pub window_ends: i64,
}

impl Suggestion {
    fn of(v: &Value) -> Suggestion {
        Suggestion {
            id: int(v, "id").unwrap_or(0),
            owner_id: int(v, "owner_id").unwrap_or(0),
            contact_id: int(v, "contact_id").unwrap_or(0),
            connection_id: text(v, "connection_id"),
            contact_name: text(v, "contact_name"),
            quoted: text(v, "quoted"),
            html: text(v, "html"),
            status: text(v, "status"),
            shown_message_id: int(v, "shown_message_id"),
            window_ends: int(v, "window_ends").unwrap_or_else(|| agent_core::business::suggest::window_ends(None, int(v, "created_at").unwrap_or(0))),
        }
    }
}

const SUGGESTION: &str = "SELECT id, owner_id, contact_id, connection_id, contact_name, quoted, html, status, shown_message_id, created_at,
       window_ends FROM business_suggestions";

async fn suggestions(db: &Db, sql: &str, args: Vec<crate::storage::Arg>) -> Result<Vec<Suggestion>> {
    Ok(db.all::<Value>(sql, args).await?.iter().map(Suggestion::of).collect())
}

pub async fn suggestion(db: &Db, id: i64) -> Result<Option<Suggestion>> {
    Ok(suggestions(db, &format!("{SUGGESTION} WHERE id = ?1"), args![id]).await?.into_iter().next())
}

/// The burst's suggestion, if one was drafted.
pub async fn suggestion_for(db: &Db, owner: i64, contact: i64, upto: i64) -> Result<Option<Suggestion>> {
    Ok(suggestions(db, &format!("{SUGGESTION} WHERE owner_id = ?1 AND contact_id = ?2 AND upto = ?3"), args![owner, contact, upto]).await?.into_iter().next())
}

/// A new suggestion for the burst (a second draft of the same burst keeps the first); the row.
pub struct NewSuggestion<'a> {
    pub owner: i64,
    pub contact: i64,
    pub connection: &'a str,
    pub upto: i64,
    pub contact_name: &'a str,
    pub quoted: &'a str,
    pub html: &'a str,
    /// `suggest::window_ends` of the burst.
    pub window_ends: i64,
}

pub async fn add_suggestion(db: &Db, s: &NewSuggestion<'_>, now: i64) -> Result<Option<Suggestion>> {
    let r = db
        .batch(vec![
            db.stmt(
                "INSERT INTO business_suggestions (owner_id, contact_id, connection_id, upto, contact_name, quoted, html, created_at, updated_at, window_ends)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9) ON CONFLICT (owner_id, contact_id, upto) DO NOTHING",
                args![s.owner, s.contact, s.connection, s.upto, s.contact_name, s.quoted, s.html, now, s.window_ends],
            )?,
            db.stmt(&format!("{SUGGESTION} WHERE owner_id = ?1 AND contact_id = ?2 AND upto = ?3"), args![s.owner, s.contact, s.upto])?,
        ])
        .await?;
    Ok(r.get(1).map(rows::<Value>).transpose()?.and_then(|v| v.first().map(Suggestion::of)))
}

/// The owner's Business model calls since `since`, answered or not (what `BUSINESS_DAILY_LIMIT`
/// counts): recorded under the owner's private chat (`bot::one_shot`).
pub async fn calls_since(db: &Db, owner_chat: i64, since: i64) -> Result<i64> {
    let n = first(
        db,
        "SELECT COUNT(*) AS n FROM model_calls WHERE chat_id = ?1 AND created_at >= ?2 AND purpose = 'business'",
        args![owner_chat, since],
    )
    .await?;
    Ok(n.and_then(|n| int(&n, "n")).unwrap_or(0))
}

/// A connection turned off or removed: the owner's business chats are forgotten (the bot no
/// longer sees them; nothing of a contact is kept past it).
pub async fn forget_owner(db: &Db, owner: i64) -> Result<()> {
    db.batch(vec![
        db.stmt("DELETE FROM business_messages WHERE owner_id = ?1", args![owner])?,
        db.stmt("DELETE FROM business_suggestions WHERE owner_id = ?1 AND status NOT IN ('pending', 'sending')", args![owner])?,
    ])
    .await?;
    Ok(())
}

/// Claims showing a suggestion to the owner: `shown_message_id` becomes `-now` (in flight)
/// when it was never shown and no claim newer than `stale` is in flight.
pub async fn claim_show(db: &Db, id: i64, now: i64, stale: i64) -> Result<bool> {
    let n = db
        .run(
            "UPDATE business_suggestions SET shown_message_id = -?2
             WHERE id = ?1 AND (shown_message_id IS NULL OR (shown_message_id < 0 AND -shown_message_id < ?3))",
            args![id, now, stale],
        )
        .await?;
    Ok(n == 1)
}

/// The show failed: its claim is given up.
pub async fn release_show(db: &Db, id: i64, now: i64) -> Result<()> {
    db.run("UPDATE business_suggestions SET shown_message_id = NULL WHERE id = ?1 AND shown_message_id = -?2", args![id, now]).await?;
    Ok(())
}

/// The message that shows the suggestion to the owner.
pub async fn shown(db: &Db, id: i64, message_id: i64) -> Result<()> {
    db.run("UPDATE business_suggestions SET shown_message_id = ?2 WHERE id = ?1", args![id, message_id]).await?;
    Ok(())
}

/// The chat's open suggestions other than `except` (pending ones; a claimed Send is left to finish).
pub async fn open_in_chat(db: &Db, owner: i64, contact: i64, except: i64) -> Result<Vec<Suggestion>> {
    suggestions(db, &format!("{SUGGESTION} WHERE owner_id = ?1 AND contact_id = ?2 AND status = 'pending' AND id != ?3"), args![owner, contact, except]).await
}

/// Every open suggestion of an owner (a connection turned off withdraws them).
pub async fn open_of_owner(db: &Db, owner: i64) -> Result<Vec<Suggestion>> {
    suggestions(db, &format!("{SUGGESTION} WHERE owner_id = ?1 AND status = 'pending'"), args![owner]).await
}

/// Open suggestions whose 24 hours have passed (`window_ends` before `now_secs`; a row of the
/// previous release by its `created_at`), at most `limit`, through the index of open ones:
/// the cron withdraws them.
pub async fn past_window(db: &Db, now_secs: i64, limit: i64) -> Result<Vec<Suggestion>> {
    suggestions(
        db,
        &format!("{SUGGESTION} WHERE status = 'pending' AND (window_ends < ?1 OR (window_ends IS NULL AND created_at < ?2)) LIMIT ?3"),
        args![now_secs, (now_secs - agent_core::business::suggest::WINDOW_SECS) * 1000, limit],
    )
    .await
}

/// The owner's suggestion shown as `message_id` in their private chat, if any.
pub async fn shown_as(db: &Db, owner: i64, message_id: i64) -> Result<Option<Suggestion>> {
    Ok(suggestions(db, &format!("{SUGGESTION} WHERE owner_id = ?1 AND shown_message_id = ?2"), args![owner, message_id]).await?.into_iter().next())
}

/// The owner's own text for an open suggestion (whether it changed it: open, and not that
/// text already).
pub async fn correct(db: &Db, id: i64, html: &str, now: i64) -> Result<bool> {
    let n = db.run("UPDATE business_suggestions SET html = ?2, updated_at = ?3 WHERE id = ?1 AND status = 'pending' AND html IS NOT ?2", args![id, html, now]).await?;
    Ok(n == 1)
}

/// Moves a suggestion from `from` to `to`; whether this call moved it.
pub async fn settle(db: &Db, id: i64, from: &str, to: &str, now: i64) -> Result<bool> {
    let n = db
        .run("UPDATE business_suggestions SET status = ?3, updated_at = ?4 WHERE id = ?1 AND status = ?2", args![id, from, to, now])
        .await?;
    Ok(n == 1)
}

/// Claims the Send of a suggestion: open, or a claim older than `stale` (a crash while it was
/// at Telegram). The text to send (as it is at the claim: a correction before it counts) when
/// this press holds it.
pub async fn claim_send(db: &Db, id: i64, now: i64, stale: i64) -> Result<Option<String>> {
    let row = first(
        db,
        "UPDATE business_suggestions SET status = 'sending', updated_at = ?2
         WHERE id = ?1 AND (status = 'pending' OR (status = 'sending' AND updated_at < ?3)) RETURNING html",
        args![id, now, stale],
    )
    .await?;
    Ok(row.map(|r| text(&r, "html")))
}

/// A Send went out: the suggestion is sent, and the reply is in the chat's messages, in one batch.
pub async fn sent(db: &Db, s: &Suggestion, message_id: i64, text: &str, now: i64) -> Result<()> {
    db.batch(vec![
        db.stmt(
            "UPDATE business_suggestions SET status = 'sent', sent_message_id = ?2, updated_at = ?3 WHERE id = ?1",
            args![s.id, message_id, now],
        )?,
        db.stmt(
            "INSERT INTO business_messages (owner_id, contact_id, message_id, side, name, text, date, kept_at) VALUES (?1, ?2, ?3, 'bot', '', ?4, ?5, ?6)
             ON CONFLICT (owner_id, contact_id, message_id) DO NOTHING",
            args![s.owner_id, s.contact_id, message_id, text, now / 1000, now],
        )?,
    ])
    .await?;
    Ok(())
}
