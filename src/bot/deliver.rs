//! Delivery: carrying out a plan step through the Bot API, exactly once.
//!
//! Invariants (INVARIANTS.md): "Exactly-once sends", "Early chunks are the plan's chunks"
//! (here: [`send_early_chunk`], from `bot/stream.rs`, sends under the key its step's delivery
//! then skips).
//!
//! Also:
//! - Replies are Markdown rendered to Telegram HTML and split at 4096; a chunk Telegram
//!   refuses to parse is sent again as plain text, once; a reply to a message that is gone is
//!   sent without the reply; forum topic and reply parameters go on every chunk.
//! - 429, 5xx and network errors come back as [`StepError::Retry`] (the caller queues a job);
//!   403 marks the chat blocked and stops; other 400s fail the step.
//! - The bot's sent messages are stored as bot messages of the turn, so history shows them.
//! - Link previews are off for a turn's send step the core marked `no_link_preview` (it links
//!   something no person posted) and for any other text with a link in it.

use crate::config::{now_ms, Ctx, SUBREQUEST_BUDGET};
use crate::storage::outbox::{self, BotRow, OutboxRow, Sent};
use crate::storage::chats;
use agent_core::conversation::{ConvKey, Part};
use agent_core::format::{render_reply, split::TELEGRAM_LIMIT, Chunk};
use agent_core::chat::plan::{Step, StepOutcome};
use agent_core::telegram::api::{
    self, Delivery, LinkPreviewOptions, ReactionTypeEmoji, ReplyParameters, SendMessage, SendSticker, StickerSet, TelegramError,
};
use serde_json::json;
use agent_core::format::rich::{self, RichChunk};
use std::cell::Cell;

thread_local! {
    /// Until when rich answers are off in this isolate: Telegram said it has no rich methods.
    static RICH_OFF_UNTIL: Cell<i64> = const { Cell::new(0) };
}

/// Whether the rich methods may be tried now (not refused as missing in the last ten minutes).
pub fn rich_available() -> bool {
    RICH_OFF_UNTIL.with(Cell::get) <= now_ms()
}

/// Telegram refused a rich message or draft with `e`: when the method itself is missing, rich
/// answers are off in this isolate for a while (as drafts are: `core::telegram::drafts`).
pub fn rich_refused(e: &TelegramError) {
    if e.rich_method_missing() {
        RICH_OFF_UNTIL.with(|c| c.set(now_ms() + agent_core::telegram::drafts::DRAFTS_OFF_MS));
    }
}

/// Whether rich answers are on for this chat at all (no look at an answer): `RICH_MESSAGES=auto`,
/// a private chat (a group's answer is read on every member's client; one person's setting
/// cannot speak for the others'), the person did not say `/rich off`, and the methods were not
/// refused lately. `rich_off`: the person's setting, when the caller has it.
pub fn rich_on(ctx: &Ctx, conv: &ConvKey, rich_off: bool) -> bool {
    ctx.cfg.rich_messages && conv.chat_id > 0 && !rich_off && rich_available()
}

/// Whether a turn's send step goes as rich messages: rich answers are on here, the answer
/// needs them (`core::format::rich::needs_rich`) and links nothing no person posted (a rich
/// message has no `link_preview_options`; such an answer goes as today's message, with
/// previews off). The person's setting is read only for an answer that needs rich.
async fn rich_wanted(ctx: &Ctx, conv: &ConvKey, markdown: &str, no_link_preview: bool) -> bool {
    if no_link_preview || !rich_on(ctx, conv, false) || !rich::needs_rich(markdown) {
        return false;
    }
    match crate::storage::prefs::rich_off(&ctx.db(), conv.chat_id).await {
        Ok(off) => !off,
        Err(e) => {
            worker::console_warn!("chat {conv}: the rich setting could not be read ({e}); an ordinary message");
            false
        }
    }
}

