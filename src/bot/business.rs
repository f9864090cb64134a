//! Telegram Business at the edge (decisions in `agent_core::business`). The webhook hands
//! `business_connection`, `business_message` and `edited_business_message` updates here.
//!
//! - A connection is kept as Telegram last said it (`storage::business::record`); a business
//!   message naming a connection the bot has not heard of is looked up once with
//!   `getBusinessConnection` (a refusal: the message is acknowledged and ignored).
//! - An owner the access policy refuses gets nothing for their chats, and is told why once in
//!   their private chat with the bot: noted in the connection's row after the send, so a send
//!   that failed is tried by the next business update (at least once; twice only when a crash
//!   comes between the send and the note, or two of the owner's updates race).
//! - A business chat's messages (the contact's, the owner's, the bot's, Telegram's offline
//!   ones) are kept apart from every conversation of the bot (`business_messages`), keyed by
//!   owner and contact: a business chat's id is the contact's own user id, and it is never
//!   taken for the contact's private chat with the bot, nor for the owner's. Edits and
//!   deletions apply. Nothing is kept for a refused owner or a connection that is off.
//! - Draft mode: each contact's message queues a `Job::Business` after
//!   `suggest::QUIET_SECS`; the job of the burst's last message, if nobody from the owner's side
//!   answered since, asks the model (no functions; this chat only) and shows the owner one
//!   suggestion with Send and Skip ([`run`]). Only the owner's presses count; Send goes out
//!   once with `business_connection_id` (claimed before the send, lapsing after a crash),
//!   whoever presses how many times ([`press`]). A suggestion is withdrawn when the owner
//!   answers the contact themself, when a newer burst's replaces it, and when the connection
//!   is turned off.
//! - Away and auto modes (with the right to reply): the burst's job runs after
//!   `BUSINESS_AWAY_SECONDS` (away) or the quiet window (auto); unless the owner answered
//!   first, the bot sends the reply itself, once (the same claim as Send), and marks the
//!   contact's messages read where `can_read_messages` allows.
//!
//! - The owner's reply to a suggestion in their private chat is its new text ([`correction`]),
//!   never a turn; the cron withdraws suggestions past Telegram's 24 hours ([`expire`]), and a
//!   Send pressed after them says so without trying.
//!
//! `BUSINESS=off`: every business update is acknowledged and ignored.

use crate::config::{now_ms, Ctx};
use crate::outbound::queues;
use crate::storage::business::{self as rows, ConnRow, Suggestion};
use agent_core::access::policy::{admitted_at, admitted_by_level};
use agent_core::background::jobs::{Job, JobOutcome};
use agent_core::business::suggest::{self, Line, Press, PressVerdict, Side};
use agent_core::business::{self, Mode};
use agent_core::conversation::ChatKind;
use agent_core::telegram::api::SendMessage;
use agent_core::telegram::{CallbackQuery, Message, Update, UpdateKind};
use serde_json::json;

/// A message body of HTML to `chat_id`, link previews off, with one more field (`key`: the
/// buttons, the business connection, or the message an edit rewrites).
pub(crate) fn html_body(chat_id: i64, html: String, key: &str, value: serde_json::Value) -> serde_json::Value {
    let mut body = json!({ "chat_id": chat_id, "text": html, "parse_mode": "HTML", "link_preview_options": {"is_disabled": true} });
    body[key] = value;
    body
}

