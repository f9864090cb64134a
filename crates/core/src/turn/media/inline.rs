//! Which media of a turn's messages go to Gemini as bytes (`inlineData`): the kinds and MIME
//! types it reads ([`treatment`]), the items a turn wants ([`wanted`]) with albums joined into
//! one message, the per-turn limits ([`admit`]), and the parts each item becomes once looked at
//! ([`Seen`], [`by_message`]).
use crate::conversation::Part as MsgPart;
use crate::gemini::Part;
use crate::history::{HistoryMessage, Role};
use serde_json::json;
use std::collections::BTreeMap;

/// Telegram's Bot API serves files up to 20 MB.
pub const TELEGRAM_DOWNLOAD_CAP: u64 = 20 * 1024 * 1024;
/// Items fetched per turn at most (an album of ten is one unit).
pub const MAX_ITEMS_PER_TURN: usize = 10;

/// How much media a turn may send.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MediaLimits {
    /// Bytes of media per turn (before base64). Gemini's inline request limit is 20 MB for the
    /// whole request, and base64 grows bytes by a third.
    pub bytes_per_turn: u64,
}

/// How a kind of media is given to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Treatment {
    /// Fetched and sent as `inlineData` of this MIME type.
    Inline { mime: String },
    /// Not sent; the model is told this reason.
    NotViewed { reason: String },
}

/// Image types Gemini reads inline.
pub(crate) const IMAGES: [&str; 5] = ["image/jpeg", "image/png", "image/webp", "image/heic", "image/heif"];
/// Document types Gemini reads inline.
pub(crate) const DOCUMENTS: [&str; 6] = ["application/pdf", "text/plain", "text/markdown", "text/csv", "text/html", "text/xml"];

/// Gemini's audio type for a Telegram audio MIME type.
pub(crate) fn audio_mime(mime: &str) -> Option<&'static str> {
    Some(match mime {
        "audio/mpeg" | "audio/mp3" => "audio/mp3",
        "audio/ogg" | "audio/opus" => "audio/ogg",
        "audio/wav" | "audio/x-wav" | "audio/wave" => "audio/wav",
        "audio/flac" | "audio/x-flac" => "audio/flac",
        "audio/aac" | "audio/mp4" | "audio/m4a" | "audio/x-m4a" => "audio/aac",
        "audio/aiff" | "audio/x-aiff" => "audio/aiff",
        _ => return None,
    })
}

/// How a media part of this kind (as `normalize` names them) is given to the model.
pub fn treatment(kind: &str, mime: Option<&str>, detail: &str) -> Treatment {
    let inline = |m: &str| Treatment::Inline { mime: m.to_string() };
    let not_viewed = |r: String| Treatment::NotViewed { reason: r };
    let mime = mime.map(|m| m.trim().to_ascii_lowercase());
    match kind {
        "photo" => inline("image/jpeg"),
        "voice" => inline("audio/ogg"),
        "video" | "video_note" | "gif" => inline("video/mp4"),
        "sticker" if detail.split(", ").any(|d| d == "animated") => not_viewed("an animated sticker, which I cannot view".into()),
        "sticker" if detail.split(", ").any(|d| d == "video") => inline("video/webm"),
        "sticker" => inline("image/webp"),
        "audio" => match mime.as_deref().and_then(audio_mime) {
            Some(m) => inline(m),
            None => not_viewed(format!("audio of a type I cannot play ({})", mime.as_deref().unwrap_or("unknown"))),
        },
        "document" => match mime.as_deref() {
            Some(m) if IMAGES.contains(&m) || DOCUMENTS.contains(&m) => inline(m),
            Some(m) => not_viewed(format!("a document of a type I cannot read ({m})")),
            None => not_viewed("a document of an unknown type".into()),
        },
        _ => not_viewed(format!("{kind}, which I cannot view")),
    }
}

/// One media item of the messages a turn answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Wanted {
    /// The message it belongs to.
    pub seq: i64,
    pub message_id: Option<i64>,
    pub kind: String,
    /// What the model is told the item is (`photo 1280x960`).
    pub label: String,
    pub file_id: String,
    /// Telegram's `file_unique_id`: the key of the item's description.
    pub unique_id: Option<String>,
    /// Its thumbnail's file id: viewed instead when the item itself cannot be.
    pub thumb: Option<String>,
    /// Its size as Telegram gave it in the message, when it did.
    pub size: Option<u64>,
    /// Its MIME type as Telegram gave it, when it did.
    pub mime_type: Option<String>,
    pub treatment: Treatment,
}

impl Wanted {
    /// The item of a media part of message `m` (`None` for a part that is not a file).
    pub(crate) fn of(m: &HistoryMessage, p: &MsgPart) -> Option<Wanted> {
        let MsgPart::Media { kind, detail, file_id: Some(file_id), mime_type, file_unique_id, thumb_file_id, size } = p else { return None };
        Some(Wanted {
            seq: m.seq,
            message_id: m.message_id,
            kind: kind.clone(),
            label: if detail.is_empty() { kind.clone() } else { format!("{kind} {detail}") },
            file_id: file_id.clone(),
            unique_id: file_unique_id.clone(),
            thumb: thumb_file_id.clone(),
            size: *size,
            mime_type: mime_type.clone(),
            treatment: treatment(kind, mime_type.as_deref(), detail),
        })
    }
}

