//! A plan's picture step (`generate_image`, `core::image`): the limits, the photos it edits,
//! the image model's call (recorded and priced like every model call), and the upload with
//! `sendPhoto`, through the outbox exactly once.
//!
//! Invariants (INVARIANTS.md): "A picture is made and sent once": the step's outbox rows
//! (`{step}/p` the photo, `{step}/0…` the line sent instead) say whether it went out; a made
//! picture is stored under the step's key (`storage::images`) before the upload, so a step
//! retried after Telegram failed sends the stored picture and never makes it again. The one
//! window: a crash between the image model's answer and that store makes it once more
//! (charged and recorded as its own call); a crash between Telegram's answer and the `sent`
//! mark is the outbox's own window.
//!
//! Also:
//! - Over a limit, refused by the image model, or refused by Telegram as a photo, the chat gets
//!   one short line instead (`core::image`'s lines), never an apology or a retry loop.
//! - Sent, the picture is stored as the bot's own photo message, described by its prompt
//!   (`core::image::description`), so later turns see what the bot showed and may edit it.
//! - The photos to edit are fetched with the main bot (file ids are per bot); the picture is
//!   sent by whoever speaks for the turn (a crew persona's own bot).

use super::deliver::StepError;
use crate::config::{now_ms, Ctx, SUBREQUEST_BUDGET};
use crate::outbound::telegram::TelegramClient;
use crate::storage::images::{self, Stored};
use crate::storage::outbox::{self, BotRow, Sent};
use agent_core::chat::plan::StepOutcome;
use agent_core::conversation::{ConvKey, Part};
use agent_core::image::{self, Ask, Made};
use agent_core::telegram::api::TelegramError;
use agent_core::turn::CallRecord;
use serde_json::json;

/// One picture step: what to make, for whom, in reply to what.
pub struct Picture<'a> {
    pub ask: Ask,
    pub for_user: Option<i64>,
    pub reply_to: Option<i64>,
    pub step_key: &'a str,
    pub turn_id: &'a str,
    /// Whether the step is still wanted, asked before each Telegram call.
    pub guard: &'a super::deliver::Guard,
}

fn retry(e: impl std::fmt::Display) -> StepError {
    StepError::Retry { error: e.to_string(), after_ms: None }
}

/// Carries out a plan's picture step `index` of `turn_id` (see the module doc).
pub async fn run_step(ctx: &Ctx, guard: &super::deliver::Guard, conv: &ConvKey, turn_id: &str, index: usize, step: &agent_core::chat::plan::Step, default_reply_to: Option<i64>) -> Result<StepOutcome, StepError> {
    let agent_core::chat::plan::Step::Image { prompt, photos, aspect_ratio, reply_to, for_user } = step else {
        return super::deliver::deliver_step(ctx, guard, conv, turn_id, index, step, default_reply_to).await;
    };
    let step_key = format!("{turn_id}/{index}");
    let ask = Ask { prompt: prompt.clone(), photos: photos.clone(), aspect_ratio: aspect_ratio.clone() };
    let picture = Picture { ask, for_user: *for_user, reply_to: reply_to.or(default_reply_to), step_key: &step_key, turn_id, guard };
    run(ctx, conv, &picture).await
}

/// Carries out a picture step (see the module doc).
pub async fn run(ctx: &Ctx, conv: &ConvKey, p: &Picture<'_>) -> Result<StepOutcome, StepError> {
    let db = ctx.db();
    let done = outbox::of_step(&db, p.step_key).await.map_err(retry)?;
    let photo_key = format!("{}/p", p.step_key);
    if let Some(sent) = done.iter().find(|r| r.status == "sent" && r.key == photo_key) {
        return Ok(StepOutcome::Sent { message_ids: sent.tg_message_id.into_iter().collect() });
    }
    if done.iter().any(|r| r.status == "sent") {
        return Ok(no_picture("the line said instead went out already"));
    }
    // The image call, the photos' downloads and the upload fit in this invocation, or wait.
    if ctx.meter.count() + 4 + 2 * p.ask.photos.len() as u32 > SUBREQUEST_BUDGET {
        return Err(StepError::Yield);
    }
    let picture = match images::stored(&db, p.step_key).await.map_err(retry)? {
        Some(stored) => stored,
        None => match make(ctx, conv, p).await? {
            Ok(stored) => stored,
            Err(line) => return say(ctx, conv, p, line).await,
        },
    };
    upload(ctx, conv, p, picture).await
}

