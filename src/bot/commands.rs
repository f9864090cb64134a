//! Bot commands at the edge: answered from D1 without a model call, each reply sent once
//! (outbox key `cmd:chat:message`); in a private chat `/memory` and `/reminders` carry the
//! Mini App's button (`MINIAPP_URL`). `/cancel` changes the chat's schedules; the inbox then
//! re-reads the next run.

use crate::config::{now_ms, Ctx};
use super::{access, deliver, memory, usage};
use crate::storage::{self, conversations::{self, NewSession}};
use agent_core::chat::schedule;
use agent_core::telegram::commands::{self, Command, StatusInfo};
use agent_core::conversation::{ChatKind, ConvKey, InboundMessage};

/// Runs a command and replies. Returns the reply text (for logs and tests).
pub async fn run(ctx: &Ctx, conv: &ConvKey, m: &InboundMessage, cmd: Command) -> String {
    if cmd == Command::Business(agent_core::business::Arg::Digest) && ctx.cfg.business && m.chat.kind == ChatKind::Private {
        // Sent outside the conversation (`bot::business_digest`): contacts' words stay out of
        // the owner's history.
        return super::business_digest::command(ctx, conv, m).await;
    }
    let app_button = matches!(cmd, Command::Memory | Command::Reminders) && m.chat.kind == ChatKind::Private && !ctx.cfg.miniapp_url.is_empty();
    let text = match answer(ctx, conv, m, cmd).await {
        Ok(t) => t,
        Err(e) => {
            worker::console_error!("command failed in {conv}: {e}");
            "Sorry, that didn't work. Please try again in a moment.".to_string()
        }
    };
    let reply_to = m.chat.kind.is_group().then_some(m.message_id);
    let key = format!("cmd:{}:{}", conv.chat_id, m.message_id);
    match deliver::send_text(ctx, conv, &key, &text, reply_to, None).await {
        Ok(ids) if app_button => open_app_button(ctx, conv, ids.last().copied()).await,
        Ok(_) => {}
        Err(e) => worker::console_error!("command reply failed in {conv}: {}", e.message()),
    }
    text
}

/// The Mini App's button under a private chat's `/memory` or `/reminders` reply (Telegram
/// takes Web App buttons only in private chats). Set on the sent message: setting it again
/// (a redelivered command) changes nothing, so it needs no outbox row.
async fn open_app_button(ctx: &Ctx, conv: &ConvKey, message_id: Option<i64>) {
    let Some(message_id) = message_id else { return };
    let body = serde_json::json!({
        "chat_id": conv.chat_id,
        "message_id": message_id,
        "reply_markup": {"inline_keyboard": [[{"text": "Open to edit", "web_app": {"url": ctx.cfg.miniapp_url}}]]},
    });
    if let Err(e) = ctx.telegram().call("editMessageReplyMarkup", &body).await {
        worker::console_warn!("the Mini App button under a reply in {conv} was not set: {e}");
    }
}