/// Handles a business update. `Err` only for a storage failure (Telegram redelivers).
pub async fn handle(ctx: &Ctx, update: &Update) -> worker::Result<()> {
    if !ctx.cfg.business {
        worker::console_log!("ignoring {}: BUSINESS is off", update.kind.name());
        return Ok(());
    }
    let db = ctx.db();
    let row = match &update.kind {
        UpdateKind::BusinessConnection(c) => rows::record(&db, c, update.update_id, now_ms()).await?,
        UpdateKind::BusinessMessage(m) | UpdateKind::EditedBusinessMessage(m) => match m.business_connection_id.as_deref() {
            Some(id) => known(ctx, id).await?,
            None => None,
        },
        UpdateKind::DeletedBusinessMessages(d) => known(ctx, &d.business_connection_id).await?,
        _ => None,
    };
    let Some(row) = row else {
        worker::console_log!("ignoring {}: no connection the bot knows", update.kind.name());
        return Ok(());
    };
    let admitted = admitted_at(admitted_by_level(&ctx.cfg, ChatKind::Private, row.owner_id, Some(row.owner_id)), row.owner_access.as_deref());
    let told = row.refused_told_at.is_some();
    if business::tell_refused(admitted, row.enabled(), told) {
        tell_refused(ctx, &row).await?;
    }
    if !admitted || !row.enabled() {
        // Nothing of a refused owner's or a switched-off connection's chats is kept; a
        // connection turned off withdraws what waits for the owner.
        if !row.enabled() {
            for s in rows::open_of_owner(&db, row.owner_id).await? {
                withdraw(ctx, &row, &s, "disconnected").await?;
            }
            rows::forget_owner(&db, row.owner_id).await?;
        }
        return Ok(());
    }
    match &update.kind {
        UpdateKind::BusinessMessage(m) => arrived(ctx, &row, m).await,
        UpdateKind::EditedBusinessMessage(m) => rows::edit_message(&db, row.owner_id, m.chat.id, m.message_id, &text_of(m)).await,
        UpdateKind::DeletedBusinessMessages(d) => rows::delete_messages(&db, row.owner_id, d.chat_id, &d.message_ids).await,
        _ => Ok(()),
    }
}

/// A business message's text as kept: its text or caption, or a note of what it is, at most
/// `suggest::TEXT_CAP` characters.
fn text_of(m: &Message) -> String {
    let text = m.text.as_deref().or(m.caption.as_deref()).unwrap_or("[a message without text]");
    text.chars().take(suggest::TEXT_CAP).collect()
}

/// A new business message: kept; a contact's queues the burst's draft, the owner's own
/// withdraws the chat's open suggestion.
async fn arrived(ctx: &Ctx, row: &ConnRow, m: &Message) -> worker::Result<()> {
    let db = ctx.db();
    let contact = m.chat.id;
    let side = Side::of(m.from.as_ref().map(|u| u.id), row.owner_id, m.sender_business_bot.is_some(), m.is_from_offline);
    let name = m.from.as_ref().map(|u| u.display_name()).unwrap_or_default();
    let stored = rows::Stored { owner: row.owner_id, contact, message_id: m.message_id, side: side.as_str(), name: &name, text: &text_of(m), date: m.date };
    // A redelivery (the message kept before) does what follows again: the webhook failed after
    // the message was kept, before its job was queued. The job is the same burst's (it drafts
    // once); a withdrawal again changes nothing.
    let cutoff = agent_core::background::retention::kept_since(now_ms(), ctx.cfg.retention_days);
    rows::store_message(&db, &stored, now_ms(), cutoff).await?;
    match side {
        Side::Contact => {
            let mode = Mode::stored(rows::mode(&db, row.owner_id).await?.as_deref());
            if mode == Mode::Off {
                return Ok(());
            }
            let job = Job::Business { owner: row.owner_id, contact, upto: m.message_id, connection: row.id.clone(), attempt: 1 };
            queues::enqueue(ctx, &job, suggest::delay_secs(mode, ctx.cfg.business_away_secs)).await
        }
        Side::Owner => {
            for s in rows::open_in_chat(&db, row.owner_id, contact, 0).await? {
                withdraw(ctx, row, &s, "answered").await?;
            }
            Ok(())
        }
        Side::Bot | Side::Offline => Ok(()),
    }
}

