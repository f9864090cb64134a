//! Access control at the edge: applies `agent_core::policy`, records every refusal, runs the
//! pairing flow (code to the user, approval by an operator, a welcome after).
//!
//! Invariant: nothing here calls the model; a refused message costs at most one short reply.

use crate::args;
use crate::deliver;
use crate::env::{now_ms, random_bytes, Ctx};
use agent_core::conversation::{ChatKind, ConvKey};
use agent_core::policy::{self, Access, Refusal, UserAccess};
use serde::Deserialize;

/// A refusal notice is sent at most this often to the same user.
const NOTICE_INTERVAL_MS: i64 = 10 * 60 * 1000;

#[derive(Deserialize)]
struct LastRefusal {
    created_at: Option<i64>,
}

#[derive(Deserialize)]
struct PairingRow {
    code: String,
}

async fn record_refusal(ctx: &Ctx, chat_id: i64, user_id: Option<i64>, reason: Refusal) -> Option<i64> {
    let db = ctx.db();
    let last: Option<LastRefusal> = db
        .first(
            "SELECT MAX(created_at) AS created_at FROM refusals WHERE chat_id = ?1 AND reason = ?2",
            args![chat_id, reason.as_str()],
        )
        .await
        .ok()
        .flatten();
    if let Err(e) = db
        .run(
            "INSERT INTO refusals (chat_id, user_id, reason, created_at) VALUES (?1, ?2, ?3, ?4)",
            args![chat_id, user_id, reason.as_str(), now_ms()],
        )
        .await
    {
        worker::console_error!("could not record a refusal: {e}");
    }
    last.and_then(|l| l.created_at)
}

/// Applies the access policy to a message. Returns true when the bot may answer it; otherwise
/// the refusal is recorded (and the user told, in private chats, at most every 10 minutes).
pub async fn admit(ctx: &Ctx, conv: &ConvKey, kind: ChatKind, user_id: Option<i64>, name: &str, access: Option<&str>, message_id: i64) -> bool {
    let known = access.and_then(UserAccess::parse);
    match policy::decide(&ctx.cfg, kind, conv.chat_id, user_id, known) {
        Access::Allow => true,
        Access::Refuse(reason) => {
            let last = record_refusal(ctx, conv.chat_id, user_id, reason).await;
            let quiet = last.is_some_and(|t| now_ms() - t < NOTICE_INTERVAL_MS);
            if let (Some(text), false, ChatKind::Private) = (reason.user_message(), quiet, kind) {
                let key = format!("refusal:{}:{message_id}", conv.chat_id);
                let _ = deliver::send_text(ctx, conv, &key, text, None, None).await;
            }
            false
        }
        Access::Pair => {
            let Some(user_id) = user_id else { return false };
            pair(ctx, conv, user_id, name, message_id).await;
            false
        }
    }
}

/// Gives an unknown user a pairing code (or reminds them of the one they have).
async fn pair(ctx: &Ctx, conv: &ConvKey, user_id: i64, name: &str, message_id: i64) {
    let db = ctx.db();
    let now = now_ms();
    let existing: Option<PairingRow> = db
        .first(
            "SELECT code FROM pairings WHERE user_id = ?1 AND expires_at > ?2 AND approved_at IS NULL
             ORDER BY created_at DESC LIMIT 1",
            args![user_id, now],
        )
        .await
        .ok()
        .flatten();
    let last = record_refusal(ctx, conv.chat_id, Some(user_id), Refusal::AwaitingApproval).await;
    let ttl = ctx.cfg.pairing_code_ttl_secs;
    match existing {
        Some(p) => {
            if last.is_some_and(|t| now - t < NOTICE_INTERVAL_MS) {
                return;
            }
            let text = format!("Still waiting for my operator to approve your code {}.", p.code);
            let _ = deliver::send_text(ctx, conv, &format!("pair-remind:{}:{message_id}", conv.chat_id), &text, None, None).await;
        }
        None => {
            let code = policy::pairing_code(random_bytes::<8>());
            let inserted = db
                .run(
                    "INSERT INTO pairings (code, user_id, chat_id, name, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    args![code.clone(), user_id, conv.chat_id, name, now, now + ttl * 1000],
                )
                .await;
            if let Err(e) = inserted {
                worker::console_error!("could not store a pairing code: {e}");
                return;
            }
            let text = policy::pairing_message(&code, ttl);
            let _ = deliver::send_text(ctx, conv, &format!("pair:{code}"), &text, None, None).await;
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct Approved {
    pub user_id: i64,
    pub chat_id: i64,
}

/// Approves a pairing code: the user is allowed from now on and told so. `None` when the code
/// is unknown, expired or already used.
pub async fn approve(ctx: &Ctx, code: &str, by: &str) -> worker::Result<Option<Approved>> {
    let db = ctx.db();
    let code = policy::normalize_code(code);
    let now = now_ms();
    let approved: Option<Approved> = db
        .first(
            "UPDATE pairings SET approved_at = ?2, approved_by = ?3
             WHERE code = ?1 AND approved_at IS NULL AND expires_at > ?2 RETURNING user_id, chat_id",
            args![code.clone(), now, by],
        )
        .await?;
    if let Some(a) = &approved {
        set_access(ctx, a.user_id, Some("allowed"), &format!("pairing {code} approved by {by}")).await?;
        let conv = ConvKey::chat(a.chat_id);
        let _ = deliver::send_text(ctx, &conv, &format!("approved:{code}"), policy::PAIRING_APPROVED_MESSAGE, None, None).await;
    }
    Ok(approved)
}

/// Sets (or clears, with `None`) a user's access: `allowed` or `blocked`.
pub async fn set_access(ctx: &Ctx, user_id: i64, access: Option<&str>, note: &str) -> worker::Result<()> {
    ctx.db()
        .run(
            "INSERT INTO users (user_id, name, access, access_note, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (user_id) DO UPDATE SET access = excluded.access, access_note = excluded.access_note,
               updated_at = excluded.updated_at",
            args![user_id, user_id.to_string(), access, note, now_ms()],
        )
        .await?;
    Ok(())
}
