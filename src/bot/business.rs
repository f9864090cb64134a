//! Telegram Business at the edge (decisions in `agent_core::business`). The webhook hands
//! `business_connection`, `business_message` and `edited_business_message` updates here.
//!
//! - A connection is kept as Telegram last said it (`storage::business::record`); a business
//!   message naming a connection the bot has not heard of is looked up once with
//!   `getBusinessConnection` (a refusal: the message is acknowledged and ignored).
//! - An owner the access policy refuses gets nothing for their chats, and is told why once in
//!   their private chat with the bot: claimed in the connection's row before the send (a
//!   negative time while in flight), kept after it, released when the send fails; a claim
//!   left by a crash lapses after [`TELL_LEASE_MS`], so the notice goes at least once and,
//!   short of that crash, exactly once.
//! - Nothing reaches a contact: their messages (and the owner's own in those chats) are
//!   acknowledged and not stored or answered yet. A business chat's id is the contact's own
//!   user id, so nothing here touches the contact's private chat with the bot.
//!
//! `BUSINESS=off`: every business update is acknowledged and ignored.

use crate::config::{now_ms, Ctx};
use crate::storage::business::{self as rows, ConnRow};
use agent_core::access::policy::{admitted_at, admitted_by_level};
use agent_core::business;
use agent_core::conversation::ChatKind;
use agent_core::telegram::api::SendMessage;
use agent_core::telegram::{Update, UpdateKind};

/// How long a claim to tell a refused owner holds before another update may try again.
pub const TELL_LEASE_MS: i64 = 60_000;

/// Handles a business update. `Err` only for a storage failure (Telegram redelivers).
pub async fn handle(ctx: &Ctx, update: &Update) -> worker::Result<()> {
    if !ctx.cfg.business {
        worker::console_log!("ignoring {}: BUSINESS is off", update.kind.name());
        return Ok(());
    }
    let db = ctx.db();
    let row = match &update.kind {
        UpdateKind::BusinessConnection(c) => rows::record(&db, c, now_ms()).await?,
        UpdateKind::BusinessMessage(m) | UpdateKind::EditedBusinessMessage(m) => match m.business_connection_id.as_deref() {
            Some(id) => known(ctx, id).await?,
            None => None,
        },
        _ => None,
    };
    let Some(row) = row else {
        worker::console_log!("ignoring {}: no connection the bot knows", update.kind.name());
        return Ok(());
    };
    let admitted = admitted_at(admitted_by_level(&ctx.cfg, ChatKind::Private, row.owner_id, Some(row.owner_id)), row.owner_access.as_deref());
    let told = row.refused_told_at.is_some_and(|t| t > 0);
    if business::tell_refused(admitted, row.enabled(), told) {
        tell_refused(ctx, &row).await?;
    }
    if !matches!(update.kind, UpdateKind::BusinessConnection(_)) {
        worker::console_log!("business message acknowledged: contacts are not answered in this version");
    }
    Ok(())
}

/// The stored connection, or Telegram's answer to `getBusinessConnection` kept (a refusal or
/// a failure: `None`, logged).
async fn known(ctx: &Ctx, id: &str) -> worker::Result<Option<ConnRow>> {
    let db = ctx.db();
    if let Some(row) = rows::get(&db, id).await? {
        return Ok(Some(row));
    }
    match ctx.telegram().business_connection(id).await {
        Ok(c) if c.id == id => rows::record(&db, &c, now_ms()).await,
        Ok(_) => {
            worker::console_warn!("getBusinessConnection answered another connection; ignored");
            Ok(None)
        }
        Err(e) => {
            worker::console_warn!("getBusinessConnection failed ({e})");
            Ok(None)
        }
    }
}

/// Tells a refused owner why the bot does nothing for them, once (see the module's doc).
async fn tell_refused(ctx: &Ctx, row: &ConnRow) -> worker::Result<()> {
    let db = ctx.db();
    let now = now_ms();
    if !rows::claim_tell(&db, &row.id, now, now - TELL_LEASE_MS).await? {
        return Ok(());
    }
    let body = SendMessage { chat_id: row.user_chat_id, message_thread_id: None, text: business::REFUSED_OWNER.to_string(), parse_mode: None, reply_parameters: None, link_preview_options: None };
    match ctx.telegram().send_message(&body).await {
        Ok(_) => rows::told_refused(&db, &row.id, now).await,
        Err(e) => {
            worker::console_warn!("the refused business owner was not told ({e}); the next business update tries again");
            rows::release_tell(&db, &row.id, now).await
        }
    }
}