/// Ends an open suggestion (`status`: why) and shows why under it, without its buttons.
async fn withdraw(ctx: &Ctx, row: &ConnRow, s: &Suggestion, status: &str) -> worker::Result<()> {
    if rows::settle(&ctx.db(), s.id, "pending", status, now_ms()).await? {
        show_ended(ctx, row.user_chat_id, s, status, None).await;
    }
    Ok(())
}

/// Rewrites a shown suggestion with the line that says how it ended (no buttons left).
async fn show_ended(ctx: &Ctx, owner_chat: i64, s: &Suggestion, status: &str, line: Option<String>) {
    let Some(shown) = s.shown_message_id.filter(|id| *id > 0) else { return };
    let Some(line) = line.or_else(|| suggest::ended_line(status, &s.contact_name)) else { return };
    let body = html_body(owner_chat, suggest::suggestion_html(&s.contact_name, &s.quoted, &s.html, Some(&line)), "message_id", json!(shown));
    if let Err(e) = ctx.telegram().call("editMessageText", &body).await {
        worker::console_warn!("suggestion {}: the owner's copy was not updated ({e})", s.id);
    }
}

/// The stored connection, or Telegram's answer to `getBusinessConnection` kept (a refusal:
/// `None`, logged; a failure that may pass: `Err`, so Telegram redelivers the message).
async fn known(ctx: &Ctx, id: &str) -> worker::Result<Option<ConnRow>> {
    let db = ctx.db();
    if let Some(row) = rows::get(&db, id).await? {
        return Ok(Some(row));
    }
    match ctx.telegram().business_connection(id).await {
        Ok(c) if c.id == id => rows::record(&db, &c, 0, now_ms()).await,
        Ok(_) => {
            worker::console_warn!("getBusinessConnection answered another connection; ignored");
            Ok(None)
        }
        Err(e) if e.is_transient() => Err(worker::Error::RustError(format!("getBusinessConnection: {e}"))),
        Err(e) => {
            worker::console_warn!("getBusinessConnection refused ({e})");
            Ok(None)
        }
    }
}

/// Tells a refused owner why the bot does nothing for them, once (see the module's doc).
async fn tell_refused(ctx: &Ctx, row: &ConnRow) -> worker::Result<()> {
    let body = SendMessage::text(row.user_chat_id, business::REFUSED_OWNER.to_string());
    match ctx.telegram().send_message(&body).await {
        Ok(_) => rows::told_refused(&ctx.db(), &row.id, now_ms()).await,
        Err(e) => {
            worker::console_warn!("the refused business owner was not told ({e}); the next business update tries again");
            Ok(())
        }
    }
}

/// How long a claimed Send or showing holds before a retry may take it over (a crash while it
/// was at Telegram).
const CLAIM_LEASE_MS: i64 = 60_000;

/// Whether the owner's connection still serves: the feature on, the connection on, the owner
/// admitted.
pub(crate) fn serves(ctx: &Ctx, row: &ConnRow) -> bool {
    let admitted = admitted_at(admitted_by_level(&ctx.cfg, ChatKind::Private, row.owner_id, Some(row.owner_id)), row.owner_access.as_deref());
    ctx.cfg.business && row.enabled() && admitted
}

/// Runs a burst's job: drafts the suggestion (once per burst: a retry reuses the stored one)
/// and shows it to the owner, replacing the chat's older open one.
pub async fn run(ctx: &Ctx, job: &Job) -> JobOutcome {
    let Job::Business { owner, contact, upto, connection, .. } = job else {
        return JobOutcome::Failed { error: "not a business job".into() };
    };
    match draft(ctx, *owner, *contact, *upto, connection).await {
        Ok(outcome) => outcome,
        Err(e) => JobOutcome::Retry { error: e.to_string(), after_ms: None },
    }
}

