//! `POST /telegram/webhook`: check the secret, parse, record in D1 (deduplicated by the
//! message's own key, or a reaction's update id), hand reply-asking messages to the chat's Durable Object, answer 200 at once.
//!
//! Invariants (INVARIANTS.md): "Dedup", "The webhook never calls the model", "A refused
//! sender costs a counter, not rows", "Refused text stays out of every model call" (here:
//! `excluded` is set in the same insert), "Secrets are secrets".
//!
//! Also:
//! - A wrong or missing secret gets 401 and nothing is stored; a source with repeated
//!   failures gets 429 without its secret being looked at (`access::auth_*`).
//! - A configured secret too short to serve logs a line that names the secret (never its
//!   value).
//! - Past the refused sender's limit the counter itself stops moving.
//! - Malformed bodies and kinds the bot does not handle get 200 and nothing is stored, so
//!   Telegram never redelivers them.

use crate::config::auth::refuse;
use crate::config::{now_ms, Ctx};
use crate::outbound::objects::{self, Arrival};
use crate::storage;
use agent_core::conversation::{ConvKey, Inbound};
use agent_core::telegram::gating::{reply_trigger, BotIdentity, Trigger};
use agent_core::telegram::normalize::normalize;
use agent_core::access::policy::{admitted_at, admitted_by_level, RefusedLimit};
use agent_core::telegram::{parse_update, Update, UpdateKind, MAX_UPDATE_BYTES};
use worker::{Request, Response, Result};

pub const SECRET_HEADER: &str = "X-Telegram-Bot-Api-Secret-Token";

fn ok(ctx: &Ctx) -> Result<Response> {
    let mut resp = Response::from_json(&serde_json::json!({"ok": true}))?;
    // What this update cost (for benchmarks; harmless to Telegram).
    let h = resp.headers_mut();
    h.set("x-subrequests", &ctx.meter.count().to_string())?;
    h.set("x-d1-round-trips", &ctx.meter.d1_round_trips().to_string())?;
    h.set("x-d1-statements", &ctx.meter.d1_statements().to_string())?;
    Ok(resp)
}

/// Who the bot is: id from the token, username from config or getMe.
pub async fn bot_identity(ctx: &Ctx) -> BotIdentity {
    let mut bot = BotIdentity { id: ctx.secrets.bot_id(), username: ctx.cfg.bot_username.clone(), name: ctx.cfg.bot_name.clone() };
    if bot.username.is_empty() {
        match ctx.telegram().me().await {
            Ok(me) => bot.username = me.username.unwrap_or_default(),
            Err(e) => worker::console_warn!("getMe failed ({e}); mentions by @username are not recognised"),
        }
    }
    bot
}

/// The update in the request's body, at most `MAX_UPDATE_BYTES` of it; `None` (with a log line)
/// for a body over the cap, one that could not be read or one that does not parse: such an
/// update is acknowledged and ignored, as Telegram would redeliver anything else forever.
async fn read_update(req: &Request) -> Option<Update> {
    let body = match crate::outbound::net::request_body_within(req.inner(), MAX_UPDATE_BYTES).await {
        Ok(Some(body)) => body,
        Ok(None) => {
            worker::console_warn!("ignoring an update of more than {MAX_UPDATE_BYTES} bytes");
            return None;
        }
        Err(e) => {
            worker::console_warn!("ignoring an update whose body could not be read: {e}");
            return None;
        }
    };
    match parse_update(&body) {
        Ok(u) => Some(u),
        Err(e) => {
            worker::console_warn!("ignoring an update that does not parse: {e}");
            None
        }
    }
}

/// The refused-sender counter this update would move (only if the policy refuses it).
fn refused_limit(ctx: &Ctx, chat_id: i64, user_id: Option<i64>, admitted: (bool, bool, bool), now: i64) -> RefusedLimit {
    RefusedLimit::new(chat_id, user_id, admitted, now, ctx.cfg.refused_updates_per_hour)
}