/// The request that sends a rich chunk.
fn rich_body(conv: &ConvKey, chunk: &RichChunk, reply_to: Option<i64>) -> api::SendRichMessage {
    api::SendRichMessage {
        chat_id: conv.chat_id,
        message_thread_id: conv.thread_id,
        rich_message: api::InputRichMessage { html: chunk.html.clone(), skip_entity_detection: true },
        reply_parameters: reply_to.map(|m| ReplyParameters { message_id: m, allow_sending_without_reply: true }),
    }
}

/// Whether `key` is an ordinary chunk's key of step `step_key` (`{step_key}/{i}`, or its
/// replacement `{i}r`), not a rich chunk's (`{step_key}/r{i}`).
fn is_ordinary_key(key: &str, step_key: &str) -> bool {
    key.strip_prefix(step_key).and_then(|k| k.strip_prefix('/')).is_some_and(|k| k.starts_with(|c: char| c.is_ascii_digit()))
}

/// Sends a turn's answer as rich messages (`core::format::rich::render_rich`), chunk `i` under
/// `{step_key}/r{i}`, exactly once each. `Ok(None)`: the step goes as ordinary messages
/// instead (the answer does not fit rich messages, or an ordinary chunk of it went out
/// already: sent early while it streamed, or after a refusal). Where Telegram refuses a rich
/// chunk (the method, or its payload), that chunk and the rest go as today's HTML messages,
/// once: the whole answer under the step's own keys when it was the first chunk, else the rest
/// under the sub-step `{step_key}/r{i}h`; a retry that finds that sub-step started does not
/// try the rich chunk again.
async fn send_rich_step(ctx: &Ctx, guard: &Guard, conv: &ConvKey, step_key: &str, markdown: &str, reply_to: Option<i64>, turn_id: &str) -> Result<Option<Vec<i64>>, StepError> {
    let Some(chunks) = rich::render_rich(markdown) else { return Ok(None) };
    let retry = |e: worker::Error| StepError::Retry { error: e.to_string(), after_ms: None };
    let first_key = format!("{step_key}/r0");
    let first_body = serde_json::to_string(&rich_body(conv, &chunks[0], reply_to)).unwrap_or_default();
    let pending = outbox::Pending { key: &first_key, step_key, conv, method: "sendRichMessage", body: &first_body };
    let done = outbox::of_step_recording(&ctx.db(), step_key, &pending, now_ms()).await.map_err(retry)?;
    if done.iter().any(|r| is_ordinary_key(&r.key, step_key)) {
        return Ok(None);
    }
    let tg = ctx.telegram();
    let mut ids = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let key = format!("{step_key}/r{i}");
        let row = done.iter().find(|r| r.key == key);
        if let Some(r) = row.filter(|r| r.status == "sent") {
            ids.extend(r.tg_message_id);
            continue;
        }
        let sub = format!("{step_key}/r{i}h");
        // An earlier attempt failed on this chunk: had it fallen back, the rest is ordinary.
        let fell_back = row.is_some_and(|r| r.status == "failed") && i > 0
            && !outbox::of_step(&ctx.db(), &sub).await.map_err(retry)?.is_empty();
        if fell_back || !rich_available() {
            ids.extend(rich_fallback(ctx, guard, conv, (step_key, markdown), &chunks, i, reply_to, turn_id).await?);
            return Ok(Some(ids));
        }
        if ctx.meter.count() + 3 > SUBREQUEST_BUDGET {
            return Err(StepError::Yield);
        }
        let mut body = rich_body(conv, chunk, reply_to.filter(|_| i == 0));
        if key != first_key {
            record_pending(ctx, &key, step_key, conv, "sendRichMessage", &serde_json::to_string(&body).unwrap_or_default()).await.map_err(retry)?;
        }
        if !guard.wanted() {
            return Err(StepError::Cancelled);
        }
        let mut result = tg.send_rich_message(&body).await;
        if matches!(result, Err(TelegramError::ReplyNotFound)) && body.reply_parameters.is_some() {
            body.reply_parameters = None;
            if !guard.wanted() {
                return Err(StepError::Cancelled);
            }
            result = tg.send_rich_message(&body).await;
        }
        match result {
            Ok(message_id) => {
                let sent = Sent { key: &key, conv, message_id: Some(message_id), plain: false, parts: vec![Part::text(chunk.markdown.clone())], turn_id: Some(turn_id), unrecorded: false };
                if let Err(e) = record_sent(ctx, sent).await {
                    worker::console_error!("outbox {key}: sent as {message_id} but not recorded: {e}");
                }
                ids.push(message_id);
            }
            Err(e) if e.refuses_rich() => {
                worker::console_warn!("chat {conv}: Telegram refused rich chunk {i} ({e}); it goes as an ordinary message");
                rich_refused(&e);
                let _ = outbox::record_failed(&ctx.db(), &key, &format!("rich refused: {e}")).await;
                ids.extend(rich_fallback(ctx, guard, conv, (step_key, markdown), &chunks, i, reply_to, turn_id).await?);
                return Ok(Some(ids));
            }
            Err(e) => {
                let err = classify(e);
                mark_failed(ctx, conv, &key, &err).await;
                return Err(err);
            }
        }
    }
    Ok(Some(ids))
}