async fn draft(ctx: &Ctx, owner: i64, contact: i64, upto: i64, connection: &str) -> worker::Result<JobOutcome> {
    let db = ctx.db();
    let Some(row) = rows::get(&db, connection).await?.filter(|r| serves(ctx, r) && r.owner_id == owner) else {
        return Ok(JobOutcome::Done);
    };
    let (mode, notes) = rows::settings(&db, owner).await?;
    let mode = Mode::stored(mode.as_deref());
    let lines = rows::lines(&db, owner, contact, suggest::HISTORY_LINES).await?;
    let chat: Vec<(i64, Side)> = lines.iter().map(|l| (l.message_id, Side::parse(&l.side))).collect();
    if !suggest::drafts_now(upto, &chat, mode) {
        return Ok(JobOutcome::Done);
    }
    let s = match rows::suggestion_for(&db, owner, contact, upto).await? {
        Some(s) => s,
        None => {
            // Keyed by the burst, so a retried job is not charged again.
            if !owner_pays(ctx, row.user_chat_id, owner, &format!("business:{owner}:{contact}:{upto}")).await? {
                return Ok(JobOutcome::Done);
            }
            let name = contact_name(&lines, contact);
            if suggest::answers_itself(mode, row.rights().can_reply) {
                // The contact sees the owner's side typing while the bot writes for them.
                let typing = json!({ "business_connection_id": row.id, "chat_id": contact, "action": "typing" });
                if let Err(e) = ctx.telegram().call("sendChatAction", &typing).await {
                    worker::console_warn!("business: no typing shown ({e})");
                }
            }
            let Some(html) = (match ask(ctx, &row, notes.as_deref(), &name, contact, &lines).await {
                Ok(html) => html,
                Err(retry) => return Ok(retry),
            }) else {
                return Ok(JobOutcome::Done);
            };
            let burst = lines.iter().rev().find(|l| l.message_id == upto);
            let quoted = burst.map(|l| l.text.clone()).unwrap_or_default();
            let window_ends = suggest::window_ends(burst.map(|l| l.date), now_ms());
            let new = rows::NewSuggestion { owner, contact, connection, upto, contact_name: &name, quoted: &quoted, html: &html, window_ends };
            match rows::add_suggestion(&db, &new, now_ms()).await? {
                Some(s) => s,
                None => return Ok(JobOutcome::Retry { error: "the suggestion was not stored".into(), after_ms: None }),
            }
        }
    };
    if suggest::answers_itself(mode, row.rights().can_reply) {
        if matches!(s.status.as_str(), "pending" | "sending") {
            return answer_itself(ctx, &row, &s, upto).await;
        }
    } else if s.status == "pending" && s.shown_message_id.is_none_or(|id| id < 0) {
        if let Some(retry) = show(ctx, &row, &s).await? {
            return Ok(retry);
        }
    }
    for old in rows::open_in_chat(&db, owner, contact, s.id).await? {
        withdraw(ctx, &row, &old, "replaced").await?;
    }
    Ok(JobOutcome::Done)
}

/// Whether the owner may pay for one more Business model call (a suggestion, an answer, a
/// digest): under `BUSINESS_DAILY_LIMIT` and their budgets; if so it is charged to them once,
/// under `key` (a retry with the same key is not charged again).
pub(crate) async fn owner_pays(ctx: &Ctx, owner_chat: i64, owner: i64, key: &str) -> worker::Result<bool> {
    let db = ctx.db();
    let calls = rows::calls_since(&db, owner_chat, agent_core::limits::day_start(now_ms())).await?;
    if calls >= ctx.cfg.business_daily_limit as i64 {
        worker::console_log!("business: owner's daily limit of {} model calls reached", ctx.cfg.business_daily_limit);
        return Ok(false);
    }
    let used = crate::storage::access::budget_usage(&db, owner_chat, Some(owner), now_ms()).await?;
    if !suggest::within_budget(&ctx.cfg, &used, owner, now_ms()) {
        worker::console_log!("business: the owner's budget is spent");
        return Ok(false);
    }
    if !ctx.cfg.admin_user_ids.contains(&owner) {
        crate::storage::access::charge(&db, owner_chat, owner, now_ms(), Some(key)).await?;
    }
    Ok(true)
}

