//! Access control at the edge: applies `agent_core::access::policy`, records every refusal, runs the
//! pairing flow (code to the user, approval by an operator, a welcome after), applies the
//! model budgets (`agent_core::limits`) to messages and to the work nobody asked for just now
//! (a reminder's run, a crew's continuation turn, consolidation). (Callers' authentication is
//! `config::auth`.)
//!
//! Invariants (INVARIANTS.md): "A run is its creator's request, made again", "Only its
//! creator cancels a reminder in a group", "Budgets". Also: nothing here calls the model; a
//! refused message costs at most one short reply. In a group a refusal, a pairing message and a
//! person's own budget notice go to that person alone where Telegram allows it
//! (`bot::to_one_person`), else as before (silence; the group's notice).

use super::deliver;
use super::to_one_person::{self, Today};
use crate::config::{now_ms, random_bytes, Ctx};
use crate::outbound::objects::{self, ChatRequest};
use crate::storage;
use agent_core::access::authority::{self, RunGate};
use agent_core::conversation::{ChatKind, ConvKey};
use crate::storage::access::{self as rows, NewPairing};
use agent_core::limits::{self, Budgets, Scope, Usage, Verdict};
use agent_core::access::policy::{self, Access, GroupNotice, Refusal, UserAccess};

/// A refusal notice is sent at most this often to the same user.
const NOTICE_INTERVAL_MS: i64 = 10 * 60 * 1000;

pub use crate::storage::access::Approved;

/// Applies the access policy to a message. Returns true when the bot may answer it; otherwise
/// the refusal is recorded and the user told at most every 10 minutes: in private chats as
/// before; in a group only privately (an ephemeral message, the bot an admin there:
/// `bot::to_one_person`; under `DM_POLICY=pairing` their pairing code), else nothing, as before.
pub async fn admit(ctx: &Ctx, conv: &ConvKey, kind: ChatKind, user_id: Option<i64>, name: &str, access: Option<&str>, message_id: i64) -> bool {
    let known = access.and_then(UserAccess::parse);
    match policy::decide(&ctx.cfg, kind, conv.chat_id, user_id, known) {
        Access::Allow => true,
        Access::Refuse(reason) => {
            let last = rows::record_refusal(&ctx.db(), conv.chat_id, user_id, reason.as_str(), now_ms()).await;
            let quiet = last.is_some_and(|t| now_ms() - t < NOTICE_INTERVAL_MS);
            let key = format!("refusal:{}:{message_id}", conv.chat_id);
            match (reason.user_message(), quiet, kind) {
                (Some(text), false, ChatKind::Private) => {
                    let _ = deliver::send_text(ctx, conv, &key, text, None, None).await;
                }
                // In a group: only to the person, as an ephemeral message (the bot an admin
                // there); where that cannot go, silence, as before.
                (_, false, _) if kind.is_group() => {
                    let Some(user) = agent_core::telegram::private_answer::receiver(kind, user_id, false) else { return false };
                    match reason.group_notice(ctx.cfg.dm_policy) {
                        Some(_) if !to_one_person::bot_is_admin(ctx, conv.chat_id).await => {}
                        Some(GroupNotice::Text(text)) => to_one_person::private_answer(ctx, conv, &key, text, user, None, Today::Nothing).await,
                        Some(GroupNotice::Pair) => pair(ctx, conv, user, name, message_id, None).await,
                        None => {}
                    }
                }
                _ => {}
            }
            false
        }
        Access::Pair => {
            let Some(user_id) = user_id else { return false };
            let last = rows::record_refusal(&ctx.db(), conv.chat_id, Some(user_id), Refusal::AwaitingApproval.as_str(), now_ms()).await;
            pair(ctx, conv, user_id, name, message_id, last).await;
            false
        }
    }
}

/// A message about a person's pairing: in their private chat as before; in a group only to
/// them, as an ephemeral message (where that cannot go, nothing: there was none before).
async fn tell(ctx: &Ctx, conv: &ConvKey, user_id: i64, key: &str, text: &str) {
    if conv.chat_id < 0 {
        to_one_person::private_answer(ctx, conv, key, text, user_id, None, Today::Nothing).await;
    } else {
        let _ = deliver::send_text(ctx, conv, key, text, None, None).await;
    }
}