/// Rich chunks `from..` as today's HTML messages (see [`send_rich_step`]).
/// From the first chunk that is the whole answer, as the step would have sent it without rich
/// answers.
#[allow(clippy::too_many_arguments)]
async fn rich_fallback(ctx: &Ctx, guard: &Guard, conv: &ConvKey, (step_key, markdown): (&str, &str), chunks: &[RichChunk], from: usize, reply_to: Option<i64>, turn_id: &str) -> Result<Vec<i64>, StepError> {
    if from == 0 {
        send_text_with(ctx, guard, conv, step_key, markdown, reply_to, Some(turn_id), false).await
    } else {
        let rest: Vec<&str> = chunks[from..].iter().map(|c| c.markdown.as_str()).collect();
        let rest = rest.join("\n\n");
        send_text_with(ctx, guard, conv, &format!("{step_key}/r{from}h"), &rest, None, Some(turn_id), false).await
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum StepError {
    /// May pass: retry later (no sooner than `after_ms`).
    Retry { error: String, after_ms: Option<u64> },
    /// Will not pass. `blocked`: Telegram said the bot may not write to this chat.
    Fatal { error: String, blocked: bool },
    /// Not failed: this invocation has used its subrequest budget; continue in the next one
    /// (what was sent is in the outbox and is not sent again).
    Yield,
    /// Not sent: the step was cancelled (a new message replaced the plan) before the call.
    Cancelled,
}


impl StepError {
    pub fn message(&self) -> &str {
        match self {
            StepError::Retry { error, .. } | StepError::Fatal { error, .. } => error,
            StepError::Yield => "yielded to the next invocation",
            StepError::Cancelled => "cancelled before it was sent",
        }
    }
}

/// Whether the plan step being carried out is still wanted: the chat object's answer, asked
/// right before every Telegram call with no await between, so a step a newer message cancelled
/// is never sent (INVARIANTS.md, "A cancelled step is never sent"). Sends outside a plan
/// (apologies, commands, a streamed answer's early chunks) are always wanted: `Guard::default()`.
#[derive(Clone, Default)]
pub struct Guard(Option<std::rc::Rc<dyn Fn() -> bool>>);

impl Guard {
    pub fn new(wanted: impl Fn() -> bool + 'static) -> Self {
        Guard(Some(std::rc::Rc::new(wanted)))
    }
    pub fn wanted(&self) -> bool {
        self.0.as_ref().is_none_or(|g| g())
    }
}

/// A Bot API error as a step's error (`TelegramError::delivery` decides which).
fn classify(e: TelegramError) -> StepError {
    match e.delivery() {
        Delivery::Retry { after_ms } => StepError::Retry { after_ms, error: e.to_string() },
        Delivery::Fatal { blocked } => StepError::Fatal { error: e.to_string(), blocked },
    }
}

fn bot_row(ctx: &Ctx) -> BotRow {
    BotRow {
        id: ctx.secrets.bot_id(),
        name: ctx.cfg.bot_name.clone(),
        username: Some(ctx.cfg.bot_username.clone()).filter(|u| !u.is_empty()),
    }
}

/// Stores what was sent as a bot message (under its key, or marking its outbox row sent), in
/// one round trip.
async fn record_sent(ctx: &Ctx, s: Sent<'_>) -> worker::Result<()> {
    outbox::record_sent(&ctx.db(), s, &bot_row(ctx), now_ms()).await
}

async fn mark_failed(ctx: &Ctx, conv: &ConvKey, key: &str, error: &StepError) {
    if let Err(e) = outbox::record_failed(&ctx.db(), key, error.message()).await {
        worker::console_error!("outbox {key}: could not record the failure: {e}");
    }
    if let StepError::Fatal { blocked: true, error } = error {
        worker::console_warn!("chat {} is blocked for the bot: {error}", conv.chat_id);
        let _ = chats::mark_blocked(&ctx.db(), conv.chat_id, error, now_ms()).await;
    }
}

async fn already_sent(ctx: &Ctx, step_key: &str) -> worker::Result<Vec<OutboxRow>> {
    outbox::of_step(&ctx.db(), step_key).await
}

async fn record_pending(ctx: &Ctx, key: &str, step_key: &str, conv: &ConvKey, method: &str, body: &str) -> worker::Result<()> {
    outbox::record_pending(&ctx.db(), &outbox::Pending { key, step_key, conv, method, body }, now_ms()).await
}

/// Sends one chunk, falling back at most once each to plain text (when Telegram refuses the
/// HTML) and to no reply (when the message to reply to is gone), so the same error never
/// loops. Returns the result and whether it went as plain text.
async fn send_with_fallbacks(
    guard: &Guard,
    tg: &crate::outbound::telegram::TelegramClient,
    body: &mut SendMessage,
    plain_text: &str,
    key: &str,
) -> Result<(Result<i64, TelegramError>, bool), StepError> {
    let mut plain = false;
    let mut result = tg.send_message(body).await;
    for _ in 0..2 {
        match &result {
            Err(TelegramError::CantParseEntities(d)) if !plain => {
                worker::console_warn!("Telegram refused the HTML of {key} ({d}); sending plain text");
                body.text = plain_text.to_string();
                body.parse_mode = None;
                plain = true;
            }
            Err(TelegramError::ReplyNotFound) if body.reply_parameters.is_some() => {
                body.reply_parameters = None;
            }
            _ => break,
        }
        if !guard.wanted() {
            return Err(StepError::Cancelled);
        }
        result = tg.send_message(body).await;
    }
    Ok((result, plain))
}

/// Sends Markdown text as one or more messages under `step_key`; returns the message ids.
/// Chunks already sent under this key are not sent again. Text the bot composes outside a
/// turn (commands, notices) knows of no link a person posted, so any link in it goes out
/// without a preview.
pub async fn send_text(
    ctx: &Ctx,
    conv: &ConvKey,
    step_key: &str,
    markdown: &str,
    reply_to: Option<i64>,
    turn_id: Option<&str>,
) -> Result<Vec<i64>, StepError> {
    send_text_with(ctx, &Guard::default(), conv, step_key, markdown, reply_to, turn_id, no_preview_of(markdown)).await
}

/// Whether a text the bot sends outside a turn's plan goes without link previews: any link in
/// it is one no person posted (`fetch::needs_preview_off` with no posted links).
pub fn no_preview_of(markdown: &str) -> bool {
    agent_core::fetch::needs_preview_off(markdown, &Default::default())
}

/// [`send_text`] under a plan step's `guard` (sent only while the step is wanted) and with the
/// link-preview decision made by the caller (a turn's send step carries the core's decision;
/// a picture step's line said instead, [`no_preview_of`]).
#[allow(clippy::too_many_arguments)]
pub async fn send_text_with(
    ctx: &Ctx,
    guard: &Guard,
    conv: &ConvKey,
    step_key: &str,
    markdown: &str,
    reply_to: Option<i64>,
    turn_id: Option<&str>,
    no_link_preview: bool,
) -> Result<Vec<i64>, StepError> {
    let chunks = render_reply(markdown, TELEGRAM_LIMIT);
    let retry = |e: worker::Error| StepError::Retry { error: e.to_string(), after_ms: None };
    // What the step sent before (nothing is written before a chunk's send: its message, stored
    // under its key once sent, is its record).
    let done = already_sent(ctx, step_key).await.map_err(retry)?;
    let tg = ctx.telegram();
    let mut ids = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let key = match slot(&done, step_key, i, chunk) {
            Slot::Sent(id) => {
                ids.extend(id);
                continue;
            }
            Slot::Free(key) => key,
        };
        // Each chunk costs three subrequests; a long reply continues in the next invocation.
        if ctx.meter.count() + 3 > SUBREQUEST_BUDGET {
            return Err(StepError::Yield);
        }
        let reply_to = reply_to.filter(|_| i == 0);
        ids.push(send_chunk(ctx, guard, &tg, conv, &key, chunk, (reply_to, no_link_preview), turn_id).await?);
    }
    Ok(ids)
}

/// The request that sends `chunk` (what the outbox records before the send).
fn chunk_body(conv: &ConvKey, chunk: &Chunk, reply_to: Option<i64>, no_link_preview: bool) -> SendMessage {
    SendMessage {
        chat_id: conv.chat_id,
        message_thread_id: conv.thread_id,
        text: chunk.html.clone(),
        parse_mode: Some("HTML".into()),
        reply_parameters: reply_to.map(|m| ReplyParameters { message_id: m, allow_sending_without_reply: true }),
        link_preview_options: no_link_preview.then_some(LinkPreviewOptions { is_disabled: true }),
    }
}

/// Where chunk `i` of a step stands in the outbox.
enum Slot {
    /// Sent already (with this message id): not again.
    Sent(Option<i64>),
    /// To send, under this key.
    Free(String),
}

/// The outbox slot of chunk `i` of a step. A key sent with another text holds a chunk sent
/// early while an answer streamed (`bot/stream.rs`) that this answer does not have (the
/// stream was cut and the retried turn answered anew, or the answer was refused at its end):
/// this chunk then goes out under the key's replacement (`{key}r`), never lost and never
/// mixed into an answer it is not part of. A chunk's text is its request's (an outbox row) or
/// its stored message's (a chunk recorded by its message alone).
fn slot(done: &[OutboxRow], step_key: &str, i: usize, chunk: &Chunk) -> Slot {
    let key = format!("{step_key}/{i}");
    let sent = |k: &str| done.iter().find(|r| r.key == k && r.status == "sent");
    let same = |r: &OutboxRow| -> bool {
        if let Some(text) = &r.sent_text {
            return *text == outbox::stored_text(&[Part::text(chunk.plain.clone())]);
        }
        let body: Option<serde_json::Value> = r.body.as_deref().and_then(|b| serde_json::from_str(b).ok());
        body.and_then(|b| b.get("text")?.as_str().map(str::to_string)).is_none_or(|t| t == chunk.html)
    };
    match sent(&key) {
        None => Slot::Free(key),
        Some(row) if same(row) => Slot::Sent(row.tg_message_id),
        Some(_) => {
            let again = format!("{key}r");
            sent(&again).map_or(Slot::Free(again), |r| Slot::Sent(r.tg_message_id))
        }
    }
}

/// Sends one chunk under `key`: nothing is written before the send (a crash then sends it
/// again, as it would a chunk that was at Telegram); once sent, the bot's message is stored
/// under the key, which is what a re-run of the step finds. Returns Telegram's message id.
#[allow(clippy::too_many_arguments)]
async fn send_chunk(
    ctx: &Ctx,
    guard: &Guard,
    tg: &crate::outbound::telegram::TelegramClient,
    conv: &ConvKey,
    key: &str,
    chunk: &Chunk,
    (reply_to, no_link_preview): (Option<i64>, bool),
    turn_id: Option<&str>,
) -> Result<i64, StepError> {
    let mut body = chunk_body(conv, chunk, reply_to, no_link_preview);
    if !guard.wanted() {
        return Err(StepError::Cancelled);
    }
    let (result, plain) = send_with_fallbacks(guard, tg, &mut body, &chunk.plain, key).await?;
    match result {
        Ok(message_id) => {
            let sent = Sent { key, conv, message_id: Some(message_id), plain, parts: vec![Part::text(chunk.plain.clone())], turn_id, unrecorded: true };
            if let Err(e) = record_sent(ctx, sent).await {
                // Sent but not recorded: log loudly; a retry could send this chunk again.
                worker::console_error!("outbox {key}: sent as {message_id} but not recorded: {e}");
            }
            Ok(message_id)
        }
        Err(e) => {
            let err = classify(e);
            mark_failed(ctx, conv, key, &err).await;
            Err(err)
        }
    }
}

/// Sends chunk `i` of a turn's send step before the turn is over: a chunk of a streamed answer
/// that can no longer change (`core::format::draft::settled_chunks`), under exactly the key the
/// step's delivery uses for it, so that delivery skips it. `Ok(false)`: that key was already
/// sent (an earlier attempt of the turn): nothing is sent early any more. In a private chat a
/// turn's first send step replies to nothing, so neither does this chunk.
pub async fn send_early_chunk(ctx: &Ctx, conv: &ConvKey, step_key: &str, i: usize, chunk: &Chunk, (no_link_preview, after_seq): (bool, i64), turn_id: &str) -> Result<bool, StepError> {
    let key = format!("{step_key}/{i}");
    // The step's rows, read as the step's own delivery reads them, after the newest message
    // the attempt saw (the turn's row may not be written yet).
    let done = outbox::of_step_after(&ctx.db(), step_key, after_seq).await.map_err(|e| StepError::Retry { error: e.to_string(), after_ms: None })?;
    if done.iter().any(|r| r.key == key && r.status == "sent") {
        return Ok(false);
    }
    send_chunk(ctx, &Guard::default(), &ctx.telegram(), conv, &key, chunk, (None, no_link_preview), Some(turn_id)).await.map(|_| true)
}

async fn react(ctx: &Ctx, guard: &Guard, conv: &ConvKey, step_key: &str, message_id: i64, emoji: &str, turn_id: Option<&str>) -> Result<StepOutcome, StepError> {
    let key = format!("{step_key}/0");
    let retry = |e: worker::Error| StepError::Retry { error: e.to_string(), after_ms: None };
    let body = api::SetMessageReaction {
        chat_id: conv.chat_id,
        message_id,
        reaction: vec![ReactionTypeEmoji { kind: "emoji".into(), emoji: emoji.to_string() }],
    };
    // The step's rows as they were, read with the reaction recorded as pending (left as it is
    // when it was set already).
    let body_json = serde_json::to_string(&body).unwrap_or_default();
    let pending = outbox::Pending { key: &key, step_key, conv, method: "setMessageReaction", body: &body_json };
    if outbox::of_step_recording(&ctx.db(), step_key, &pending, now_ms()).await.map_err(retry)?.iter().any(|r| r.status == "sent") {
        return Ok(StepOutcome::Done);
    }
    if !guard.wanted() {
        return Err(StepError::Cancelled);
    }
    match ctx.telegram().call("setMessageReaction", &body).await {
        Ok(_) => {
            let parts = vec![Part::Event { kind: "reaction".into(), detail: format!("{emoji} to #{message_id}") }];
            let sent = Sent { key: &key, conv, message_id: None, plain: false, parts, turn_id, unrecorded: false };
            if let Err(e) = record_sent(ctx, sent).await {
                worker::console_error!("outbox {key}: reaction set but not recorded: {e}");
            }
            Ok(StepOutcome::Done)
        }
        Err(e) => {
            let err = classify(e);
            mark_failed(ctx, conv, &key, &err).await;
            Err(err)
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn sticker(
    ctx: &Ctx,
    guard: &Guard,
    conv: &ConvKey,
    step_key: &str,
    set_name: &str,
    emoji: &str,
    reply_to: Option<i64>,
    turn_id: Option<&str>,
) -> Result<StepOutcome, StepError> {
    let key = format!("{step_key}/0");
    let retry = |e: worker::Error| StepError::Retry { error: e.to_string(), after_ms: None };
    if let Some(row) = already_sent(ctx, step_key).await.map_err(retry)?.into_iter().find(|r| r.status == "sent") {
        return Ok(StepOutcome::Sent { message_ids: row.tg_message_id.into_iter().collect() });
    }
    let tg = ctx.telegram();
    let set: StickerSet = match tg.call("getStickerSet", &json!({"name": set_name})).await {
        Ok(v) => serde_json::from_value(v).map_err(|e| StepError::Fatal { error: e.to_string(), blocked: false })?,
        Err(e) => return Err(classify(e)),
    };
    let wanted = emoji.trim().trim_end_matches('\u{fe0f}');
    let chosen = set
        .stickers
        .iter()
        .find(|s| s.emoji.as_deref().is_some_and(|e| e.trim_end_matches('\u{fe0f}') == wanted))
        .or_else(|| set.stickers.first())
        .ok_or_else(|| StepError::Fatal { error: format!("sticker set {set_name} is empty"), blocked: false })?;
    let body = SendSticker {
        chat_id: conv.chat_id,
        message_thread_id: conv.thread_id,
        sticker: chosen.file_id.clone(),
        reply_parameters: reply_to.map(|m| ReplyParameters { message_id: m, allow_sending_without_reply: true }),
    };
    record_pending(ctx, &key, step_key, conv, "sendSticker", &serde_json::to_string(&body).unwrap_or_default())
        .await
        .map_err(retry)?;
    if !guard.wanted() {
        return Err(StepError::Cancelled);
    }
    match tg.message_call("sendSticker", &body).await {
        Ok(id) => {
            let parts = vec![Part::Media {
                kind: "sticker".into(),
                detail: format!("{} from set {set_name}", chosen.emoji.clone().unwrap_or_default()),
                file_id: Some(chosen.file_id.clone()),
                file_unique_id: None,
                mime_type: None,
                thumb_file_id: None,
                size: None,
            }];
            let sent = Sent { key: &key, conv, message_id: Some(id), plain: false, parts, turn_id, unrecorded: false };
            if let Err(e) = record_sent(ctx, sent).await {
                worker::console_error!("outbox {key}: sticker sent but not recorded: {e}");
            }
            Ok(StepOutcome::Sent { message_ids: vec![id] })
        }
        Err(e) => {
            let err = classify(e);
            mark_failed(ctx, conv, &key, &err).await;
            Err(err)
        }
    }
}

/// Carries out one visible step of a plan (waits are handled by the caller).
pub async fn deliver_step(
    ctx: &Ctx,
    guard: &Guard,
    conv: &ConvKey,
    turn_id: &str,
    index: usize,
    step: &Step,
    default_reply_to: Option<i64>,
) -> Result<StepOutcome, StepError> {
    let step_key = format!("{turn_id}/{index}");
    match step {
        Step::Send { text, reply_to, no_link_preview } => {
            let reply_to = reply_to.or(default_reply_to);
            if rich_wanted(ctx, conv, text, *no_link_preview).await {
                if let Some(ids) = send_rich_step(ctx, guard, conv, &step_key, text, reply_to, turn_id).await? {
                    return Ok(StepOutcome::Sent { message_ids: ids });
                }
            }
            let ids = send_text_with(ctx, guard, conv, &step_key, text, reply_to, Some(turn_id), *no_link_preview).await?;
            Ok(StepOutcome::Sent { message_ids: ids })
        }
        Step::React { message_id, emoji } => react(ctx, guard, conv, &step_key, *message_id, emoji, Some(turn_id)).await,
        Step::Sticker { set_name, emoji, reply_to } => {
            sticker(ctx, guard, conv, &step_key, set_name, emoji, reply_to.or(default_reply_to), Some(turn_id)).await
        }
        Step::Wait { .. } => Ok(StepOutcome::Done),
        // A picture step is `bot::image`'s (the chat object's plan calls it).
        Step::Image { .. } => Err(StepError::Fatal { error: "a picture step goes through bot::image".into(), blocked: false }),
    }
}
