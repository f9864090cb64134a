//! Media a turn looks at: which photos, voice notes, documents, stickers and videos of the
//! messages a turn answers are given to Gemini as bytes (`inlineData`), with which MIME type,
//! within which limits, and what the model is told instead when one is not viewed.
//!
//! Invariants:
//! - Only media of the messages the turn answers (people's messages newer than the last
//!   answered turn) and of the message the newest of them replies to are fetched; older
//!   history never re-sends bytes.
//! - At most [`MAX_ITEMS_PER_TURN`] items and `MediaLimits::bytes_per_turn` bytes a turn; no
//!   file over Telegram's download cap is fetched. An item that is not viewed becomes a text
//!   part saying what it is and why; the turn always happens.
//! - Only MIME types Gemini reads inline are sent; anything else is named, never sent.

use crate::conversation::Part as MsgPart;
use crate::gemini::{Content, GenerateContentRequest, GenerationConfig, Part};
use serde::Deserialize;
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
const IMAGES: [&str; 5] = ["image/jpeg", "image/png", "image/webp", "image/heic", "image/heif"];
/// Document types Gemini reads inline.
const DOCUMENTS: [&str; 6] = ["application/pdf", "text/plain", "text/markdown", "text/csv", "text/html", "text/xml"];

/// Gemini's audio type for a Telegram audio MIME type.
fn audio_mime(mime: &str) -> Option<&'static str> {
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
    pub treatment: Treatment,
}

/// The media of the messages a turn answers (people's messages after `answered_seq`, and the
/// person's message the newest of them replies to, when it is in the window), in message order and in the order Telegram gave
/// them, at most [`MAX_ITEMS_PER_TURN`].
pub fn wanted(messages: &[HistoryMessage], answered_seq: i64) -> Vec<Wanted> {
    let new: Vec<&HistoryMessage> = messages.iter().filter(|m| m.seq > answered_seq && m.role == Role::User).collect();
    let replied = new
        .last()
        .and_then(|m| m.reply_to)
        .and_then(|id| messages.iter().find(|m| m.message_id == Some(id) && m.role == Role::User));
    let mut chosen: Vec<&HistoryMessage> = replied.into_iter().filter(|r| !new.iter().any(|n| n.seq == r.seq)).collect();
    chosen.extend(new);
    chosen.sort_by_key(|m| m.seq);
    let mut out = Vec::new();
    for m in chosen {
        for p in &m.parts {
            if let MsgPart::Media { kind, detail, file_id: Some(file_id), mime_type, file_unique_id, thumb_file_id } = p {
                let label = if detail.is_empty() { kind.clone() } else { format!("{kind} {detail}") };
                let treatment = treatment(kind, mime_type.as_deref(), detail);
                let (unique_id, thumb) = (file_unique_id.clone(), thumb_file_id.clone());
                out.push(Wanted { seq: m.seq, message_id: m.message_id, kind: kind.clone(), label, file_id: file_id.clone(), unique_id, thumb, treatment });
            }
        }
    }
    out.truncate(MAX_ITEMS_PER_TURN);
    out
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

/// A stored description (a row of `media`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Described {
    pub file_unique_id: String,
    pub status: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub transcript: Option<String>,
}

/// The description keys of the media in `messages` (for reading what is known of them).
pub fn unique_ids(messages: &[HistoryMessage]) -> Vec<String> {
    let mut ids: Vec<String> = messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            MsgPart::Media { file_unique_id: Some(u), .. } => Some(u.clone()),
            _ => None,
        })
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// Puts what is known of each media item into its part's detail, so both history formats show
/// it instead of a bare placeholder: `photo: 720x1280 — a tabby cat on a windowsill`, and for
/// speech `… — said: "…"`.
pub fn annotate(messages: &mut [HistoryMessage], known: &[Described]) {
    for m in messages.iter_mut() {
        for p in m.parts.iter_mut() {
            let MsgPart::Media { detail, file_unique_id: Some(u), .. } = p else { continue };
            let Some(d) = known.iter().find(|d| &d.file_unique_id == u && d.status == "ok") else { continue };
            let mut said = d.description.clone().unwrap_or_default().trim().to_string();
            if let Some(t) = d.transcript.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
                if !said.is_empty() {
                    said.push_str("; ");
                }
                said.push_str(&format!("said: \"{t}\""));
            }
            if said.is_empty() {
                continue;
            }
            *detail = if detail.is_empty() { said } else { format!("{detail} — {said}") };
        }
    }
}

