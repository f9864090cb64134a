//! Access control at the edge: applies `agent_core::policy`, records every refusal, runs the
//! pairing flow (code to the user, approval by an operator, a welcome after), applies the
//! model budgets (`agent_core::limits`). (Callers' authentication is `config::auth`.)
//!
//! Invariants: nothing here calls the model; a refused message costs at most one short reply.

use crate::args;
use super::deliver;
use crate::config::{now_ms, random_bytes, Ctx};
use agent_core::conversation::{ChatKind, ConvKey};
use agent_core::limits::{self, Budgets, Scope, Usage, Verdict};
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
        set_access(ctx, a.user_id, Some(UserAccess::Allowed), &format!("pairing {code} approved by {by}")).await?;
        let conv = ConvKey::chat(a.chat_id);
        let _ = deliver::send_text(ctx, &conv, &format!("approved:{code}"), policy::PAIRING_APPROVED_MESSAGE, None, None).await;
    }
    Ok(approved)
}

/// Sets (or clears, with `None`) a user's access.
pub async fn set_access(ctx: &Ctx, user_id: i64, access: Option<UserAccess>, note: &str) -> worker::Result<()> {
    let access = access.map(UserAccess::as_str);
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

#[derive(Deserialize, Default)]
struct UsageCounts {
    user_turns: Option<i64>,
    chat_tokens: Option<i64>,
    global_tokens: Option<i64>,
}

#[derive(Deserialize)]
struct NoticeRow {
    reason: String,
    at: Option<i64>,
}

const SELECT_USAGE: &str = "SELECT
       (SELECT COUNT(*) FROM budget_charges WHERE user_id = ?1 AND created_at > ?3) AS user_turns,
       (SELECT SUM(total_tokens) FROM model_calls WHERE chat_id = ?2 AND created_at >= ?4) AS chat_tokens,
       (SELECT SUM(total_tokens) FROM model_calls WHERE created_at >= ?4) AS global_tokens";
const SELECT_NOTICES: &str = "SELECT reason, MAX(created_at) AS at FROM refusals
     WHERE chat_id = ?1 AND created_at >= ?3
       AND (reason IN ('budget_chat', 'budget_global') OR (reason = 'budget_user' AND user_id = ?2))
     GROUP BY reason";

/// Budget figures for a person in a chat (the person's hour, the chat's and the bot's day).
pub async fn budget_usage(ctx: &Ctx, chat_id: i64, user_id: Option<i64>) -> worker::Result<Usage> {
    let now = now_ms();
    let c: Option<UsageCounts> = ctx
        .db()
        .first(SELECT_USAGE, args![user_id, chat_id, now - limits::HOUR_MS, limits::day_start(now)])
        .await?;
    let c = c.unwrap_or_default();
    let n = |v: Option<i64>| v.unwrap_or(0).max(0) as u64;
    Ok(Usage { user_turns_last_hour: n(c.user_turns), chat_tokens_today: n(c.chat_tokens), global_tokens_today: n(c.global_tokens) })
}

/// Applies the model budgets to an admitted, reply-asking message. True: go ahead (the person
/// is charged one). False: over a budget; the refusal is recorded and the chat told once per
/// window. If D1 cannot be read the message goes ahead (a budget is not worth silence).
pub async fn within_budget(ctx: &Ctx, conv: &ConvKey, user_id: Option<i64>, message_id: i64) -> bool {
    let budgets: Budgets = ctx.cfg.budgets;
    let is_admin = user_id.is_some_and(|u| ctx.cfg.admin_user_ids.contains(&u));
    if is_admin {
        return true;
    }
    let db = ctx.db();
    let now = now_ms();
    let since = (now - limits::HOUR_MS).min(limits::day_start(now));
    let stmts = (|| {
        Ok::<_, worker::Error>(vec![
            db.stmt(SELECT_USAGE, args![user_id, conv.chat_id, now - limits::HOUR_MS, limits::day_start(now)])?,
            db.stmt(SELECT_NOTICES, args![conv.chat_id, user_id, since])?,
        ])
    })();
    let results = match stmts {
        Ok(stmts) => db.batch(stmts).await,
        Err(e) => Err(e),
    };
    let (usage, notices) = match results {
        Ok(r) => {
            let c = r.first().and_then(|r| crate::storage::rows::<UsageCounts>(r).ok()).and_then(|v| v.into_iter().next()).unwrap_or_default();
            let notices = r.get(1).and_then(|r| crate::storage::rows::<NoticeRow>(r).ok()).unwrap_or_default();
            let n = |v: Option<i64>| v.unwrap_or(0).max(0) as u64;
            (Usage { user_turns_last_hour: n(c.user_turns), chat_tokens_today: n(c.chat_tokens), global_tokens_today: n(c.global_tokens) }, notices)
        }
        Err(e) => {
            worker::console_error!("budget check failed, letting the message through: {e}");
            return true;
        }
    };
    let last_notice = |scope: Scope| notices.iter().find(|n| n.reason == scope.reason()).and_then(|n| n.at);
    match limits::check(&budgets, &usage, false, last_notice, now) {
        Verdict::Within => {
            if let Some(uid) = user_id {
                if let Err(e) = db
                    .run("INSERT INTO budget_charges (chat_id, user_id, created_at) VALUES (?1, ?2, ?3)", args![conv.chat_id, uid, now])
                    .await
                {
                    worker::console_error!("could not record a budget charge: {e}");
                }
            }
            true
        }
        Verdict::Over { scope, notify } => {
            worker::console_warn!("chat {}: over the {} budget; no turn", conv.chat_id, scope.reason());
            if let Err(e) = db
                .run(
                    "INSERT INTO refusals (chat_id, user_id, reason, created_at) VALUES (?1, ?2, ?3, ?4)",
                    args![conv.chat_id, user_id, scope.reason(), now],
                )
                .await
            {
                worker::console_error!("could not record a refusal: {e}");
            }
            if notify {
                let key = format!("budget:{}:{message_id}", conv.chat_id);
                let _ = deliver::send_text(ctx, conv, &key, scope.message(), None, None).await;
            }
            false
        }
    }
}