pub(crate) async fn answer(ctx: &Ctx, conv: &ConvKey, m: &InboundMessage, cmd: Command) -> worker::Result<String> {
    let db = ctx.db();
    let user_id = m.speaker.user_id;
    Ok(match cmd {
        Command::Start => commands::start_text(&ctx.cfg.bot_name),
        Command::Help => commands::help_text(&ctx.cfg.bot_name),
        Command::Whoami => commands::whoami_text(m),
        Command::New => new_conversation(ctx, conv, m).await?,
        Command::Status => {
            let row = conversations::session_status(&db, conv).await?;
            commands::status_text(&StatusInfo {
                session_age_secs: row.session_started_at.map(|t| (now_ms() - t) / 1000),
                session_messages: row.session_messages.max(0) as u64,
                total_messages: row.total_messages.max(0) as u64,
                model: row.model.unwrap_or_else(|| ctx.cfg.gemini_model.clone()),
                history_format: ctx.cfg.history_format.as_str().to_string(),
            })
        }
        Command::Memory => {
            let mut text = memory::list_for_user(ctx, conv, user_id).await?;
            if m.chat.kind.is_group() && !ctx.cfg.miniapp_url.is_empty() {
                text.push_str(&group_link_line(ctx, conv.chat_id).await?);
            }
            text
        }
        Command::Forget(what) => memory::forget_for_user(ctx, conv, m.chat.kind, user_id, &what).await?,
        Command::Usage => usage::chat_usage_text(ctx, conv.chat_id, user_id).await?,
        Command::Reminders => {
            let items = storage::schedules::list_active(&db, conv).await?;
            let zone = storage::schedules::zone(&db, conv.chat_id).await?.unwrap_or_else(|| ctx.cfg.timezone.clone());
            schedule::list_text(&crate::config::tz::Intl, &items, &zone)
        }
        Command::Cancel(None) => "Which one? /reminders lists them with their ids; then /cancel <id>.".to_string(),
        Command::Cancel(Some(id)) => {
            // In a group, people cancel what they set; operators anything.
            let is_admin = user_id.is_some_and(|u| ctx.cfg.admin_user_ids.contains(&u));
            let who = (m.chat.kind.is_group() && !is_admin).then_some(user_id.unwrap_or_default());
            if storage::schedules::cancel(&db, conv, id, who, now_ms()).await? {
                format!("Cancelled reminder #{id}.")
            } else if who.is_some() {
                format!("You have no active reminder #{id} in this chat.")
            } else {
                format!("There is no active reminder #{id} in this chat.")
            }
        }
        Command::Crew(on) => {
            // The switch itself is set by the chat object (inbox) for operators only.
            let is_admin = user_id.is_some_and(|u| ctx.cfg.admin_user_ids.contains(&u));
            match on {
                _ if !is_admin => "Only my operators can switch the crew.".to_string(),
                _ if ctx.cfg.crew.is_empty() => "No crew is configured (`CREW`).".to_string(),
                Some(true) => format!("Crew on: {} answer in turn here.", commands::escape_list(&ctx.cfg.crew)),
                Some(false) => "Crew off: I answer alone here again.".to_string(),
                None => "Use /crew on or /crew off.".to_string(),
            }
        }
        Command::Rich(_) if user_id.is_none() => "Rich answers are a person's own setting.".to_string(),
        Command::Rich(on) => rich_setting(ctx, m, user_id.unwrap_or_default(), on).await?,
        Command::Business(_) if user_id.is_none() => "Business settings are a person's own.".to_string(),
        Command::Business(arg) => business_setting(ctx, m, user_id.unwrap_or_default(), arg).await?,
        Command::BusinessNotes(_) if user_id.is_none() => "Business settings are a person's own.".to_string(),
        Command::BusinessNotes(arg) => business_notes(ctx, m, user_id.unwrap_or_default(), arg).await?,
        Command::Approve(code) => {
            let is_admin = user_id.is_some_and(|u| ctx.cfg.admin_user_ids.contains(&u));
            if !is_admin {
                "Only my operators can approve pairing codes.".to_string()
            } else {
                match access::approve(ctx, &code, &format!("telegram:{}", user_id.unwrap_or_default())).await? {
                    Some(a) => format!("Approved: user {} can talk to me now.", a.user_id),
                    None => "That code is unknown, expired or already used.".to_string(),
                }
            }
        }
    })
}

/// `/new`: in a private chat with topics a fresh topic, this conversation left as it is
/// (`bot::topics::open`); else, or refused, the reset of before (said so when refused).
async fn new_conversation(ctx: &Ctx, conv: &ConvKey, m: &InboundMessage) -> worker::Result<String> {
    let mut text = "Okay, starting a new conversation. The earlier one stays on record.";
    if super::topics::new_opens_topic(ctx, m.chat.kind).await {
        match super::topics::open(ctx, conv.chat_id, m.message_id).await {
            Ok(_) => return Ok(agent_core::telegram::new_topic::OPENED.to_string()),
            Err(e) => {
                worker::console_warn!("/new in {conv}: no new topic ({e}); resetting this conversation");
                text = agent_core::telegram::new_topic::REFUSED;
            }
        }
    }
    conversations::start_new_session(&ctx.db(), conv, NewSession::AfterMessage(m.message_id), now_ms()).await?;
    Ok(text.to_string())
}