/// Gives an unknown user a pairing code (or reminds them of the one they have, unless a
/// refusal was recorded for them within the notice interval: `last`).
async fn pair(ctx: &Ctx, conv: &ConvKey, user_id: i64, name: &str, message_id: i64, last: Option<i64>) {
    let db = ctx.db();
    let now = now_ms();
    let existing = rows::open_pairing(&db, user_id, now).await;
    let ttl = ctx.cfg.pairing_code_ttl_secs;
    match existing {
        Some(code) => {
            if last.is_some_and(|t| now - t < NOTICE_INTERVAL_MS) {
                return;
            }
            let text = format!("Still waiting for my operator to approve your code {code}.");
            tell(ctx, conv, user_id, &format!("pair-remind:{}:{message_id}", conv.chat_id), &text).await;
        }
        None => {
            let code = policy::pairing_code(random_bytes::<8>());
            let pairing = NewPairing { code: &code, user_id, chat_id: conv.chat_id, name, now, expires_at: now + ttl * 1000 };
            if let Err(e) = rows::insert_pairing(&db, &pairing).await {
                worker::console_error!("could not store a pairing code: {e}");
                return;
            }
            let text = policy::pairing_message(&code, ttl);
            tell(ctx, conv, user_id, &format!("pair:{code}"), &text).await;
        }
    }
}

/// Approves a pairing code: the user is allowed from now on and told so. `None` when the code
/// is unknown, expired or already used.
pub async fn approve(ctx: &Ctx, code: &str, by: &str) -> worker::Result<Option<Approved>> {
    let code = policy::normalize_code(code);
    let approved = rows::approve_pairing(&ctx.db(), &code, by, now_ms()).await?;
    if let Some(a) = &approved {
        set_access(ctx, a.user_id, Some(UserAccess::Allowed), &format!("pairing {code} approved by {by}")).await?;
        let conv = ConvKey::chat(a.chat_id);
        tell(ctx, &conv, a.user_id, &format!("approved:{code}"), policy::PAIRING_APPROVED_MESSAGE).await;
    }
    Ok(approved)
}

/// Sets (or clears, with `None`) a user's access. Blocking a person also cancels every
/// reminder they set (a reminder never outlives its creator's access).
pub async fn set_access(ctx: &Ctx, user_id: i64, access: Option<UserAccess>, note: &str) -> worker::Result<()> {
    rows::set_access(&ctx.db(), user_id, access.map(UserAccess::as_str), note, now_ms()).await?;
    if access == Some(UserAccess::Blocked) {
        cancel_schedules_of(ctx, user_id).await?;
    }
    Ok(())
}

/// Chat objects told at most per call (a Worker's subrequests are bounded); one not told
/// finds nothing due when its alarm wakes, and forgets the run then.
const MAX_TOLD: usize = 30;

/// Cancels the reminders `user_id` set, in every chat, and tells those chats' objects to
/// re-read their next run.
async fn cancel_schedules_of(ctx: &Ctx, user_id: i64) -> worker::Result<()> {
    let convs = storage::schedules::cancel_by_creator(&ctx.db(), user_id, now_ms()).await?;
    if !convs.is_empty() {
        worker::console_log!("user {user_id} blocked: their reminders in {} conversations are cancelled", convs.len());
    }
    for conv in convs.iter().take(MAX_TOLD) {
        if let Err(e) = objects::notify(ctx, conv, &ChatRequest::Schedules).await {
            worker::console_warn!("chat {conv}: a blocked person's reminders were cancelled; its object was not told ({e})");
        }
    }
    Ok(())
}

/// Budget figures for a person in a chat (the person's hour, the chat's and the bot's day).
pub async fn budget_usage(ctx: &Ctx, chat_id: i64, user_id: Option<i64>) -> worker::Result<Usage> {
    rows::budget_usage(&ctx.db(), chat_id, user_id, now_ms()).await
}

/// A due reminder at its fire time (`authority::gate`): its creator and the chat pass the access
/// policy again, and the run counts against the creator's hourly requests like a message of
/// theirs (charged when it fires, once per run: `charge_key`) and against the chat's and the
/// bot's daily tokens. Nothing is notified (nobody asked just now). A failed read lets it fire,
/// like `within_budget`.
pub async fn scheduled_run(ctx: &Ctx, conv: &ConvKey, kind: ChatKind, creator: Option<i64>, recurring: bool, charge_key: &str) -> RunGate {
    let db = ctx.db();
    let now = now_ms();
    let (level, usage) = match rows::run_state(&db, conv.chat_id, creator, now).await {
        Ok(state) => state,
        Err(e) => {
            worker::console_error!("the scheduled run's checks failed, letting it through: {e}");
            return RunGate::Fire;
        }
    };
    let is_admin = creator.is_some_and(|u| ctx.cfg.admin_user_ids.contains(&u));
    let access = policy::decide(&ctx.cfg, kind, conv.chat_id, creator, level.as_deref().and_then(UserAccess::parse));
    let gate = authority::gate(&access, &limits::check(&ctx.cfg.budgets, &background(usage, is_admin), false, |_| None, now), recurring);
    if let (RunGate::Fire, Some(uid), false) = (&gate, creator, is_admin) {
        if let Err(e) = rows::charge(&db, conv.chat_id, uid, now, Some(charge_key)).await {
            worker::console_error!("could not record a budget charge: {e}");
        }
    }
    gate
}

