//! Guest mode at the edge (Bot API 10.0; decisions in `agent_core::guest`). The webhook hands a
//! `guest_message` here ([`handle`]): when getMe says `supports_guest_queries`, the caller is
//! checked (access policy in the host chat, budgets) and the query answered at once, inside
//! Telegram's time limit, with a placeholder (`answerGuestQuery`); a `Job::Guest` on the
//! `JOBS` queue then asks the model from the update alone and edits the answer in through the
//! returned `inline_message_id` ([`run`], called by the queue consumer).
//!
//! Invariants (INVARIANTS.md): "A guest answer sees only its update". Also:
//! - Exactly once: the placeholder and the edit each go through the outbox (keys
//!   `guest:<query_id>/placeholder/0` and `guest:<query_id>/answer/0`), under the caller's own
//!   private chat id: nothing stored names the host chat. A redelivered update whose
//!   placeholder is sent answers nothing again (and queues the job only when no edit was tried).
//!   A crash after the placeholder went out but before it was marked leaves it pending: the
//!   redelivery tries it again and Telegram refuses the second answer (400), so it is never
//!   shown twice; its answer is then lost (the `inline_message_id` is unknown).
//! - A retried edit that finds its text there ("message is not modified") counts as sent; a
//!   retried job edits the answer its earlier run wrote in the outbox row (no second model
//!   call); the row's body is cleared once the edit is sent.
//! - The job's deadline: `guest::GUEST_DEADLINE_MS` after the webhook, or its last attempt,
//!   edits a short apology in instead; nothing waits longer. A placeholder always ends as an
//!   answer or an apology: a dead-lettered job edits the apology in ([`give_up`]), and the
//!   cron's [`sweep`] ends every placeholder whose answer never went out (a crash between the
//!   placeholder's record and its job). Only a crash while `answerGuestQuery` was at Telegram
//!   loses the `inline_message_id` (no API tells it again): that placeholder stays.
//! - A refused caller gets one short answer (no model call, nothing stored): refusing in
//!   silence would leave their summons to time out with no word.

use crate::config::{now_ms, Ctx};
use crate::outbound::queues;
use crate::storage::{access as rows, outbox};
use agent_core::access::policy::UserAccess;
use agent_core::background::jobs::{Job, JobOutcome};
use agent_core::conversation::ConvKey;
use agent_core::guest::{self, GuestJob, GuestQuery, GuestVerdict};
use agent_core::telegram::api::TelegramError;
use agent_core::telegram::Message;
use serde_json::Value;

fn step(query_id: &str, what: &str) -> String {
    format!("guest:{query_id}/{what}")
}

/// Handles a `guest_message`. `Err` only when the update should come again (the placeholder's
/// fate is unknown for a reason that may pass, or the job could not be queued).
pub async fn handle(ctx: &Ctx, raw: &Message) -> worker::Result<()> {
    match ctx.telegram().me().await {
        Ok(me) if me.supports_guest_queries => {}
        Ok(_) => {
            worker::console_log!("ignoring a guest message: guest mode is off (BotFather)");
            return Ok(());
        }
        Err(e) => {
            worker::console_warn!("ignoring a guest message: getMe failed ({e})");
            return Ok(());
        }
    }
    let Some(q) = GuestQuery::of(raw) else {
        worker::console_log!("ignoring a guest message with no query id or no person calling");
        return Ok(());
    };
    let db = ctx.db();
    let conv = ConvKey::chat(q.caller_id);
    let placeholder_step = step(&q.query_id, "placeholder");
    let placeholder_key = format!("{placeholder_step}/0");
    let done = outbox::of_step(&db, &placeholder_step).await?;
    let known = done.iter().find(|r| r.key == placeholder_key);
    let inline_id = match known {
        // A redelivery: the placeholder went out; queue the edit unless one was tried.
        Some(r) if r.status == "sent" => {
            let Some(inline_id) = r.body.clone().filter(|b| !b.is_empty()) else { return Ok(()) };
            if !outbox::of_step(&db, &step(&q.query_id, "answer")).await?.is_empty() {
                return Ok(());
            }
            inline_id
        }
        Some(r) if r.status == "failed" => return Ok(()),
        other => match send_placeholder(ctx, &q, &conv, other.is_none()).await? {
            Some(inline_id) => inline_id,
            None => return Ok(()),
        },
    };
    let data = GuestJob { inline_message_id: inline_id, name: q.caller_name, text: q.text, replied: q.replied, created_ms: now_ms() }.to_data();
    let job = Job::Guest { query_id: q.query_id, caller: q.caller_id, data, attempt: 1 };
    queues::enqueue(ctx, &job, 0).await
}