/// `/rich`, `/rich on|off`: a person's own setting for rich answers, kept across chats.
async fn rich_setting(ctx: &Ctx, m: &InboundMessage, uid: i64, on: Option<bool>) -> worker::Result<String> {
    let db = ctx.db();
    let was_off = storage::prefs::rich_off(&db, uid).await?;
    if let Some(on) = on {
        storage::prefs::set_rich_off(&db, uid, &m.speaker.name, !on, now_ms()).await?;
    }
    Ok(commands::rich_text(on, was_off, ctx.cfg.rich_messages, !m.chat.kind.is_group()))
}

/// `/business [draft|away|auto|off]`: the owner's mode (kept in their row whether or not a
/// connection exists yet) and what their connection allows.
async fn business_setting(ctx: &Ctx, m: &InboundMessage, uid: i64, arg: agent_core::business::Arg) -> worker::Result<String> {
    use agent_core::business::{status_text, Arg, Connected, Mode, Status};
    let private = m.chat.kind == agent_core::conversation::ChatKind::Private;
    let db = ctx.db();
    let mut status = Status { feature_on: ctx.cfg.business, private, arg, mode: Mode::Draft, connection: None, away_secs: ctx.cfg.business_away_secs };
    if !status.feature_on || !private {
        return Ok(status_text(&status));
    }
    status.mode = Mode::stored(storage::business::mode(&db, uid).await?.as_deref());
    if let Arg::Set(mode) = arg {
        storage::business::set_mode(&db, uid, &m.speaker.name, mode.as_str(), now_ms()).await?;
        status.mode = mode;
    }
    let connected = storage::business::of_owner(&db, uid).await?.map(|c| Connected { enabled: c.enabled(), can_reply: c.rights().can_reply, can_read: c.rights().can_read_messages });
    Ok(status_text(&Status { connection: connected.as_ref(), ..status }))
}

/// `/business notes [clear|<text>]`: what the bot may tell the owner's contacts, kept in the
/// owner's row (never a memory).
async fn business_notes(ctx: &Ctx, m: &InboundMessage, uid: i64, arg: agent_core::business::NotesArg) -> worker::Result<String> {
    use agent_core::business::{capped_notes, notes_text, status_text, Arg, Mode, NotesArg, Status};
    let private = m.chat.kind == agent_core::conversation::ChatKind::Private;
    if !ctx.cfg.business || !private {
        let status = Status { feature_on: ctx.cfg.business, private, arg: Arg::Show, mode: Mode::Draft, connection: None, away_secs: 0 };
        return Ok(status_text(&status));
    }
    let db = ctx.db();
    Ok(match &arg {
        NotesArg::Show => notes_text(&arg, storage::business::settings(&db, uid).await?.1.as_deref(), false),
        NotesArg::Clear => {
            storage::business::set_notes(&db, uid, &m.speaker.name, None, now_ms()).await?;
            notes_text(&arg, None, false)
        }
        NotesArg::Set(text) => {
            let (kept, cut) = capped_notes(text);
            storage::business::set_notes(&db, uid, &m.speaker.name, Some(&kept), now_ms()).await?;
            notes_text(&arg, Some(&kept), cut)
        }
    })
}

/// The line under a group's `/memory` that opens its shared memories in the Mini App: the
/// bot's link with the group's opaque start parameter (issued once, kept in
/// `miniapp_links`); the Mini App checks membership before it shows anything.
async fn group_link_line(ctx: &Ctx, chat_id: i64) -> worker::Result<String> {
    let mut random = [0u8; 18];
    getrandom::fill(&mut random).map_err(|e| worker::Error::RustError(e.to_string()))?;
    let fresh = agent_core::access::webapp::group_link(&random);
    let token = storage::miniapp::group_link(&ctx.db(), chat_id, &fresh, now_ms()).await?;
    let username = match ctx.cfg.bot_username.as_str() {
        "" => ctx.telegram().me().await.ok().and_then(|me| me.username).unwrap_or_default(),
        name => name.to_string(),
    };
    if username.is_empty() {
        return Ok(String::new());
    }
    Ok(format!("\n\nThis group's shared memories (members see them, admins edit them): <https://t.me/{username}?startapp={token}>"))
}