/// The contact's name, as their newest message in the chat carried it.
fn contact_name(lines: &[rows::LineRow], contact: i64) -> String {
    lines
        .iter()
        .rev()
        .find(|l| Side::parse(&l.side) == Side::Contact && !l.name.is_empty())
        .map(|l| l.name.clone())
        .unwrap_or_else(|| format!("Contact {contact}"))
}

/// The model's suggestion for the chat, as the contact would get it (`None`: a blank answer);
/// `Err` with the job's outcome when the model failed in a way that may pass.
async fn ask(ctx: &Ctx, row: &ConnRow, notes: Option<&str>, name: &str, contact: i64, lines: &[rows::LineRow]) -> Result<Option<String>, JobOutcome> {
    let chat: Vec<Line> = lines.iter().map(|l| Line { side: Side::parse(&l.side), text: l.text.clone() }).collect();
    let request = suggest::request(&row.owner_name, notes, name, contact, &chat);
    // The owner pays: the call is theirs, under their private chat with the bot.
    match super::one_shot::ask(ctx, &request, row.user_chat_id, "business").await {
        Ok(Some(text)) => {
            let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
            Ok(suggest::reply_html(&text, &texts))
        }
        Ok(None) => Ok(None),
        Err(e) if e.is_transient() => Err(JobOutcome::Retry { error: e.to_string(), after_ms: e.retry_after_ms() }),
        Err(e) => {
            worker::console_warn!("a business suggestion failed: {e}");
            Ok(None)
        }
    }
}

/// Shows the suggestion to the owner with its buttons, once (claimed in its row before the
/// send; a claim left by a crash lapses after `CLAIM_LEASE_MS`). `Some(retry)`: try again.
async fn show(ctx: &Ctx, row: &ConnRow, s: &Suggestion) -> worker::Result<Option<JobOutcome>> {
    let db = ctx.db();
    let now = now_ms();
    if !rows::claim_show(&db, s.id, now, now - CLAIM_LEASE_MS).await? {
        // Another run shows it, or a crashed one held it: look again once its claim lapses.
        return Ok(Some(held()));
    }
    match ctx.telegram().message_call("sendMessage", &open_body(row, s, None)).await {
        Ok(id) => {
            rows::shown(&db, s.id, id).await?;
            Ok(None)
        }
        Err(e) => {
            rows::release_show(&db, s.id, now).await?;
            if e.is_transient() {
                Ok(Some(JobOutcome::Retry { error: e.to_string(), after_ms: e.retry_after_ms() }))
            } else {
                worker::console_warn!("suggestion {}: the owner could not be shown it ({e})", s.id);
                Ok(None)
            }
        }
    }
}

/// An open suggestion's message to the owner (`Some(id)`: the edit of that message), with its
/// buttons and, where Send can go, how to change the text first.
fn open_body(row: &ConnRow, s: &Suggestion, edit: Option<i64>) -> serde_json::Value {
    let can_reply = row.rights().can_reply;
    let html = suggest::suggestion_html(&s.contact_name, &s.quoted, &s.html, can_reply.then_some(suggest::CORRECT_HINT));
    let mut body = html_body(row.user_chat_id, html, "reply_markup", suggest::keyboard(s.id, can_reply));
    if let Some(id) = edit {
        body["message_id"] = json!(id);
    }
    body
}

/// The job's outcome while another run holds a claim: again once the claim may have lapsed (a
/// crash between a claim and its send never loses the send).
fn held() -> JobOutcome {
    JobOutcome::Retry { error: "another run holds the send".into(), after_ms: Some(CLAIM_LEASE_MS as u64) }
}

