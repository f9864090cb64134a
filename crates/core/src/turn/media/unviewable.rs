//! What can never be viewed (its type, its stated size) or whose file is gone: [`Unviewable`],
//! kept with its status and reason so nothing fetches it for its own sake.
use super::describe::Described;
use super::inline::{MediaLimits, Treatment, Wanted, admit};
use crate::history::{HistoryMessage, Role};

/// Why an item can never be viewed under the current limits (or its file is gone): kept in
/// `media` with this status and the reason, so the operator sees it and no turn or job tries
/// it again for its own sake (a turn that answers it, or a reply to it, still tries once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unviewable {
    pub unique_id: String,
    pub kind: String,
    pub mime: Option<String>,
    pub size: Option<u64>,
    /// `unsupported` (a type Gemini does not read), `too_large` (over Telegram's download cap
    /// or over a whole turn's media limit) or `failed` (the file is gone: see [`fetch_refused`]).
    pub status: &'static str,
    pub reason: String,
}

/// Why `w` can never be viewed, known without fetching it: its type, or the size Telegram gave
/// (over the download cap, or over a whole turn's limit). `None`: it may be fetched.
pub fn never_viewable(w: &Wanted, limits: &MediaLimits) -> Option<Unviewable> {
    let (status, reason, mime) = match &w.treatment {
        // An animated sticker is seen (and described) through its thumbnail.
        Treatment::NotViewed { .. } if w.kind == "sticker" && w.thumb.is_some() => return None,
        Treatment::NotViewed { reason } => ("unsupported", reason.clone(), w.mime_type.clone()),
        Treatment::Inline { mime } => ("too_large", admit(&w.kind, w.size?, 0, limits).err()?, Some(w.mime_type.clone().unwrap_or_else(|| mime.clone()))),
    };
    Some(Unviewable { unique_id: w.unique_id.clone()?, kind: w.kind.clone(), mime, size: w.size, status, reason })
}

/// Whether Telegram's answer to `getFile` says the file is over its download cap.
pub fn telegram_too_big(error: &str) -> bool {
    error.contains("file is too big")
}

/// What a failed fetch of `w` says for good (kept, so no turn's look at the window fetches it
/// again): `too_large` when Telegram said it is over its download cap (the message did not say
/// its size), `failed` when Telegram refused the file id (expired, unknown), the download is
/// gone (404) or the file is empty. Anything else (the turn's subrequest or byte budget, a
/// network or server error) may pass: `None`.
pub fn fetch_refused(w: &Wanted, reason: &str) -> Option<Unviewable> {
    let (status, reason) = if telegram_too_big(reason) {
        ("too_large", format!("{}, over Telegram's 20 MB download limit", w.kind))
    } else if reason.ends_with("too large to view") {
        ("too_large", reason.to_string())
    } else if reason.starts_with("could not be fetched (bad request") || reason.ends_with("answered 404)") || reason == "the file is empty" {
        ("failed", reason.to_string())
    } else {
        return None;
    };
    let unique_id = w.unique_id.clone().filter(|u| !u.is_empty())?;
    Some(Unviewable { unique_id, kind: w.kind.clone(), mime: w.mime_type.clone(), size: w.size, status, reason })
}

/// The items of people's messages in `messages` that can never be viewed and are not in `media`
/// yet (`known`), each key once: recorded as such, at no cost (no fetch, no model call).
pub fn unviewable(messages: &[HistoryMessage], known: &[Described], limits: &MediaLimits) -> Vec<Unviewable> {
    let mut out: Vec<Unviewable> = Vec::new();
    for m in messages.iter().filter(|m| m.role == Role::User) {
        for u in m.parts.iter().filter_map(|p| Wanted::of(m, p)).filter_map(|w| never_viewable(&w, limits)) {
            if !known.iter().any(|d| d.file_unique_id == u.unique_id) && !out.iter().any(|o| o.unique_id == u.unique_id) {
                out.push(u);
            }
        }
    }
    out
}