/// Updates that do not go the way of people's messages: Telegram's Stop on a draft, and an
/// ephemeral message (only its sender and the bot see it: `bot::ephemeral`; never stored).
async fn special(ctx: &Ctx, update: &Update) -> Option<Result<Response>> {
    match &update.kind {
        UpdateKind::StoppedGeneration(stop) => Some(stopped(ctx, stop).await),
        // Guest mode (`bot::guest`): answered from the update alone, never stored as the
        // host chat's message.
        UpdateKind::GuestMessage(raw) => Some(match crate::bot::guest::handle(ctx, raw).await {
            Ok(()) => ok(ctx),
            Err(e) => Err(e),
        }),
        // Telegram Business (`bot::business`): connections, and the chats of the owners' contacts,
        // never stored as anyone's private chat with the bot.
        UpdateKind::BusinessConnection(_)
        | UpdateKind::BusinessMessage(_)
        | UpdateKind::EditedBusinessMessage(_)
        | UpdateKind::DeletedBusinessMessages(_) => {
            Some(match crate::bot::business::handle(ctx, update).await {
                Ok(()) => ok(ctx),
                Err(e) => Err(e),
            })
        }
        // A press on a suggestion's button (always answered).
        UpdateKind::CallbackQuery(q) => Some(match crate::bot::business::press(ctx, q).await {
            Ok(()) => ok(ctx),
            Err(e) => Err(e),
        }),
        // An edit of the owner's reply to a suggestion is its new text again, never a message
        // of the conversation.
        UpdateKind::EditedMessage(raw) if raw.reply_to_message.is_some() => match crate::bot::business::correction(ctx, raw).await {
            Ok(true) => Some(ok(ctx)),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        },
        UpdateKind::Message(raw) => {
            // The owner's reply to a suggestion is its new text (`bot::business::correction`),
            // not a turn.
            if raw.reply_to_message.is_some() {
                match crate::bot::business::correction(ctx, raw).await {
                    Ok(true) => return Some(ok(ctx)),
                    Ok(false) => {}
                    Err(e) => return Some(Err(e)),
                }
            }
            let ephemeral_id = raw.ephemeral_message_id?;
            if let Inbound::Message(m) = normalize(update) {
                ephemeral(ctx, update.update_id, &m, ephemeral_id, raw.date).await;
            }
            Some(ok(ctx))
        }
        _ => None,
    }
}

/// An ephemeral command, answered only to a sender the access policy admits by their stored
/// level: a refused one (a blocked person too) moves the refused sender's counter, as every
/// refused update does, and gets nothing; nothing else is written.
async fn ephemeral(ctx: &Ctx, update_id: i64, m: &agent_core::conversation::InboundMessage, ephemeral_id: i64, date: i64) {
    let admitted = admitted_by_level(&ctx.cfg, m.chat.kind, m.chat.id, m.speaker.user_id);
    let limit = refused_limit(ctx, m.chat.id, m.speaker.user_id, admitted, now_ms());
    match storage::messages::count_refused(&ctx.db(), m.speaker.user_id, admitted, &limit, now_ms()).await {
        Ok((level, _)) if admitted_at(admitted, level.as_deref()) => {
            let bot = bot_identity(ctx).await;
            crate::bot::ephemeral::handle(ctx, update_id, m, ephemeral_id, date, &bot.username).await;
        }
        Ok(_) => worker::console_log!("ignoring ephemeral message {ephemeral_id} in {}: a refused sender", m.chat.id),
        Err(e) => worker::console_warn!("ignoring ephemeral message {ephemeral_id} in {}: the sender's access was not read ({e})", m.chat.id),
    }
}

/// A private topic with an implicit name is named from its first message: called once the
/// sender is known to be admitted (a refused stranger causes no call per topic).
async fn name_topic(ctx: &Ctx, update: &Update) {
    if let UpdateKind::Message(raw) = &update.kind {
        if let Some((chat, thread, name)) = agent_core::telegram::drafts::implicit_topic_name(raw) {
            crate::bot::topics::name_once(ctx, chat, thread, &name).await;
        }
    }
}

/// Telegram's Stop on a draft (`stopped_message_generation`, Bot API 10.3): handed to the chat
/// object of the draft's conversation (a private chat, or its topic), which stops the turn
/// whose draft it is, if one runs. Nothing is stored: no person's words are in it. A Stop
/// that cannot be handed on is acknowledged (a press is worth no redelivery loop).
async fn stopped(ctx: &Ctx, stop: &agent_core::telegram::MessageGenerationStopped) -> Result<Response> {
    let conv = ConvKey { chat_id: stop.chat.id, thread_id: stop.message_thread_id };
    if stop.chat.id > 0 {
        if let Err(e) = objects::send_stop(ctx, &conv, stop.draft_id).await {
            worker::console_warn!("a Stop for {conv} could not reach its chat: {e}");
        }
    }
    ok(ctx)
}