/// A press on a suggestion's button: always answered (`answerCallbackQuery`); only the owner's
/// presses count, and Send goes out once.
pub async fn press(ctx: &Ctx, q: &CallbackQuery) -> worker::Result<()> {
    let answer = match pressed(ctx, q).await {
        Ok(text) => text,
        Err(e) => {
            worker::console_error!("a button press failed: {e}");
            "Something went wrong; press again in a moment.".to_string()
        }
    };
    let body = json!({ "callback_query_id": q.id, "text": answer });
    if let Err(e) = ctx.telegram().call("answerCallbackQuery", &body).await {
        worker::console_warn!("answerCallbackQuery failed: {e}");
    }
    Ok(())
}

async fn pressed(ctx: &Ctx, q: &CallbackQuery) -> worker::Result<String> {
    let Some((id, what)) = q.data.as_deref().and_then(suggest::parse_button) else {
        return Ok(String::new());
    };
    let db = ctx.db();
    let s = rows::suggestion(&db, id).await?;
    let row = match &s {
        Some(s) => rows::get(&db, &s.connection_id).await?,
        None => None,
    };
    let can_reply = row.as_ref().is_some_and(|r| serves(ctx, r) && r.rights().can_reply);
    let window_open = s.as_ref().is_some_and(|s| suggest::window_open(s.window_ends, now_ms()));
    let verdict = suggest::on_press(q.from.id, s.as_ref().map(|s| s.owner_id), s.as_ref().map(|s| s.status.as_str()), what, can_reply, window_open);
    let (Some(s), Some(row)) = (s, row) else {
        return Ok(match verdict {
            PressVerdict::Refuse(t) | PressVerdict::Closed(t) => t.to_string(),
            PressVerdict::Expired | PressVerdict::Go => String::new(),
        });
    };
    match verdict {
        PressVerdict::Refuse(t) | PressVerdict::Closed(t) => Ok(t.to_string()),
        PressVerdict::Go if what == Press::Skip => {
            if !rows::settle(&db, s.id, "pending", "skipped", now_ms()).await? {
                return Ok("Too late: it is being sent.".to_string());
            }
            show_ended(ctx, row.user_chat_id, &s, "skipped", None).await;
            Ok(suggest::press_done(Press::Skip).to_string())
        }
        PressVerdict::Expired => {
            withdraw(ctx, &row, &s, "expired").await?;
            Ok(suggest::TOO_LATE.to_string())
        }
        PressVerdict::Go => send(ctx, &row, &s).await,
    }
}

/// The cron's sweep: open suggestions whose 24 hours have passed are withdrawn (at most
/// `EXPIRE_BATCH` a run; the rest in the next). How many.
pub async fn expire(ctx: &Ctx) -> worker::Result<usize> {
    let db = ctx.db();
    let mut n = 0;
    for s in rows::past_window(&db, now_ms() / 1000, EXPIRE_BATCH).await? {
        // Three subrequests each (the connection, the row, the edit): what is left waits for
        // the next run rather than pass the invocation's limit.
        if ctx.meter.count() + 3 > EXPIRE_SUBREQUESTS {
            break;
        }
        match rows::get(&db, &s.connection_id).await? {
            Some(row) => withdraw(ctx, &row, &s, "expired").await?,
            None => {
                rows::settle(&db, s.id, "pending", "expired", now_ms()).await?;
            }
        }
        n += 1;
    }
    Ok(n)
}

/// Suggestions the cron withdraws in one run at most.
const EXPIRE_BATCH: i64 = 10;
/// The invocation's subrequests after which the sweep leaves the rest to the next run.
const EXPIRE_SUBREQUESTS: u32 = 45;

