//! Bot commands at the edge: answered from D1 without a model call, each reply sent once
//! (outbox key `cmd:chat:message`).

use crate::config::{now_ms, Ctx};
use super::{access, deliver, memory, usage};
use crate::args;
use agent_core::commands::{self, Command, StatusInfo};
use agent_core::conversation::{ConvKey, InboundMessage};
use serde::Deserialize;

#[derive(Deserialize)]
struct SessionRow {
    session_start_seq: Option<i64>,
    session_started_at: Option<i64>,
    session_messages: i64,
    total_messages: i64,
    model: Option<String>,
}

const STATUS: &str = "SELECT c.session_start_seq, c.session_started_at,
       (SELECT COUNT(*) FROM messages m WHERE m.conv = ?1 AND m.seq >= COALESCE(c.session_start_seq, 0)) AS session_messages,
       (SELECT COUNT(*) FROM messages m WHERE m.conv = ?1) AS total_messages,
       (SELECT model FROM chats WHERE chat_id = ?2) AS model
     FROM (SELECT ?1 AS conv) k LEFT JOIN conversations c ON c.conv = k.conv";

/// Starts a new session right after message `message_id` (the `/new` command itself).
pub const NEW_SESSION: &str = "INSERT INTO conversations (conv, chat_id, thread_id, session_start_seq, session_started_at, updated_at)
     VALUES (?1, ?2, ?3, COALESCE((SELECT seq + 1 FROM messages WHERE chat_id = ?2 AND message_id = ?4), 0), ?5, ?5)
     ON CONFLICT (conv) DO UPDATE SET session_start_seq = excluded.session_start_seq,
       session_started_at = excluded.session_started_at, history_cut_seq = NULL, updated_at = excluded.updated_at";

/// Runs a command and replies. Returns the reply text (for logs and tests).
pub async fn run(ctx: &Ctx, conv: &ConvKey, m: &InboundMessage, cmd: Command) -> String {
    let text = match answer(ctx, conv, m, cmd).await {
        Ok(t) => t,
        Err(e) => {
            worker::console_error!("command failed in {conv}: {e}");
            "Sorry, that didn't work. Please try again in a moment.".to_string()
        }
    };
    let reply_to = m.chat.kind.is_group().then_some(m.message_id);
    let key = format!("cmd:{}:{}", conv.chat_id, m.message_id);
    if let Err(e) = deliver::send_text(ctx, conv, &key, &text, reply_to, None).await {
        worker::console_error!("command reply failed in {conv}: {}", e.message());
    }
    text
}

async fn answer(ctx: &Ctx, conv: &ConvKey, m: &InboundMessage, cmd: Command) -> worker::Result<String> {
    let db = ctx.db();
    let user_id = m.speaker.user_id;
    Ok(match cmd {
        Command::Start => commands::start_text(&ctx.cfg.bot_name),
        Command::Help => commands::help_text(&ctx.cfg.bot_name),
        Command::Whoami => commands::whoami_text(m),
        Command::New => {
            db.run(NEW_SESSION, args![conv.to_string(), conv.chat_id, conv.thread_id, m.message_id, now_ms()]).await?;
            "Okay, starting a new conversation. The earlier one stays on record.".to_string()
        }
        Command::Status => {
            let row: Option<SessionRow> = db.first(STATUS, args![conv.to_string(), conv.chat_id]).await?;
            let row = row.unwrap_or(SessionRow {
                session_start_seq: None,
                session_started_at: None,
                session_messages: 0,
                total_messages: 0,
                model: None,
            });
            let _ = row.session_start_seq;
            commands::status_text(&StatusInfo {
                session_age_secs: row.session_started_at.map(|t| (now_ms() - t) / 1000),
                session_messages: row.session_messages.max(0) as u64,
                total_messages: row.total_messages.max(0) as u64,
                model: row.model.unwrap_or_else(|| ctx.cfg.gemini_model.clone()),
                history_format: ctx.cfg.history_format.as_str().to_string(),
            })
        }
        Command::Memory => memory::list_for_user(ctx, conv, user_id).await?,
        Command::Forget(what) => memory::forget_for_user(ctx, conv, user_id, &what).await?,
        Command::Usage => usage::chat_usage_text(ctx, conv.chat_id, user_id).await?,
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