/// A person's message: recorded (with the refused sender's limit), its private topic named once
/// the sender is admitted, and handed to the chat's object when it asks for a reply.
async fn message(ctx: &Ctx, update: &Update, m: agent_core::conversation::InboundMessage, now: i64) -> Result<Response> {
    let db = ctx.db();
    let admitted = admitted_by_level(&ctx.cfg, m.chat.kind, m.chat.id, m.speaker.user_id);
    let limit = refused_limit(ctx, m.chat.id, m.speaker.user_id, admitted, now);
    let recorded = storage::messages::record_message(&db, update.update_id, &m, false, admitted, &limit, now).await?;
    if recorded.over_limit {
        return ok(ctx);
    }
    if admitted_at(admitted, recorded.access.as_deref()) {
        name_topic(ctx, update).await;
    }
    let bot = bot_identity(ctx).await;
    // Crew mode: addressing one of the crew's own bots counts too.
    let trigger = match reply_trigger(&m, &bot, ctx.cfg.name_trigger) {
        Some(t) => Some(t),
        None => crate::bot::crew::trigger(ctx, &m).await,
    };
    if let Some(trigger) = trigger {
        let conv = m.conv;
        let arrival = Arrival {
            update_id: update.update_id,
            trigger,
            message: Some(m),
            reaction: None,
            access: recorded.access,
            bot_username: bot.username,
        };
        objects::send_arrival(ctx, &conv, arrival).await?;
    }
    ok(ctx)
}

pub async fn handle(req: Request, ctx: &Ctx) -> Result<Response> {
    let presented = req.headers().get(SECRET_HEADER)?.unwrap_or_default();
    if let Some(refused) = refuse(&req, &ctx.secrets.webhook_secret, "TELEGRAM_WEBHOOK_SECRET", "the webhook", &presented)? {
        return Ok(refused);
    }
    // A crew naming an unknown persona (or a bad front matter) serves nothing, from the first
    // update on: 500 and a log line that says which (Telegram keeps the updates meanwhile).
    if let Err(e) = crate::bot::crew::personas(ctx) {
        worker::console_error!("refusing to serve the webhook: {e}");
        return Response::error(format!("server misconfigured: {e}"), 500);
    }
    let Some(update) = read_update(&req).await else {
        return ok(ctx);
    };
    if let Some(done) = special(ctx, &update).await { return done; }
    let now = now_ms();
    let db = ctx.db();
    match normalize(&update) {
        Inbound::Ignored { kind, .. } => {
            worker::console_log!("ignoring update {} of kind {kind}", update.update_id);
            ok(ctx)
        }
        Inbound::Edited(m) => {
            let admitted = admitted_by_level(&ctx.cfg, m.chat.kind, m.chat.id, m.speaker.user_id);
            let limit = refused_limit(ctx, m.chat.id, m.speaker.user_id, admitted, now);
            storage::messages::record_message(&db, update.update_id, &m, true, admitted, &limit, now).await?;
            ok(ctx)
        }
        Inbound::Message(m) => message(ctx, &update, m, now).await,
        Inbound::Reaction(r) => {
            let admitted = admitted_by_level(&ctx.cfg, r.chat.kind, r.chat.id, r.speaker.user_id);
            let limit = refused_limit(ctx, r.chat.id, r.speaker.user_id, admitted, now);
            let rec = storage::messages::record_reaction(&db, update.update_id, &r, admitted, &limit, now).await?;
            if rec.recorded.over_limit {
                return ok(ctx);
            }
            // A reaction on the bot's most recent message asks for a reply.
            let on_latest = rec.last_bot_message_id == Some(r.message_id);
            if on_latest && !r.emoji.is_empty() && !r.speaker.is_bot {
                let conv = rec.conv.as_deref().and_then(ConvKey::parse).unwrap_or(ConvKey::chat(r.chat.id));
                let arrival = Arrival {
                    update_id: update.update_id,
                    trigger: Trigger::Reaction,
                    message: None,
                    reaction: Some(r),
                    access: rec.recorded.access,
                    bot_username: String::new(),
                };
                objects::send_arrival(ctx, &conv, arrival).await?;
            }
            ok(ctx)
        }
    }
}