/// A message in the owner's private chat answering one of the bot's: if it replies to a
/// suggestion, its text becomes the suggestion (the owner's correction before Send) and the
/// owner is told so; `false` for any other message (a turn as usual). A redelivery changes
/// nothing more.
pub async fn correction(ctx: &Ctx, m: &Message) -> worker::Result<bool> {
    let Some(to) = m.reply_to_message.as_deref() else { return Ok(false) };
    let from_bot = to.from.as_ref().is_some_and(|u| u.is_bot);
    // A command typed as a reply stays a command.
    let text = m.text.as_deref().filter(|t| !t.trim_start().starts_with('/'));
    if !ctx.cfg.business || m.chat.kind != "private" || !from_bot || text.is_none() || !to.text.as_deref().is_some_and(suggest::is_suggestion_text) {
        return Ok(false);
    }
    let db = ctx.db();
    let Some(html) = text.and_then(suggest::corrected_html) else { return Ok(false) };
    let Some(s) = rows::shown_as(&db, m.chat.id, to.message_id).await? else {
        // An owner's suggestion no longer kept (pruned): said, not a turn. Anyone else's reply
        // to a bot message that merely reads like one is a message as usual.
        if rows::of_owner(&db, m.chat.id).await?.is_none() {
            return Ok(false);
        }
        tell_owner(ctx, m.chat.id, suggest::corrected_answer("gone")).await;
        return Ok(true);
    };
    let row = rows::get(&db, &s.connection_id).await?;
    // Sendable: the connection serves with the right to reply, inside Telegram's 24 hours.
    let sendable = row.as_ref().filter(|r| suggest::correctable(serves(ctx, r), r.rights().can_reply, suggest::window_open(s.window_ends, now_ms())));
    let changed = match sendable {
        Some(row) if rows::correct(&db, s.id, &html, now_ms()).await? => {
            let s = Suggestion { html, ..s.clone() };
            if let Err(e) = ctx.telegram().call("editMessageText", &open_body(row, &s, Some(to.message_id))).await {
                worker::console_warn!("suggestion {}: the corrected copy was not shown ({e})", s.id);
            }
            "pending".to_string()
        }
        // Not changed: the same text again (a redelivery or an edit that kept it: nothing to
        // say again), or sent or settled meanwhile (said as it is now).
        Some(row) => match rows::suggestion(&db, s.id).await? {
            Some(now) if now.status == "pending" && now.html == html => {
                // Shown again (a crash may have come between the change and its edit; an
                // unchanged message is refused by Telegram, harmlessly).
                if let Err(e) = ctx.telegram().call("editMessageText", &open_body(row, &now, Some(to.message_id))).await {
                    worker::console_log!("suggestion {}: the corrected copy as it was ({e})", s.id);
                }
                return Ok(true);
            }
            Some(now) => now.status,
            None => "gone".to_string(),
        },
        None if s.status == "pending" => "unsendable".to_string(),
        None => s.status.clone(),
    };
    tell_owner(ctx, m.chat.id, suggest::corrected_answer(&changed)).await;
    Ok(true)
}

/// One line to the owner about their correction (a failure is logged).
async fn tell_owner(ctx: &Ctx, owner_chat: i64, text: &str) {
    if let Err(e) = ctx.telegram().send_message(&SendMessage::text(owner_chat, text.to_string())).await {
        worker::console_warn!("the owner was not told of their correction ({e})");
    }
}

/// How a send to the contact went.
enum Delivery {
    /// Another press or run holds the send.
    Taken,
    /// Sent: the text as claimed.
    Sent(String),
    /// Failed in a way that may pass: open again.
    Busy(agent_core::telegram::api::TelegramError),
    /// Refused for good (past the 24 hours, rights taken away): failed, not tried again.
    Refused(String),
}