/// The figures work nobody asked for just now is checked against: an operator's hourly
/// requests are not limited, but the chat's and the bot's tokens are, even for their work.
fn background(usage: Usage, is_admin: bool) -> Usage {
    if is_admin {
        Usage { user_turns_last_hour: 0, ..usage }
    } else {
        usage
    }
}

/// Model work nobody asked for just now: a consolidation job (`user_id` `None`: the chat's
/// work) or a crew's continuation turn (the work of the person whose message started the
/// cycle). Checked against the chat's and the bot's daily tokens and the person's hourly
/// requests; when it goes ahead the person is charged one, like a message of theirs (once per
/// `charge_key`, the continuation's). Nothing is notified. A failed read lets it through,
/// like `within_budget`.
pub async fn work_within_budget(ctx: &Ctx, chat_id: i64, user_id: Option<i64>, charge_key: Option<&str>) -> bool {
    let db = ctx.db();
    let now = now_ms();
    let is_admin = user_id.is_some_and(|u| ctx.cfg.admin_user_ids.contains(&u));
    let usage = match rows::budget_usage(&db, chat_id, user_id, now).await {
        Ok(usage) => usage,
        Err(e) => {
            worker::console_error!("budget check failed, letting the work through: {e}");
            return true;
        }
    };
    match limits::check(&ctx.cfg.budgets, &background(usage, is_admin), false, |_| None, now) {
        Verdict::Within => {
            if let (Some(uid), false) = (user_id, is_admin) {
                if let Err(e) = rows::charge(&db, chat_id, uid, now, charge_key).await {
                    worker::console_error!("could not record a budget charge: {e}");
                }
            }
            true
        }
        Verdict::Over { scope, .. } => {
            worker::console_warn!("chat {chat_id}: over the {} budget; no model call", scope.reason());
            false
        }
    }
}

/// Applies the model budgets to an admitted, reply-asking message. True: go ahead (the person
/// is charged one). False: over a budget; the refusal is recorded and the chat told once per
/// window. If D1 cannot be read the message goes ahead (a budget is not worth silence).
pub async fn within_budget(ctx: &Ctx, conv: &ConvKey, kind: ChatKind, user_id: Option<i64>, message_id: i64) -> bool {
    let budgets: Budgets = ctx.cfg.budgets;
    let is_admin = user_id.is_some_and(|u| ctx.cfg.admin_user_ids.contains(&u));
    if is_admin {
        return true;
    }
    let db = ctx.db();
    let now = now_ms();
    let (usage, notices) = match rows::budget_state(&db, conv.chat_id, user_id, now).await {
        Ok(state) => state,
        Err(e) => {
            worker::console_error!("budget check failed, letting the message through: {e}");
            return true;
        }
    };
    let last_notice = |scope: Scope| notices.iter().find(|n| n.reason == scope.reason()).and_then(|n| n.at);
    match limits::check(&budgets, &usage, false, last_notice, now) {
        Verdict::Within => {
            if let Some(uid) = user_id {
                if let Err(e) = rows::charge(&db, conv.chat_id, uid, now, None).await {
                    worker::console_error!("could not record a budget charge: {e}");
                }
            }
            true
        }
        Verdict::Over { scope, notify } => {
            worker::console_warn!("chat {}: over the {} budget; no turn", conv.chat_id, scope.reason());
            if let Err(e) = rows::insert_refusal(&db, conv.chat_id, user_id, scope.reason(), now).await {
                worker::console_error!("could not record a refusal: {e}");
            }
            if notify {
                let key = format!("budget:{}:{message_id}", conv.chat_id);
                // The person's own hour concerns them alone: in a group, to them where Telegram
                // allows it (`bot::ephemeral`), else the group message of before. The chat's
                // and the bot's day concern everyone there: the group message.
                match (scope, user_id.filter(|_| kind.is_group())) {
                    (Scope::User, Some(user)) => to_one_person::private_answer(ctx, conv, &key, scope.message(), user, None, Today::Group).await,
                    _ => {
                        let _ = deliver::send_text(ctx, conv, &key, scope.message(), None, None).await;
                    }
                }
            }
            false
        }
    }
}