/// Whether the caller gets an answer (`guest::decide`; charged one when so); a refused caller
/// gets one short answer, nothing stored (a second one Telegram refuses).
async fn admit(ctx: &Ctx, q: &GuestQuery) -> worker::Result<bool> {
    let db = ctx.db();
    let now = now_ms();
    let (level, used) = rows::run_state(&db, q.caller_id, Some(q.caller_id), now).await?;
    match guest::decide(&ctx.cfg, q, level.as_deref().and_then(UserAccess::parse), &used, now) {
        GuestVerdict::Refuse(text) => {
            let body = guest::answer_body(&q.query_id, &guest::plain_html(text));
            if let Err(e) = ctx.telegram().call("answerGuestQuery", &body).await {
                worker::console_warn!("a refused guest query's answer failed: {e}");
            }
            Ok(false)
        }
        GuestVerdict::Answer => {
            if !ctx.cfg.admin_user_ids.contains(&q.caller_id) {
                rows::charge(&db, q.caller_id, q.caller_id, now, Some(&format!("guest:{}", q.query_id))).await?;
            }
            Ok(true)
        }
    }
}

/// Answers the query with the placeholder, once; its `inline_message_id`, or `None` when there
/// is nothing to edit (refused caller, expired query). `first`: first sight of the update (a
/// pending placeholder whose fate is unknown is tried again without checking and charging the
/// caller again).
async fn send_placeholder(ctx: &Ctx, q: &GuestQuery, conv: &ConvKey, first: bool) -> worker::Result<Option<String>> {
    if first && !admit(ctx, q).await? {
        return Ok(None);
    }
    let db = ctx.db();
    let step_key = step(&q.query_id, "placeholder");
    let key = format!("{step_key}/0");
    let body = guest::placeholder(&q.query_id);
    let pending = outbox::Pending { key: &key, step_key: &step_key, conv, method: "answerGuestQuery", body: &body.to_string() };
    outbox::record_pending(&db, &pending, now_ms()).await?;
    match ctx.telegram().call("answerGuestQuery", &body).await {
        Ok(sent) => {
            let Some(inline_id) = sent.get("inline_message_id").and_then(Value::as_str).map(str::to_string) else {
                outbox::record_failed(&db, &key, "no inline_message_id in SentGuestMessage").await?;
                return Ok(None);
            };
            outbox::record_sent_with_body(&db, &key, &inline_id, now_ms()).await?;
            Ok(Some(inline_id))
        }
        Err(e) if e.is_transient() => Err(worker::Error::RustError(format!("answerGuestQuery: {e}"))),
        Err(e) => {
            // Expired, already answered or refused: nothing to edit.
            worker::console_warn!("answerGuestQuery refused: {e}");
            outbox::record_failed(&db, &key, &e.to_string()).await?;
            Ok(None)
        }
    }
}

/// Runs a guest job: the model's answer (or, past the deadline or the last attempt, an
/// apology) edited into the placeholder, once.
pub async fn run(ctx: &Ctx, job: &Job) -> JobOutcome {
    let Job::Guest { query_id, caller, data, attempt } = job else {
        return JobOutcome::Failed { error: "not a guest job".into() };
    };
    let Some(g) = GuestJob::from_data(data) else {
        return JobOutcome::Failed { error: "an unreadable guest job".into() };
    };
    let db = ctx.db();
    let answer_step = step(query_id, "answer");
    let tried = match outbox::of_step(&db, &answer_step).await {
        Ok(rows) if rows.iter().any(|r| r.status == "sent") => return JobOutcome::Done,
        // An edit tried before (failed in a way that may pass, or a crash): the same body
        // again, with no second model call.
        Ok(rows) => rows.into_iter().find_map(|r| r.body).and_then(|b| serde_json::from_str::<Value>(&b).ok()).filter(|b| b.get("text").is_some()),
        Err(e) => return JobOutcome::Retry { error: e.to_string(), after_ms: None },
    };
    let asked = [g.text.as_str(), g.replied.as_deref().unwrap_or("")];
    let body = match (tried, guest::job_gives_up(g.created_ms, *attempt, now_ms())) {
        (Some(body), None) => body,
        (_, Some(sorry)) => guest::edit_body(&g.inline_message_id, &guest::plain_html(sorry), &asked),
        (None, None) => {
            // The caller's usage record: under their own private chat, never the host chat.
            let html = match super::one_shot::ask(ctx, &guest::request(&g.query(query_id, *caller)), *caller, "guest").await {
                Ok(Some(text)) => guest::answer_html(&text),
                Ok(None) => guest::plain_html(guest::FAILED_TEXT),
                Err(e) if e.is_transient() => return JobOutcome::Retry { error: e.to_string(), after_ms: e.retry_after_ms() },
                Err(e) => {
                    worker::console_warn!("a guest answer failed: {e}");
                    guest::plain_html(guest::FAILED_TEXT)
                }
            };
            guest::edit_body(&g.inline_message_id, &html, &asked)
        }
    };
    edit(ctx, &answer_step, *caller, &body).await
}