/// The items a turn has described: viewed ones (their bytes are here) whose key has no
/// description yet, each key once, at most `budget`.
pub fn to_describe(items: &[(Wanted, Seen)], known: &[Described], budget: usize) -> Vec<usize> {
    let mut keys: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for (i, (w, seen)) in items.iter().enumerate() {
        let Some(key) = w.unique_id.as_deref() else { continue };
        if !matches!(seen, Seen::Inline { .. }) || known.iter().any(|d| d.file_unique_id == key) || keys.contains(&key) {
            continue;
        }
        if out.len() >= budget {
            break;
        }
        keys.push(key);
        out.push(i);
    }
    out
}

/// Media of the window that no turn has described and this turn does not look at (chatter
/// nobody asked about, or items over an earlier turn's budget), newest first, at most `budget`,
/// each key once: a turn fills them in alongside its own call, so a later question about them
/// finds a description. Only kinds that can be viewed; people's messages only.
pub fn undescribed(messages: &[HistoryMessage], known: &[Described], looked_at: &[Wanted], budget: usize) -> Vec<Wanted> {
    let mut out: Vec<Wanted> = Vec::new();
    for m in messages.iter().rev().filter(|m| m.role == Role::User) {
        for p in &m.parts {
            let MsgPart::Media { kind, detail, file_id: Some(file_id), mime_type, file_unique_id: Some(key), thumb_file_id } = p else { continue };
            let seen = known.iter().any(|d| &d.file_unique_id == key)
                || looked_at.iter().any(|w| w.unique_id.as_ref() == Some(key))
                || out.iter().any(|w| w.unique_id.as_ref() == Some(key));
            let treatment = treatment(kind, mime_type.as_deref(), detail);
            if seen || !matches!(treatment, Treatment::Inline { .. }) {
                continue;
            }
            if out.len() >= budget {
                return out;
            }
            let label = if detail.is_empty() { kind.clone() } else { format!("{kind} {detail}") };
            out.push(Wanted {
                seq: m.seq,
                message_id: m.message_id,
                kind: kind.clone(),
                label,
                file_id: file_id.clone(),
                unique_id: Some(key.clone()),
                thumb: thumb_file_id.clone(),
                treatment,
            });
        }
    }
    out
}

/// The JSON a description call answers with.
pub fn describe_schema() -> serde_json::Value {
    json!({
        "type": "OBJECT",
        "properties": {
            "description": {"type": "STRING"},
            "transcript": {"type": "STRING"}
        },
        "required": ["description"]
    })
}

/// The request of a description call: the prompt (`prompts/media/describe.md`), the item's
/// kind, and its bytes.
pub fn describe_request(template: &str, w: &Wanted, mime: &str, base64: &str) -> GenerateContentRequest {
    let mut inline = Part::default();
    inline.extra.insert("inlineData".into(), json!({"mimeType": mime, "data": base64}));
    GenerateContentRequest {
        system_instruction: Some(Content { role: None, parts: vec![Part::text(template.trim_end())] }),
        contents: vec![Content::user(vec![Part::text(format!("A {} sent in a Telegram chat.", w.kind)), inline])],
        tools: Vec::new(),
        tool_config: None,
        generation_config: Some(GenerationConfig {
            response_mime_type: Some("application/json".into()),
            response_schema: Some(describe_schema()),
            max_output_tokens: Some(1024),
            thinking_config: None,
        }),
    }
}

