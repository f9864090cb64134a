//! The media a turn looks at: for each item `agent_core::turn::media::wanted` picks, `getFile`, then
//! the download, as `inlineData` for the message's content; or, when it is not viewed, the
//! reason (`agent_core::turn::media::admit` and the item's treatment decide).
//!
//! Invariants (INVARIANTS.md): "Media bytes go only into the turn that answers them" (never
//! into D1, logs or errors), "Media are described once".
//!
//! Also:
//! - A failure (an expired file id, "file is too big", a 404, a cut download) or a kind that
//!   cannot be viewed (an animated sticker) comes with its thumbnail when it has one that fits.
//! - Each item costs two subrequests; past the turn's tool budget the rest are not fetched.
//! - A description is made by `MEDIA_MODEL` from the bytes the turn already has and kept by
//!   `file_unique_id`, a failed attempt too. An item that can never be viewed (its type; over
//!   Telegram's cap or a whole turn's limit, by its stated size or by Telegram's refusal) is
//!   kept in `media` as `unsupported` or `too_large`; one whose file is gone (an expired file
//!   id, a 404) is kept as `failed`, so only a turn that answers it (or a reply to it) tries
//!   again.

use super::tools::TURN_TOOL_BUDGET;
use crate::config::{now_ms, prompts, Ctx};
use crate::storage::{self, media::Made};
use agent_core::conversation::ConvKey;
use agent_core::gemini::Outcome;
use agent_core::turn::media::{self, Described, MediaLimits, Seen, Treatment, Unviewable, Wanted};
use agent_core::turn::{CallRecord, ModelPort};
use base64::Engine;

/// What became of each item the turn wants (`agent_core::turn::media::by_message` makes the parts),
/// and the items whose fetch failed for good (`agent_core::turn::media::fetch_refused`: over
/// Telegram's cap, or the file is gone; kept so no look at the window fetches them again).
/// Items that can never be viewed by their type or stated size are not asked for at all.
pub async fn load(ctx: &Ctx, wanted: &[Wanted]) -> (Vec<(Wanted, Seen)>, Vec<Unviewable>) {
    let limits = MediaLimits { bytes_per_turn: ctx.cfg.media_bytes_per_turn };
    let mut used = 0u64;
    let mut out = Vec::new();
    let mut refused = Vec::new();
    for w in wanted {
        let fetched = match (media::never_viewable(w, &limits), &w.treatment) {
            (Some(never), _) => Err(never.reason),
            (None, Treatment::NotViewed { reason }) => Err(reason.clone()),
            (None, Treatment::Inline { mime }) => {
                let got = fetch(ctx, &w.kind, &w.file_id, &limits, used).await;
                if let Err(reason) = &got {
                    refused.extend(media::fetch_refused(w, reason));
                }
                got.map(|(n, base64)| (n, Seen::Inline { mime: mime.clone(), base64 }))
            }
        };
        let seen = match fetched {
            Ok((n, seen)) => {
                used += n;
                seen
            }
            Err(reason) => {
                worker::console_warn!("media of message {:?} ({}) not viewed: {reason}", w.message_id, w.kind);
                match thumbnail(ctx, w, &limits, used).await {
                    Some((n, mime, base64)) => {
                        used += n;
                        Seen::Thumbnail { mime, base64, reason }
                    }
                    None => Seen::NotViewed { reason },
                }
            }
        };
        out.push((w.clone(), seen));
    }
    (out, refused)
}

/// The item's thumbnail, when it has one that fits: its size, MIME type and base64.
async fn thumbnail(ctx: &Ctx, w: &Wanted, limits: &MediaLimits, used: u64) -> Option<(u64, String, String)> {
    let thumb = w.thumb.as_deref()?;
    let (n, base64) = fetch(ctx, "thumbnail", thumb, limits, used).await.ok()?;
    Some((n, media::thumbnail_mime(&w.kind).to_string(), base64))
}

/// Fetches one file within the turn's limits: its size and its bytes as base64.
async fn fetch(ctx: &Ctx, kind: &str, file_id: &str, limits: &MediaLimits, used: u64) -> Result<(u64, String), String> {
    if ctx.meter.count() + 2 > TURN_TOOL_BUDGET {
        return Err("not fetched: this turn's request budget is spent".into());
    }
    let tg = ctx.telegram();
    let file = tg.get_file(file_id).await.map_err(|e| format!("could not be fetched ({e})"))?;
    let path = file.file_path.ok_or("could not be fetched (no file path)")?;
    let size = file.file_size.unwrap_or(0);
    media::admit(kind, size, used, limits)?;
    let room = limits.bytes_per_turn.saturating_sub(used).min(media::TELEGRAM_DOWNLOAD_CAP) as usize;
    let (bytes, cut) = tg.download(&path, room).await.map_err(|e| format!("could not be downloaded ({e})"))?;
    if cut {
        return Err(format!("{kind}, larger than it said, over this turn's media limit"));
    }
    if bytes.is_empty() {
        return Err("the file is empty".into());
    }
    Ok((bytes.len() as u64, base64::engine::general_purpose::STANDARD.encode(&bytes)))
}

