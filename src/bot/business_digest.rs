//! The Telegram Business digest at the edge (decisions in `agent_core::business::digest`): what
//! the owner missed in their business chats since the last digest, summed up by the model (no
//! function declared; the owner pays, as for a suggestion) and sent in their private chat
//! outside the conversation (like a suggestion: not in the history their later turns read, so a
//! contact's words never steer those turns, and never a memory). Asked with `/business digest`
//! ([`command`]) or in the owner's own words (the model's `business_digest` function,
//! [`for_model`]: the turn learns only whether it went). The digest's end is noted once it is
//! sent: a digest that failed leaves the same stretch for the next one (a turn retried after it
//! went finds nothing new), and one cut short by a crash between the send and the note may
//! come twice.

use super::business::{owner_pays, serves};
use crate::config::{now_ms, Ctx};
use crate::storage::business as rows;
use agent_core::business::digest;
use agent_core::conversation::InboundMessage;
use serde_json::{json, Value};

/// What a digest came to.
enum Made {
    /// The digest (HTML) of this many chats.
    Digest(String, usize),
    /// Nothing new since the last digest (its end may move to now).
    NothingNew,
    /// Not made (no connection, no budget, the model failed): why, in a line.
    Not(&'static str),
}

/// `/business digest` in the owner's private chat: the digest or why there is none, sent.
/// Returns what was sent (for logs and tests).
pub async fn command(ctx: &Ctx, m: &InboundMessage) -> String {
    let made = make(ctx, m.chat.id, &m.speaker.name, &format!("business-digest:{}:{}", m.chat.id, m.message_id)).await;
    let (html, covers) = match made {
        Made::Digest(html, _) => (html, true),
        Made::NothingNew => (digest::NOTHING_NEW.to_string(), true),
        Made::Not(why) => (escape(why), false),
    };
    send(ctx, m.chat.id, &m.speaker.name, &html, covers).await;
    html
}

/// The model's `business_digest` in the owner's private chat (`turn_id`: the turn, which pays
/// once): the digest is sent as its own message; the model reads only whether it went.
pub async fn for_model(ctx: &Ctx, owner: i64, name: &str, turn_id: &str) -> Value {
    match make(ctx, owner, name, &format!("business-digest:{owner}:{turn_id}")).await {
        Made::Digest(html, chats) => {
            if send(ctx, owner, name, &html, true).await {
                json!({"sent": true, "chats": chats, "note": "the digest went to the person as its own message; do not retell it"})
            } else {
                json!({"sent": false, "error": "Telegram did not take the digest; say so briefly"})
            }
        }
        Made::NothingNew => json!({"sent": false, "status": digest::NOTHING_NEW}),
        Made::Not(why) => json!({"sent": false, "status": why}),
    }
}

/// Sends the owner a digest's HTML (outside the conversation, in the private chat's main
/// thread, as suggestions are); notes its end when it `covers` the stretch. Whether it went.
async fn send(ctx: &Ctx, owner: i64, name: &str, html: &str, covers: bool) -> bool {
    let body = json!({ "chat_id": owner, "text": html, "parse_mode": "HTML", "link_preview_options": {"is_disabled": true} });
    match ctx.telegram().message_call("sendMessage", &body).await {
        Ok(_) => {
            if covers {
                if let Err(e) = rows::digested(&ctx.db(), owner, name, now_ms()).await {
                    worker::console_error!("business digest sent, its end not noted ({e}): the next one covers it again");
                }
            }
            true
        }
        Err(e) => {
            worker::console_warn!("business digest not sent ({e})");
            false
        }
    }
}

async fn make(ctx: &Ctx, owner: i64, name: &str, charge_key: &str) -> Made {
    match try_make(ctx, owner, name, charge_key).await {
        Ok(made) => made,
        Err(e) => {
            worker::console_error!("business digest failed: {e}");
            Made::Not(digest::FAILED)
        }
    }
}

async fn try_make(ctx: &Ctx, owner: i64, name: &str, charge_key: &str) -> worker::Result<Made> {
    let db = ctx.db();
    let Some(row) = rows::of_owner(&db, owner).await?.filter(|r| serves(ctx, r)) else {
        return Ok(Made::Not(agent_core::business::NOT_CONNECTED));
    };
    let since = digest::since(rows::digest_at(&db, owner).await?, now_ms());
    let said = rows::said_since(&db, owner, since).await?;
    let waiting: Vec<i64> = rows::open_of_owner(&db, owner).await?.iter().map(|s| s.contact_id).collect();
    let chats = digest::chats(&said, &waiting);
    if chats.is_empty() {
        return Ok(Made::NothingNew);
    }
    if !owner_pays(ctx, row.user_chat_id, owner, charge_key).await? {
        return Ok(Made::Not(digest::NO_BUDGET));
    }
    let name = if row.owner_name.is_empty() { name } else { row.owner_name.as_str() };
    let request = digest::request(name, owner, &chats);
    Ok(match super::one_shot::ask(ctx, &request, row.user_chat_id, "business").await {
        Ok(Some(text)) => match digest::html(&text, chats.len()) {
            Some(html) => Made::Digest(html, chats.len()),
            None => Made::Not(digest::FAILED),
        },
        Ok(None) => Made::Not(digest::FAILED),
        Err(e) => {
            worker::console_warn!("business digest: the model failed ({e})");
            Made::Not(digest::FAILED)
        }
    })
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