/// The media of the messages a turn answers (people's messages after `answered_seq`, and the
/// person's message the newest of them replies to, when it is in the window), in message order and in the order Telegram gave
/// them, at most [`MAX_ITEMS_PER_TURN`].
pub fn wanted(messages: &[HistoryMessage], answered_seq: i64) -> Vec<Wanted> {
    let new: Vec<&HistoryMessage> = messages.iter().filter(|m| m.seq > answered_seq && m.role == Role::User).collect();
    let replied = new
        .last()
        .and_then(|m| m.reply_to)
        .and_then(|id| messages.iter().find(|m| (m.message_id == Some(id) || m.album_ids.contains(&id)) && m.role == Role::User));
    let mut chosen: Vec<&HistoryMessage> = replied.into_iter().filter(|r| !new.iter().any(|n| n.seq == r.seq)).collect();
    chosen.extend(new);
    crate::order::sort_by_key(&mut chosen, |m| m.seq);
    let mut out: Vec<Wanted> = chosen.into_iter().flat_map(|m| m.parts.iter().filter_map(|p| Wanted::of(m, p))).collect();
    out.truncate(MAX_ITEMS_PER_TURN);
    out
}

/// Joins each album (a media group: one person's messages sharing `media_group_id`, sent as
/// one by Telegram but delivered as one message per item) into one message, so a turn and its
/// history take it as one unit: all its parts in order, in the place and with the seq of its
/// newest message (so the whole album is new while any of it is, and a turn answering one of
/// its messages sees all of its items), with the message id of its first (where the caption
/// usually is); `album_ids` keeps every member's id, so a reply to any of them finds it.
pub fn join_albums(messages: &mut Vec<HistoryMessage>) {
    let key = |m: &HistoryMessage| m.media_group_id.clone().filter(|_| m.role == Role::User).map(|g| (g, m.user_id));
    let mut out: Vec<HistoryMessage> = Vec::with_capacity(messages.len());
    for m in messages.drain(..) {
        let Some(k) = key(&m) else {
            out.push(m);
            continue;
        };
        let Some(at) = out.iter().position(|o| key(o).as_ref() == Some(&k)) else {
            let mut m = m;
            m.album_ids = m.message_id.into_iter().collect();
            out.push(m);
            continue;
        };
        let mut album = out.remove(at);
        album.parts.extend(m.parts);
        album.album_ids.extend(m.message_id);
        album.seq = album.seq.max(m.seq);
        album.date = album.date.max(m.date);
        album.edited |= m.edited;
        album.reply_to = album.reply_to.or(m.reply_to);
        album.reply_info = album.reply_info.or(m.reply_info);
        out.push(album);
    }
    *messages = out;
}

/// Whether a file of `size` bytes may be fetched when `used` bytes were fetched this turn;
/// the reason when not.
pub fn admit(kind: &str, size: u64, used: u64, limits: &MediaLimits) -> Result<(), String> {
    if size > TELEGRAM_DOWNLOAD_CAP {
        return Err(format!("{kind}, {}, too large to view", human_size(size)));
    }
    if used.saturating_add(size) > limits.bytes_per_turn {
        return Err(format!("{kind}, {}, over this turn's media limit", human_size(size)));
    }
    Ok(())
}

/// `48.0 MB`, `34 KB`, `512 B`.
pub fn human_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{} KB", b >> 10),
        b => format!("{b} B"),
    }
}

/// What became of one item: its bytes (base64), its thumbnail's instead, or why it was not
/// viewed.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    Inline { mime: String, base64: String },
    /// The item was not viewed (`reason`), its thumbnail was.
    Thumbnail { mime: String, base64: String, reason: String },
    NotViewed { reason: String },
}

/// The MIME type of a kind's thumbnail: stickers have WEBP ones, the rest JPEG.
pub fn thumbnail_mime(kind: &str) -> &'static str {
    if kind == "sticker" {
        "image/webp"
    } else {
        "image/jpeg"
    }
}

/// The parts an item adds to its message: a label, then the bytes or the reason.
pub fn parts(w: &Wanted, seen: &Seen) -> Vec<Part> {
    let id = w.message_id.map_or_else(|| "#-".to_string(), |id| format!("#{id}"));
    match seen {
        Seen::Inline { mime, base64 } => {
            let mut inline = Part::default();
            inline.extra.insert("inlineData".into(), json!({"mimeType": mime, "data": base64}));
            vec![Part::text(format!("[{id} {}, attached]", w.label)), inline]
        }
        Seen::Thumbnail { mime, base64, reason } => {
            let mut inline = Part::default();
            inline.extra.insert("inlineData".into(), json!({"mimeType": mime, "data": base64}));
            vec![Part::text(format!("[{id} {}: not viewed: {reason}; its thumbnail is attached]", w.label)), inline]
        }
        Seen::NotViewed { reason } => vec![Part::text(format!("[{id} {}: not viewed: {reason}]", w.label))],
    }
}

/// The parts a turn's media add to its messages, by message seq (see [`parts`]).
pub fn by_message(items: &[(Wanted, Seen)]) -> BTreeMap<i64, Vec<Part>> {
    let mut out: BTreeMap<i64, Vec<Part>> = BTreeMap::new();
    for (w, seen) in items {
        out.entry(w.seq).or_default().extend(parts(w, seen));
    }
    out
}

/// Whether any item goes to the model as bytes.
pub fn any_inline(items: &[(Wanted, Seen)]) -> bool {
    items.iter().any(|(_, s)| matches!(s, Seen::Inline { .. } | Seen::Thumbnail { .. }))
}

/// The same items with no bytes: each one that was to be sent is named with `reason` instead
/// (when the model refused a request with media, the turn asks again without them).
pub fn without_bytes(items: &[(Wanted, Seen)], reason: &str) -> Vec<(Wanted, Seen)> {
    items
        .iter()
        .map(|(w, s)| match s {
            Seen::Inline { .. } => (w.clone(), Seen::NotViewed { reason: reason.to_string() }),
            Seen::Thumbnail { reason: why, .. } => (w.clone(), Seen::NotViewed { reason: why.clone() }),
            other => (w.clone(), other.clone()),
        })
        .collect()
}
