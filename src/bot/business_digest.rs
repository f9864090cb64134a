//! The Telegram Business digest at the edge (decisions in `agent_core::business::digest`): what
//! the owner missed in their business chats since the last digest, summed up by the model (no
//! function declared; the owner pays, as for a suggestion) and sent in their private chat
//! outside the conversation (like a suggestion: not in the history their later turns read, so a
//! contact's words never steer those turns, and never a memory). Asked with `/business digest`
//! ([`command`]) or in the owner's own words (the model's `business_digest` function,
//! [`for_model`]: the turn learns only whether it went).
//!
//! A digest covers the messages the bot kept from the last one's end to when it started (by
//! the bot's clock, `kept_at`: a message Telegram delivers late is in the next digest). Once its answer is
//! sent, the request's key (`cmd:<message id>` or the turn's id) and the digest's end are noted
//! in one write: a replayed request, or a turn retried after it went, sends nothing again; a
//! digest that failed leaves the same stretch for the next one; only a crash between the send
//! and the note sends it twice.

use super::business::{owner_pays, serves};
use crate::config::{now_ms, Ctx};
use crate::storage::business as rows;
use agent_core::business::digest;
use agent_core::conversation::{ConvKey, InboundMessage};
use agent_core::format::markdown::escape;
use serde_json::{json, Value};

/// What a digest came to.
enum Made {
    /// The request's answer went out before (a replay).
    Sent,
    /// The digest (HTML) of this many chats, ending at this time (ms).
    Digest { html: String, chats: usize, until: i64 },
    /// Nothing new since the last digest, up to this time (ms).
    NothingNew(i64),
    /// Not made (no connection, no budget, the model failed): why, in a line.
    Not(&'static str),
}

/// `/business digest` in the owner's private chat (`conv`: where it was asked, its topic
/// included): the digest or why there is none, sent. Returns what was sent (for logs and tests).
pub async fn command(ctx: &Ctx, conv: &ConvKey, m: &InboundMessage) -> String {
    let key = format!("cmd:{}", m.message_id);
    let (html, until) = match make(ctx, conv.chat_id, &key, &format!("business-digest:{}:{}", conv.chat_id, m.message_id), true).await {
        Made::Sent => return String::new(),
        Made::Digest { html, until, .. } => (html, Some(until)),
        Made::NothingNew(until) => (digest::NOTHING_NEW.to_string(), Some(until)),
        Made::Not(why) => (escape(why), None),
    };
    if !send(ctx, conv, &m.speaker.name, &key, &html, until).await && until.is_some() {
        // Telegram refused the digest itself: the owner hears that it failed.
        send(ctx, conv, &m.speaker.name, &key, &escape(digest::FAILED), None).await;
    }
    html
}

/// The model's `business_digest` in the owner's private chat (`turn_id`: the turn, which pays
/// once and sends once): the digest is sent as its own message; the model reads only whether
/// it went.
pub async fn for_model(ctx: &Ctx, conv: &ConvKey, turn_id: &str, can_make: bool) -> Value {
    match make(ctx, conv.chat_id, turn_id, &format!("business-digest:{}:{turn_id}", conv.chat_id), can_make).await {
        Made::Sent => json!({"sent": true, "note": "the digest went to the person as its own message earlier in this turn; do not retell it"}),
        Made::Digest { html, chats, until } => {
            if send(ctx, conv, "", turn_id, &html, Some(until)).await {
                json!({"sent": true, "chats": chats, "note": "the digest went to the person as its own message; do not retell it"})
            } else {
                json!({"sent": false, "error": "Telegram did not take the digest; say so briefly"})
            }
        }
        Made::NothingNew(_) => json!({"sent": false, "status": digest::NOTHING_NEW}),
        Made::Not(why) => json!({"sent": false, "status": why}),
    }
}

/// Sends the owner a digest's HTML (outside the conversation, in the chat or topic it was asked
/// in), then notes the request's `key` and, for a digest, its end (`until`). Whether it went.
async fn send(ctx: &Ctx, conv: &ConvKey, name: &str, key: &str, html: &str, until: Option<i64>) -> bool {
    let mut body = json!({ "chat_id": conv.chat_id, "text": html, "parse_mode": "HTML", "link_preview_options": {"is_disabled": true} });
    if let Some(thread) = conv.thread_id {
        body["message_thread_id"] = json!(thread);
    }
    match ctx.telegram().message_call("sendMessage", &body).await {
        Ok(_) => {
            if let Err(e) = rows::digested(&ctx.db(), conv.chat_id, name, key, until, now_ms()).await {
                worker::console_error!("business digest sent, not noted ({e}): a replay sends it again");
            }
            true
        }
        Err(e) => {
            worker::console_warn!("business digest not sent ({e})");
            false
        }
    }
}

/// The digest for request `key`; `can_make`: the invocation has the subrequests for one (else
/// only whether the request's answer went already is looked up).
async fn make(ctx: &Ctx, owner: i64, key: &str, charge_key: &str, can_make: bool) -> Made {
    match try_make(ctx, owner, key, charge_key, can_make).await {
        Ok(made) => made,
        Err(e) => {
            worker::console_error!("business digest failed: {e}");
            Made::Not(digest::FAILED)
        }
    }
}

async fn try_make(ctx: &Ctx, owner: i64, key: &str, charge_key: &str, can_make: bool) -> worker::Result<Made> {
    let db = ctx.db();
    let until = now_ms();
    let (last, last_key) = rows::digest_state(&db, owner).await?;
    if last_key.as_deref() == Some(key) {
        return Ok(Made::Sent);
    }
    if !can_make {
        return Ok(Made::Not(NO_ROOM));
    }
    let Some(row) = rows::of_owner(&db, owner).await?.filter(|r| serves(ctx, r)) else {
        return Ok(Made::Not(agent_core::business::NOT_CONNECTED));
    };
    let said = rows::said_between(&db, owner, digest::since(last, until), until).await?;
    let waiting: Vec<i64> = rows::open_of_owner(&db, owner).await?.iter().map(|s| s.contact_id).collect();
    let (chats, more) = digest::chats(&said, &waiting);
    if chats.is_empty() {
        return Ok(Made::NothingNew(until));
    }
    if !owner_pays(ctx, row.user_chat_id, owner, charge_key).await? {
        return Ok(Made::Not(digest::NO_BUDGET));
    }
    let request = digest::request(&row.owner_name, owner, &chats);
    Ok(match super::one_shot::ask(ctx, &request, row.user_chat_id, "business").await {
        Ok(Some(text)) => match digest::html(&text, chats.len(), more) {
            Some(html) => Made::Digest { html, chats: chats.len(), until },
            None => Made::Not(digest::FAILED),
        },
        Ok(None) => Made::Not(digest::FAILED),
        Err(e) => {
            worker::console_warn!("business digest: the model failed ({e})");
            Made::Not(digest::FAILED)
        }
    })
}

/// What the model reads when the turn has no subrequests left for a digest.
const NO_ROOM: &str = "not available in this turn; tell the person to send /business digest";