/// Describes, alongside the turn's own call, the new items the turn looks at
/// (`agent_core::turn::media::to_describe`: their bytes are in `items`) and then media of the window
/// no turn has described (`extra`: fetched here), and stores the descriptions, the calls and
/// the items that can never be viewed (`never`) in one round trip; returns what it described.
/// The description calls run at once, not one after another. A failure is stored as such;
/// nothing here fails the turn. Consolidation describes its messages' media through here too
/// (`turn_id` `None`, no `items`).
pub async fn describe(ctx: &Ctx, conv: &ConvKey, turn_id: Option<&str>, items: &[(Wanted, Seen)], chosen: &[usize], extra: &[Wanted], mut never: Vec<Unviewable>) -> Vec<Described> {
    let mut todo: Vec<(Wanted, String, String)> = chosen
        .iter()
        .filter_map(|&i| match items.get(i) {
            Some((w, Seen::Inline { mime, base64 } | Seen::Thumbnail { mime, base64, .. })) => Some((w.clone(), mime.clone(), base64.clone())),
            _ => None,
        })
        .collect();
    let limits = MediaLimits { bytes_per_turn: ctx.cfg.media_bytes_per_turn };
    for w in extra {
        let Treatment::Inline { mime } = &w.treatment else { continue };
        match fetch(ctx, &w.kind, &w.file_id, &limits, 0).await {
            Ok((_, base64)) => todo.push((w.clone(), mime.clone(), base64)),
            Err(reason) => {
                worker::console_warn!("media {:?} of message {:?} not described: {reason}", w.unique_id, w.message_id);
                never.extend(media::fetch_refused(w, &reason));
            }
        }
    }
    // Each call is one subrequest; the turn's tool budget bounds them.
    let room = TURN_TOOL_BUDGET.saturating_sub(ctx.meter.count() + 1) as usize;
    todo.truncate(room);
    let model = ctx.cfg.media_model.clone();
    let calls = futures::future::join_all(todo.iter().map(|(w, mime, base64)| describe_one(ctx, &model, w, mime, base64))).await;
    let made = todo
        .iter()
        .zip(&calls)
        .filter_map(|((w, ..), (_, d))| {
            let (description, transcript) = d.clone()?;
            Some(Described { file_unique_id: w.unique_id.clone()?, status: "ok".into(), description: Some(description), transcript })
        })
        .collect();
    store(ctx, conv, turn_id, &model, &todo, calls, &never).await;
    made
}

/// One description call: its record and, when it answered as asked, the description.
async fn describe_one(ctx: &Ctx, model: &str, w: &Wanted, mime: &str, base64: &str) -> (CallRecord, Option<(String, Option<String>)>) {
    let request = media::describe_request(prompts::media_prompt(), w, mime, base64);
    let started = now_ms();
    let result = ctx.gemini().generate(model, &request).await;
    let call = CallRecord::of(model, &result, now_ms() - started);
    let described = match result.map(|r| r.outcome()) {
        Ok(Outcome::Content(c)) => serde_json::from_str(c.visible_text().trim()).ok().and_then(|v| media::parse_description(&v)),
        _ => None,
    };
    if described.is_none() {
        worker::console_warn!("media {:?} of message {:?}: no description", w.unique_id, w.message_id);
    }
    (call, described)
}

/// Stores descriptions (or failed attempts), their calls and the items that can never be
/// viewed, in one round trip (none when there is nothing to store).
async fn store(ctx: &Ctx, conv: &ConvKey, turn_id: Option<&str>, model: &str, todo: &[(Wanted, String, String)], calls: Vec<(CallRecord, Option<(String, Option<String>)>)>, never: &[Unviewable]) {
    let db = ctx.db();
    let now = now_ms();
    let conv_s = conv.to_string();
    let mut stmts = Vec::new();
    for ((w, mime, base64), (call, described)) in todo.iter().zip(calls) {
        let size = base64.len() as u64 / 4 * 3;
        let (set_name, emoji) = media::sticker_of(w);
        let m = Made { unique_id: w.unique_id.as_deref().unwrap_or_default(), kind: &w.kind, mime, size, described, model, set_name, emoji };
        stmts.extend(storage::media::record_stmt(&db, &m, now).ok());
        stmts.extend(storage::usage::model_call_stmt(&db, turn_id, Some(&conv_s), Some(conv.chat_id), "media", &call, now).ok());
    }
    stmts.extend(never.iter().filter_map(|u| storage::media::unviewable_stmt(&db, u, now).ok()));
    if stmts.is_empty() {
        return;
    }
    if let Err(e) = db.batch(stmts).await {
        worker::console_error!("media descriptions not stored: {e}");
    }
}