/// The description and transcript in a description call's JSON, trimmed and capped (model
/// output is untrusted: at most 600 and 4,000 characters).
pub fn parse_description(value: &serde_json::Value) -> Option<(String, Option<String>)> {
    let cap = |s: &str, n: usize| s.trim().chars().take(n).collect::<String>();
    let description = cap(value.get("description")?.as_str()?, 600);
    if description.is_empty() {
        return None;
    }
    let transcript = value.get("transcript").and_then(|t| t.as_str()).map(|t| cap(t, 4000)).filter(|t| !t.is_empty());
    Some((description, transcript))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Part as M;

    fn media(kind: &str, detail: &str, file: &str, mime: Option<&str>) -> M {
        M::Media { kind: kind.into(), detail: detail.into(), file_id: Some(file.into()), file_unique_id: None, mime_type: mime.map(String::from), thumb_file_id: None }
    }

    fn msg(seq: i64, role: Role, parts: Vec<M>, reply_to: Option<i64>) -> HistoryMessage {
        HistoryMessage {
            seq,
            message_id: Some(100 + seq),
            role,
            user_id: Some(7),
            name: "A".into(),
            username: None,
            reply_to,
            reply_info: None,
            forwarded_from: None,
            parts,
            date: 0,
            edited: false,
            turn_id: None,
            answered_upto: None,
        }
    }

    #[test]
    fn kinds_map_to_what_gemini_reads() {
        let inline = |m: &str| Treatment::Inline { mime: m.into() };
        assert_eq!(treatment("photo", None, "1280x960"), inline("image/jpeg"));
        assert_eq!(treatment("voice", Some("audio/ogg"), "3s"), inline("audio/ogg"));
        assert_eq!(treatment("audio", Some("audio/mpeg"), ""), inline("audio/mp3"));
        assert_eq!(treatment("audio", Some("audio/x-m4a"), ""), inline("audio/aac"));
        assert_eq!(treatment("video_note", None, ""), inline("video/mp4"));
        assert_eq!(treatment("gif", Some("video/mp4"), ""), inline("video/mp4"));
        assert_eq!(treatment("sticker", Some("image/webp"), "😀, set x"), inline("image/webp"));
        assert_eq!(treatment("sticker", None, "😀, set x, video, id u1"), inline("video/webm"));
        assert!(matches!(treatment("sticker", None, "😀, animated"), Treatment::NotViewed { .. }));
        assert_eq!(treatment("document", Some("application/PDF"), ""), inline("application/pdf"));
        assert_eq!(treatment("document", Some("image/png"), ""), inline("image/png"));
        assert!(matches!(treatment("document", Some("application/zip"), ""), Treatment::NotViewed { reason } if reason.contains("application/zip")));
        assert!(matches!(treatment("audio", Some("audio/x-ms-wma"), ""), Treatment::NotViewed { .. }));
        assert!(matches!(treatment("document", None, ""), Treatment::NotViewed { .. }));
    }

    #[test]
    fn only_the_media_the_turn_answers_and_the_message_it_replies_to() {
        let msgs = vec![
            msg(1, Role::User, vec![media("photo", "800x600", "old", None)], None),
            msg(2, Role::User, vec![media("photo", "800x600", "older-unrelated", None)], None),
            msg(3, Role::Bot, vec![M::text("nice")], None),
            msg(4, Role::User, vec![M::text("and this one?"), media("voice", "2s", "v", None)], Some(101)),
        ];
        let w = wanted(&msgs, 3);
        assert_eq!(w.iter().map(|w| w.file_id.as_str()).collect::<Vec<_>>(), vec!["old", "v"]);
        assert_eq!(w[0].label, "photo 800x600");
        assert_eq!(wanted(&msgs, 4), vec![], "nothing new: nothing fetched");
        // The bot's own media are never fetched, not even when replied to.
        let bot = vec![msg(1, Role::Bot, vec![media("sticker", "", "s", None)], None), msg(2, Role::User, vec![M::text("ha")], Some(101))];
        assert_eq!(wanted(&bot, 0), vec![]);
    }

    #[test]
    fn an_album_keeps_telegram_order_and_the_count_is_capped() {
        let msgs: Vec<_> = (1..=12).map(|s| msg(s, Role::User, vec![media("photo", "", &format!("p{s}"), None)], None)).collect();
        let w = wanted(&msgs, 0);
        assert_eq!(w.len(), MAX_ITEMS_PER_TURN);
        assert_eq!(w[0].file_id, "p1");
        assert_eq!(w[9].file_id, "p10");
    }

    #[test]
    fn sizes_over_telegrams_cap_or_the_turns_limit_are_not_viewed_with_the_reason() {
        let limits = MediaLimits { bytes_per_turn: 10 << 20 };
        assert_eq!(admit("photo", 300 << 10, 0, &limits), Ok(()));
        assert_eq!(admit("video", 48 << 20, 0, &limits), Err("video, 48.0 MB, too large to view".into()));
        assert_eq!(admit("video", 6 << 20, 5 << 20, &limits), Err("video, 6.0 MB, over this turn's media limit".into()));
        assert_eq!(admit("voice", 5 << 20, 5 << 20, &limits), Ok(()));
    }

    #[test]
    fn a_viewed_item_is_a_label_then_inline_data_and_the_rest_say_why() {
        let w = Wanted { seq: 1, message_id: Some(35), kind: "photo".into(), label: "photo 2x2".into(), file_id: "f".into(), unique_id: None, thumb: None, treatment: Treatment::Inline { mime: "image/jpeg".into() } };
        let p = parts(&w, &Seen::Inline { mime: "image/jpeg".into(), base64: "AAEC".into() });
        assert_eq!(p[0].text.as_deref(), Some("[#35 photo 2x2, attached]"));
        assert_eq!(serde_json::to_value(&p[1]).unwrap(), json!({"inlineData": {"mimeType": "image/jpeg", "data": "AAEC"}}));
        let p = parts(&w, &Seen::Thumbnail { mime: "image/jpeg".into(), base64: "AAEC".into(), reason: "video, 48.0 MB, too large to view".into() });
        assert_eq!(p[0].text.as_deref(), Some("[#35 photo 2x2: not viewed: video, 48.0 MB, too large to view; its thumbnail is attached]"));
        assert!(p[1].extra.contains_key("inlineData"));
        assert_eq!(thumbnail_mime("sticker"), "image/webp");
        assert_eq!(thumbnail_mime("video"), "image/jpeg");
        let p = parts(&w, &Seen::NotViewed { reason: "could not be fetched".into() });
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].text.as_deref(), Some("[#35 photo 2x2: not viewed: could not be fetched]"));
    }

    #[test]
    fn without_bytes_names_what_was_to_be_sent_and_keeps_the_other_reasons() {
        let w = |seq, kind: &str| Wanted { seq, message_id: Some(seq), kind: kind.into(), label: kind.into(), file_id: "f".into(), unique_id: None, thumb: None, treatment: Treatment::Inline { mime: "image/jpeg".into() } };
        let items = vec![
            (w(1, "photo"), Seen::Inline { mime: "image/jpeg".into(), base64: "AAAA".into() }),
            (w(1, "sticker"), Seen::NotViewed { reason: "an animated sticker, which I cannot view".into() }),
        ];
        assert!(any_inline(&items));
        let plain = without_bytes(&items, "the model could not read it");
        assert!(!any_inline(&plain));
        let parts = by_message(&plain);
        let texts: Vec<_> = parts[&1].iter().map(|p| p.text.clone().unwrap_or_default()).collect();
        assert_eq!(texts, vec!["[#1 photo: not viewed: the model could not read it]", "[#1 sticker: not viewed: an animated sticker, which I cannot view]"]);
        assert_eq!(by_message(&items)[&1].len(), 3, "label and bytes, then the sticker's reason");
    }

    #[test]
    fn known_descriptions_and_transcripts_show_in_history_and_the_rest_stay_placeholders() {
        let part = |u: &str, detail: &str| M::Media { kind: "photo".into(), detail: detail.into(), file_id: Some("f".into()), file_unique_id: Some(u.into()), mime_type: None, thumb_file_id: None };
        let mut msgs = vec![msg(1, Role::User, vec![part("a", "720x1280"), part("b", ""), part("c", "3s"), part("d", "")], None)];
        let known = vec![
            Described { file_unique_id: "a".into(), status: "ok".into(), description: Some("a tabby cat".into()), transcript: None },
            Described { file_unique_id: "b".into(), status: "failed".into(), description: Some("stale".into()), transcript: None },
            Described { file_unique_id: "c".into(), status: "ok".into(), description: Some("a voice note".into()), transcript: Some(" see you at 6 ".into()) },
        ];
        assert_eq!(unique_ids(&msgs), vec!["a", "b", "c", "d"]);
        annotate(&mut msgs, &known);
        let text = msgs[0].compact_text();
        assert!(text.contains("[photo: 720x1280 — a tabby cat]"), "{text}");
        assert!(text.contains("[photo]"), "a failed one stays a placeholder: {text}");
        assert!(text.contains("[photo: 3s — a voice note; said: \"see you at 6\"]"), "{text}");
    }

    #[test]
    fn each_unknown_viewed_key_is_described_once_within_the_budget() {
        let item = |u: Option<&str>, inline: bool| {
            let w = Wanted { seq: 1, message_id: Some(1), kind: "sticker".into(), label: "sticker".into(), file_id: "f".into(), unique_id: u.map(String::from), thumb: None, treatment: Treatment::Inline { mime: "image/webp".into() } };
            let seen = if inline { Seen::Inline { mime: "image/webp".into(), base64: "AAAA".into() } } else { Seen::NotViewed { reason: "x".into() } };
            (w, seen)
        };
        let items = vec![item(Some("s1"), true), item(Some("s1"), true), item(Some("known"), true), item(Some("s2"), false), item(None, true), item(Some("s3"), true), item(Some("s4"), true)];
        let known = vec![Described { file_unique_id: "known".into(), status: "ok".into(), description: None, transcript: None }];
        assert_eq!(to_describe(&items, &known, 4), vec![0, 5, 6]);
        assert_eq!(to_describe(&items, &known, 1), vec![0]);
        assert_eq!(to_describe(&items, &known, 0), Vec::<usize>::new());
    }

    #[test]
    fn descriptions_are_trimmed_capped_and_required() {
        assert_eq!(parse_description(&json!({"description": " a cat ", "transcript": ""})), Some(("a cat".into(), None)));
        assert_eq!(parse_description(&json!({"description": "x", "transcript": " hi "})), Some(("x".into(), Some("hi".into()))));
        assert_eq!(parse_description(&json!({"description": "  "})), None);
        assert_eq!(parse_description(&json!({"transcript": "hi"})), None);
        let long = parse_description(&json!({"description": "é".repeat(5000)})).unwrap();
        assert_eq!(long.0.chars().count(), 600);
    }

    #[test]
    fn undescribed_window_media_are_filled_in_newest_first_within_the_budget() {
        let part = |u: &str, kind: &str| M::Media { kind: kind.into(), detail: String::new(), file_id: Some(format!("f-{u}")), file_unique_id: Some(u.into()), mime_type: None, thumb_file_id: None };
        let msgs = vec![
            msg(1, Role::User, vec![part("old", "photo")], None),
            msg(2, Role::User, vec![part("known", "photo"), part("anim", "location")], None),
            msg(3, Role::Bot, vec![part("bots", "sticker")], None),
            msg(4, Role::User, vec![part("new", "photo"), part("new", "photo")], None),
            msg(5, Role::User, vec![part("current", "photo")], None),
        ];
        let known = vec![Described { file_unique_id: "known".into(), status: "ok".into(), description: None, transcript: None }];
        let current = wanted(&msgs, 4);
        let keys = |w: Vec<Wanted>| w.into_iter().filter_map(|w| w.unique_id).collect::<Vec<_>>();
        assert_eq!(keys(undescribed(&msgs, &known, &current, 4)), vec!["new", "old"]);
        assert_eq!(keys(undescribed(&msgs, &known, &current, 1)), vec!["new"]);
        assert_eq!(keys(undescribed(&msgs, &known, &current, 0)), Vec::<String>::new());
    }
}