/// Edits the answer (`body`, `guest::edit_body`'s) into the guest message, once (outbox key
/// `<step>/0`).
async fn edit(ctx: &Ctx, answer_step: &str, caller: i64, body: &Value) -> JobOutcome {
    let db = ctx.db();
    let key = format!("{answer_step}/0");
    let conv = ConvKey::chat(caller);
    let pending = outbox::Pending { key: &key, step_key: answer_step, conv: &conv, method: "editMessageText", body: &body.to_string() };
    if let Err(e) = outbox::record_pending(&db, &pending, now_ms()).await {
        return JobOutcome::Retry { error: e.to_string(), after_ms: None };
    }
    match ctx.telegram().call("editMessageText", body).await {
        Ok(_) => {}
        Err(TelegramError::BadRequest(d)) if guest::already_edited(&d) => {}
        Err(e) if e.is_transient() => return JobOutcome::Retry { error: e.to_string(), after_ms: e.retry_after_ms() },
        Err(e) => {
            worker::console_warn!("the guest answer's edit was refused: {e}");
            let _ = outbox::record_failed(&db, &key, &e.to_string()).await;
            return JobOutcome::Done;
        }
    }
    // Marked sent with its body cleared: the answer is not kept once it is out.
    if let Err(e) = outbox::record_sent_with_body(&db, &key, "", now_ms()).await {
        worker::console_error!("outbox {key}: sent but not recorded: {e}");
    }
    JobOutcome::Done
}

/// Ends a guest answer that will not come (a dead-lettered job, a placeholder past its deadline
/// with no answer): `text` edited into the placeholder `inline_id`, once, under the answer's
/// own outbox key (an answer already sent is left alone). Whether it is settled (false: the
/// edit may pass later; try again).
pub async fn give_up(ctx: &Ctx, query_id: &str, caller: i64, inline_id: &str, text: &str) -> bool {
    let answer_step = step(query_id, "answer");
    match outbox::of_step(&ctx.db(), &answer_step).await {
        Ok(rows) if rows.iter().any(|r| r.status == "sent") => return true,
        Ok(_) => {}
        Err(e) => {
            worker::console_warn!("guest {query_id}: the answer's record could not be read ({e})");
            return false;
        }
    }
    let body = guest::edit_body(inline_id, &guest::plain_html(text), &[]);
    matches!(edit(ctx, &answer_step, caller, &body).await, JobOutcome::Done)
}

/// The cron's sweep: every placeholder sent more than `guest::SWEEP_AFTER_MS` ago whose answer
/// never went out (a crash before its job was queued, a job lost) gets the late apology, so a
/// placeholder always ends as an answer or an apology. At most `guest::SWEEP_BATCH` a run.
pub async fn sweep(ctx: &Ctx) -> usize {
    let now = now_ms();
    let open = match outbox::open_guests(&ctx.db(), now - guest::SWEEP_SINCE_MS, now - guest::SWEEP_AFTER_MS, guest::SWEEP_BATCH).await {
        Ok(open) => open,
        Err(e) => {
            worker::console_error!("guest sweep: the open placeholders could not be read ({e})");
            return 0;
        }
    };
    let mut ended = 0;
    for g in open {
        let Some(query_id) = g.step_key.strip_prefix("guest:").and_then(|k| k.strip_suffix("/placeholder")) else { continue };
        if give_up(ctx, query_id, g.chat_id, &g.body, guest::LATE_TEXT).await {
            ended += 1;
        }
    }
    ended
}
