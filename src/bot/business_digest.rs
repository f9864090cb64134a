//! `/business digest` at the edge (decisions in `agent_core::business::digest`): what the
//! owner missed in their business chats since the last digest, summed up by the model (no
//! function declared; the owner pays, as for a suggestion) and sent in their private chat
//! outside the conversation (like a suggestion: not in the history their later turns read, so a
//! contact's words never steer those turns, and never a memory). The digest's end is noted
//! once it is sent: a digest that failed leaves the same stretch for the next one, and one cut
//! short by a crash between the send and the note may come twice.

use super::business::{owner_pays, serves};
use crate::config::{now_ms, Ctx};
use crate::storage::business as rows;
use agent_core::business::digest;
use agent_core::conversation::InboundMessage;
use serde_json::json;

/// Runs `/business digest` in the owner's private chat and sends its answer. Returns what was
/// sent (for logs and tests).
pub async fn run(ctx: &Ctx, m: &InboundMessage) -> String {
    let owner = m.chat.id;
    let (html, done) = match make(ctx, m).await {
        Ok(made) => made,
        Err(e) => {
            worker::console_error!("business digest failed: {e}");
            (digest::FAILED.to_string(), false)
        }
    };
    // In the private chat's main thread, as suggestions are (a topic's command too).
    let body = json!({ "chat_id": owner, "text": html, "parse_mode": "HTML", "link_preview_options": {"is_disabled": true} });
    match ctx.telegram().message_call("sendMessage", &body).await {
        Ok(_) if done => {
            if let Err(e) = rows::digested(&ctx.db(), owner, &m.speaker.name, now_ms()).await {
                worker::console_error!("business digest sent, its end not noted ({e}): the next one covers it again");
            }
        }
        Ok(_) => {}
        Err(e) => worker::console_warn!("business digest not sent ({e})"),
    }
    html
}

/// The digest's HTML, and whether it covers the stretch (so its end is noted once sent).
async fn make(ctx: &Ctx, m: &InboundMessage) -> worker::Result<(String, bool)> {
    let db = ctx.db();
    let owner = m.chat.id;
    let Some(row) = rows::of_owner(&db, owner).await?.filter(|r| serves(ctx, r)) else {
        return Ok((escape(agent_core::business::NOT_CONNECTED), false));
    };
    let since = digest::since(rows::digest_at(&db, owner).await?, now_ms());
    let said = rows::said_since(&db, owner, since).await?;
    let waiting: Vec<i64> = rows::open_of_owner(&db, owner).await?.iter().map(|s| s.contact_id).collect();
    let chats = digest::chats(&said, &waiting);
    if chats.is_empty() {
        return Ok((digest::NOTHING_NEW.to_string(), true));
    }
    if !owner_pays(ctx, row.user_chat_id, owner, &format!("business-digest:{owner}:{}", m.message_id)).await? {
        return Ok((digest::NO_BUDGET.to_string(), false));
    }
    let name = if row.owner_name.is_empty() { m.speaker.name.clone() } else { row.owner_name.clone() };
    let request = digest::request(&name, owner, &chats);
    Ok(match super::one_shot::ask(ctx, &request, row.user_chat_id, "business").await {
        Ok(Some(text)) => match digest::html(&text, chats.len()) {
            Some(html) => (html, true),
            None => (digest::FAILED.to_string(), false),
        },
        Ok(None) => (digest::FAILED.to_string(), false),
        Err(e) => {
            worker::console_warn!("business digest: the model failed ({e})");
            (digest::FAILED.to_string(), false)
        }
    })
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