/// Makes the picture within the limits and stores it: the stored picture, or the line to say
/// instead.
async fn make(ctx: &Ctx, conv: &ConvKey, p: &Picture<'_>) -> Result<Result<Stored, &'static str>, StepError> {
    let db = ctx.db();
    let now = now_ms();
    let operator = p.for_user.is_some_and(|u| ctx.cfg.admin_user_ids.contains(&u));
    let l = &ctx.cfg.image_limits;
    let day = agent_core::limits::day_start(now);
    // Checked and charged in one step (one chat object per topic may draw at once).
    let (charged, person, chat) = images::charge_within(&db, p.step_key, conv.chat_id, p.for_user, (l.per_person_per_day, l.per_chat_per_day), operator, now, day).await.map_err(retry)?;
    if !charged {
        return Ok(Err(image::over_limit(l, person, chat, operator).unwrap_or(image::PERSON_LIMIT_LINE)));
    }
    ctx.telegram().typing_as(conv.chat_id, conv.thread_id, "upload_photo").await;
    let sources = sources(ctx, conv, &p.ask.photos).await;
    let refs: Vec<image::Source<'_>> = sources.iter().map(|(mime, bytes)| image::Source { mime_type: mime, bytes }).collect();
    let body = image::request_body(&p.ask, &refs);
    drop(refs);
    drop(sources);
    let model = ctx.cfg.image_model.clone();
    let started = now_ms();
    let answer = ctx.gemini().generate_image(&model, &body).await;
    drop(body);
    let reading = answer.as_ref().map_err(Clone::clone).and_then(|b| image::read_answer(b).map_err(agent_core::gemini::ModelError::InvalidResponse));
    record_call(ctx, conv, p, &model, &reading, now_ms() - started).await;
    match reading {
        Ok(r) => match r.made {
            Made::Picture { mime_type, base64, caption } => {
                let stored = Stored { mime_type, caption, base64 };
                images::store(&db, p.step_key, &stored, now_ms()).await.map_err(retry)?;
                Ok(Ok(stored))
            }
            Made::Refused { line, reason } => {
                worker::console_warn!("turn {}: no picture ({reason})", p.turn_id);
                Ok(Err(if line == image::SAFETY_LINE { image::SAFETY_LINE } else if line == image::TOO_LARGE_LINE { image::TOO_LARGE_LINE } else { image::NO_PICTURE_LINE }))
            }
        },
        Err(e) if e.is_transient() => Err(StepError::Retry { error: e.to_string(), after_ms: e.retry_after_ms() }),
        Err(e) => {
            worker::console_warn!("turn {}: the image model refused the request: {e}", p.turn_id);
            Ok(Err(image::NO_PICTURE_LINE))
        }
    }
}

/// Records the image model's call (usage with its image tokens, or the error) as the turn's.
async fn record_call(ctx: &Ctx, conv: &ConvKey, p: &Picture<'_>, model: &str, reading: &Result<image::Reading, agent_core::gemini::ModelError>, duration_ms: i64) {
    let call = match reading {
        Ok(r) => CallRecord {
            model: r.model_version.clone().unwrap_or_else(|| model.to_string()),
            usage: r.usage.clone(),
            duration_ms,
            finish_reason: r.finish_reason.clone(),
            status: 200,
            search_queries: 0,
            error: None,
        },
        Err(e) => CallRecord::of(model, &Err(e.clone()), duration_ms),
    };
    let db = ctx.db();
    let stmt = crate::storage::usage::model_call_stmt(&db, Some(p.turn_id), Some(&conv.to_string()), Some(conv.chat_id), "image", &call, now_ms());
    if let Err(e) = match stmt {
        Ok(s) => db.batch(vec![s]).await.map(|_| ()),
        Err(e) => Err(e),
    } {
        worker::console_error!("turn {}: the image call could not be recorded: {e}", p.turn_id);
    }
}

/// The photos of these messages (the largest size of each, or an image document), fetched
/// with the main bot: their MIME type (by their bytes) and bytes. A message without one, or
/// one that cannot be fetched, is left out.
async fn sources(ctx: &Ctx, conv: &ConvKey, message_ids: &[i64]) -> Vec<(String, Vec<u8>)> {
    if message_ids.is_empty() {
        return Vec::new();
    }
    let rows = images::message_parts(&ctx.db(), conv.chat_id, message_ids).await.unwrap_or_default();
    let main = TelegramClient::new(&ctx.cfg.telegram_api_base, ctx.secrets.bot_token.clone(), ctx.meter.clone());
    let mut out = Vec::new();
    for id in message_ids {
        let Some(row) = rows.iter().find(|r| r.message_id == *id) else { continue };
        let parts: Vec<Part> = serde_json::from_str(&row.parts).unwrap_or_default();
        let file = parts.iter().find_map(|part| match part {
            Part::Media { kind, file_id: Some(f), mime_type, .. }
                if kind == "photo" || mime_type.as_deref().is_some_and(|m| m.starts_with("image/")) =>
            {
                Some(f.clone())
            }
            _ => None,
        });
        let Some(file_id) = file else { continue };
        let bytes = match main.get_file(&file_id).await {
            Ok(f) => match f.file_path {
                Some(path) => main.download(&path, image::MAX_SOURCE_BYTES).await.ok().filter(|(_, cut)| !cut).map(|(b, _)| b),
                None => None,
            },
            Err(e) => {
                worker::console_warn!("photo of message {id} not fetched for a picture: {e}");
                None
            }
        };
        if let Some(bytes) = bytes {
            if let Some(mime) = image::sniff_mime(&bytes) {
                out.push((mime.to_string(), bytes));
            }
        }
    }
    out
}

fn bot_row(ctx: &Ctx) -> BotRow {
    BotRow { id: ctx.secrets.bot_id(), name: ctx.cfg.bot_name.clone(), username: Some(ctx.cfg.bot_username.clone()).filter(|u| !u.is_empty()) }
}

/// What the model's call is answered with in later turns when no picture went out: the line
/// the chat got instead (the call's answer must not say a picture was sent).
fn no_picture(said: &str) -> StepOutcome {
    StepOutcome::Failed { error: format!("no picture was sent; the chat was told: {said}") }
}

/// Sends the line said instead of a picture, under the step's own keys (once).
async fn say(ctx: &Ctx, conv: &ConvKey, p: &Picture<'_>, line: &str) -> Result<StepOutcome, StepError> {
    let _ = images::forget(&ctx.db(), p.step_key).await;
    let no_preview = super::deliver::no_preview_of(line);
    super::deliver::send_text_with(ctx, p.guard, conv, p.step_key, line, p.reply_to, Some(p.turn_id), no_preview).await?;
    Ok(no_picture(line))
}

/// Uploads the stored picture with `sendPhoto` under `{step}/p`: recorded pending first,
/// marked sent and stored as the bot's photo message after.
async fn upload(ctx: &Ctx, conv: &ConvKey, p: &Picture<'_>, picture: Stored) -> Result<StepOutcome, StepError> {
    let key = format!("{}/p", p.step_key);
    let bytes = match image::decode(&picture.base64) {
        Ok(b) => b,
        Err(e) => {
            worker::console_warn!("turn {}: stored picture unusable: {e}", p.turn_id);
            return say(ctx, conv, p, image::NO_PICTURE_LINE).await;
        }
    };
    drop(picture.base64);
    let mut fields: Vec<(&str, String)> = vec![("chat_id", conv.chat_id.to_string())];
    if let Some(t) = conv.thread_id {
        fields.push(("message_thread_id", t.to_string()));
    }
    if let Some(c) = &picture.caption {
        fields.push(("caption", c.clone()));
    }
    if let Some(r) = p.reply_to {
        fields.push(("reply_parameters", json!({"message_id": r, "allow_sending_without_reply": true}).to_string()));
    }
    let record = json!({"chat_id": conv.chat_id, "caption": picture.caption, "prompt": p.ask.prompt, "bytes": bytes.len()}).to_string();
    let pending = outbox::Pending { key: &key, step_key: p.step_key, conv, method: "sendPhoto", body: &record };
    outbox::record_pending(&ctx.db(), &pending, now_ms()).await.map_err(retry)?;
    if !p.guard.wanted() {
        return Err(StepError::Cancelled);
    }
    match ctx.telegram().send_photo(conv.chat_id, &fields, (&picture.mime_type, &bytes)).await {
        Ok(sent) => {
            let detail = match &picture.caption {
                Some(c) => format!("{} (caption: {c})", image::description(&p.ask.prompt)),
                None => image::description(&p.ask.prompt),
            };
            let parts = vec![Part::Media {
                kind: "photo".into(),
                detail,
                file_id: sent.file_id,
                file_unique_id: sent.file_unique_id,
                mime_type: Some("image/jpeg".into()),
                thumb_file_id: None,
                size: sent.file_size,
            }];
            let s = Sent { key: &key, conv, message_id: Some(sent.message_id), plain: false, parts, turn_id: Some(p.turn_id), unrecorded: false };
            if let Err(e) = outbox::record_sent(&ctx.db(), s, &bot_row(ctx), now_ms()).await {
                worker::console_error!("outbox {key}: picture sent as {} but not recorded: {e}", sent.message_id);
            }
            let _ = images::forget(&ctx.db(), p.step_key).await;
            Ok(StepOutcome::Sent { message_ids: vec![sent.message_id] })
        }
        Err(TelegramError::BadRequest(desc)) => {
            // Telegram will not take it as a photo (its dimensions, its size): said, not retried.
            worker::console_warn!("turn {}: Telegram refused the picture: {desc}", p.turn_id);
            let _ = outbox::record_failed(&ctx.db(), &key, &desc).await;
            say(ctx, conv, p, "Telegram would not take the picture I made, so I couldn't send it.").await
        }
        Err(e) => {
            let err = match e.delivery() {
                agent_core::telegram::api::Delivery::Retry { after_ms } => StepError::Retry { after_ms, error: e.to_string() },
                agent_core::telegram::api::Delivery::Fatal { blocked } => StepError::Fatal { error: e.to_string(), blocked },
            };
            let _ = outbox::record_failed(&ctx.db(), &key, err.message()).await;
            if let StepError::Fatal { blocked: true, error } = &err {
                let _ = crate::storage::chats::mark_blocked(&ctx.db(), conv.chat_id, error, now_ms()).await;
            }
            Err(err)
        }
    }
}