/// Sends a suggestion's reply to the contact, once: claimed in its row before the send (a
/// claim left by a crash lapses after `CLAIM_LEASE_MS`), kept in the chat once sent.
async fn deliver(ctx: &Ctx, row: &ConnRow, s: &Suggestion) -> worker::Result<Delivery> {
    let db = ctx.db();
    let now = now_ms();
    // The text as it is at the claim (an owner's correction just before counts).
    let Some(html) = rows::claim_send(&db, s.id, now, now - CLAIM_LEASE_MS).await? else {
        return Ok(Delivery::Taken);
    };
    let s = &Suggestion { html, ..s.clone() };
    let body = html_body(s.contact_id, s.html.clone(), "business_connection_id", json!(row.id));
    Ok(match ctx.telegram().message_call("sendMessage", &body).await {
        Ok(message_id) => {
            // It went: recorded, tried twice; never reported as not sent (a press after that
            // would send it again).
            let text = suggest::plain_of(&s.html);
            if let Err(e) = rows::sent(&db, s, message_id, &text, now_ms()).await {
                worker::console_warn!("suggestion {}: sent, its record failed once ({e})", s.id);
                if let Err(e) = rows::sent(&db, s, message_id, &text, now_ms()).await {
                    worker::console_error!("suggestion {}: sent but not recorded ({e})", s.id);
                }
            }
            Delivery::Sent(s.html.clone())
        }
        Err(e) if e.is_transient() => {
            rows::settle(&db, s.id, "sending", "pending", now_ms()).await?;
            Delivery::Busy(e)
        }
        Err(e) => {
            rows::settle(&db, s.id, "sending", "failed", now_ms()).await?;
            Delivery::Refused(e.to_string())
        }
    })
}

/// Send pressed on a suggestion: its reply to the contact, once; the press's answer.
async fn send(ctx: &Ctx, row: &ConnRow, s: &Suggestion) -> worker::Result<String> {
    Ok(match deliver(ctx, row, s).await? {
        Delivery::Taken => "It is being sent. If it has not arrived in a minute, press Send again.".to_string(),
        Delivery::Sent(html) => {
            // The owner's copy shows the text that went (a correction just before the claim).
            show_ended(ctx, row.user_chat_id, &Suggestion { html, ..s.clone() }, "sent", None).await;
            suggest::press_done(Press::Send).to_string()
        }
        Delivery::Busy(_) => "Telegram is busy: press Send again in a moment.".to_string(),
        Delivery::Refused(d) => {
            show_ended(ctx, row.user_chat_id, s, "failed", Some(suggest::refused_line(&d))).await;
            "Telegram refused to send it.".to_string()
        }
    })
}

/// Away and auto modes: the bot answers the contact itself, once; then marks the burst read
/// where the rights allow (never in draft mode). A refusal is told to the owner in one line.
async fn answer_itself(ctx: &Ctx, row: &ConnRow, s: &Suggestion, upto: i64) -> worker::Result<JobOutcome> {
    Ok(match deliver(ctx, row, s).await? {
        Delivery::Taken => held(),
        Delivery::Sent(_) => {
            if row.rights().can_read_messages {
                let body = json!({ "business_connection_id": row.id, "chat_id": s.contact_id, "message_id": upto });
                if let Err(e) = ctx.telegram().call("readBusinessMessage", &body).await {
                    worker::console_warn!("business: the contact's messages were not marked read ({e})");
                }
            }
            JobOutcome::Done
        }
        Delivery::Busy(e) => JobOutcome::Retry { error: e.to_string(), after_ms: e.retry_after_ms() },
        Delivery::Refused(d) => {
            let body = SendMessage::text(row.user_chat_id, suggest::answer_refused_line(&s.contact_name, &d));
            if let Err(e) = ctx.telegram().send_message(&body).await {
                worker::console_warn!("business: the owner was not told of a refused answer ({e})");
            }
            JobOutcome::Done
        }
    })
}

/// A Business job out of attempts (the model or Telegram kept failing): the owner is told in
/// one line that a contact waits for them, so the burst is not lost in silence.
pub async fn give_up(ctx: &Ctx, job: &Job) -> bool {
    let Job::Business { connection, .. } = job else { return true };
    let row = match rows::get(&ctx.db(), connection).await {
        Ok(Some(row)) => row,
        Ok(None) => return true,
        Err(_) => return false,
    };
    let body = SendMessage::text(row.user_chat_id, suggest::GAVE_UP.to_string());
    match ctx.telegram().send_message(&body).await {
        Ok(_) => true,
        Err(e) if e.is_transient() => false,
        Err(e) => {
            worker::console_warn!("business: the owner was not told of a lost reply ({e})");
            true
        }
    }
}
