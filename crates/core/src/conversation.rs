//! The bot's own model of a conversation: who said what, where, as an ordered list of parts.
//!
//! These types are what D1 stores (as JSON in `messages.parts_json`) and what the prompt
//! renderers read. They are independent of Telegram's wire shapes, which `normalize` maps onto
//! them.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One conversation: a chat, or one forum topic in a chat. Each has its own Durable Object,
/// session and history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConvKey {
    pub chat_id: i64,
    /// The forum topic (`message_thread_id`), only for forum supergroups.
    pub thread_id: Option<i64>,
}

impl ConvKey {
    pub fn chat(chat_id: i64) -> Self {
        Self { chat_id, thread_id: None }
    }

    /// Parses the form [`fmt::Display`] writes: `chat_id` or `chat_id:thread_id`.
    pub fn parse(s: &str) -> Option<Self> {
        let mut it = s.splitn(2, ':');
        let chat_id = it.next()?.parse().ok()?;
        let thread_id = match it.next() {
            Some(t) => Some(t.parse().ok()?),
            None => None,
        };
        Some(Self { chat_id, thread_id })
    }
}

/// Serde for a [`ConvKey`] as its text form (`chat_id` or `chat_id:thread_id`), the form jobs
/// on the queues and the chat object's metadata have always carried:
/// `#[serde(with = "crate::conversation::conv_key_text")]`.
pub mod conv_key_text {
    use super::ConvKey;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(key: &ConvKey, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(key)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ConvKey, D::Error> {
        let text = String::deserialize(d)?;
        ConvKey::parse(&text).ok_or_else(|| D::Error::custom(format!("not a conversation key: {text:?}")))
    }
}

impl fmt::Display for ConvKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.thread_id {
            Some(t) => write!(f, "{}:{}", self.chat_id, t),
            None => write!(f, "{}", self.chat_id),
        }
    }
}

/// Private chat, group, supergroup or channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatKind {
    Private,
    Group,
    Supergroup,
    Channel,
}

impl ChatKind {
    pub fn from_telegram(kind: &str, chat_id: i64) -> Self {
        match kind {
            "private" => ChatKind::Private,
            "group" => ChatKind::Group,
            "supergroup" => ChatKind::Supergroup,
            "channel" => ChatKind::Channel,
            _ if chat_id > 0 => ChatKind::Private,
            _ => ChatKind::Group,
        }
    }
    pub fn is_group(self) -> bool {
        matches!(self, ChatKind::Group | ChatKind::Supergroup)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            ChatKind::Private => "private",
            ChatKind::Group => "group",
            ChatKind::Supergroup => "supergroup",
            ChatKind::Channel => "channel",
        }
    }
}

/// The chat a message was sent in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatInfo {
    pub id: i64,
    pub kind: ChatKind,
    pub title: Option<String>,
    pub username: Option<String>,
    #[serde(default)]
    pub is_forum: bool,
}

/// Who sent a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Speaker {
    /// The Telegram user id; `None` for posts sent on behalf of a chat.
    pub user_id: Option<i64>,
    pub name: String,
    pub username: Option<String>,
    #[serde(default)]
    pub is_bot: bool,
}

/// An entity of a text worth keeping: a mention, a bot command or a link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entity {
    pub kind: String,
    /// The covered text, already cut out of the message.
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_id: Option<i64>,
}

/// One piece of a message, in order. Stored as `{"type": "text", ...}`; read through
/// `PartFields`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", try_from = "PartFields")]
pub enum Part {
    /// Text or a caption.
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        entities: Vec<Entity>,
    },
    /// An attachment or structured content: photo, sticker, voice, location, poll, ...
    /// `detail` is the compact text the prompt shows. A turn that answers the message fetches
    /// the file (`core::turn::media`); later turns show its description in `detail`.
    Media {
        kind: String,
        detail: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file_unique_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// Its thumbnail's file id, shown instead when the file itself cannot be viewed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thumb_file_id: Option<String>,
        /// Its size in bytes, as Telegram said (decides "too large" without asking for it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<u64>,
    },
    /// A service event: a join, a pin, a title change, a topic created, ...
    Event { kind: String, detail: String },
    /// Content of a kind this code does not know; kept so nothing is silently dropped.
    Unknown { kind: String },
}

/// A `Part` as stored, read as one flat struct: serde's internally tagged enums buffer every
/// field before they choose the variant, and that costs the wasm about twice the code of this.
/// The same rules: a variant's missing field or an unknown type is an error; other fields are
/// ignored.
#[derive(Deserialize)]
struct PartFields {
    #[serde(rename = "type")]
    tag: String,
    text: Option<String>,
    #[serde(default)]
    entities: Vec<Entity>,
    kind: Option<String>,
    detail: Option<String>,
    file_id: Option<String>,
    file_unique_id: Option<String>,
    mime_type: Option<String>,
    thumb_file_id: Option<String>,
    size: Option<u64>,
}

/// A variant's field read through a flat struct (`PartFields`, `background::jobs::JobFields`):
/// missing is an error, as serde's derive says it.
pub(crate) fn need<T>(v: Option<T>, name: &str) -> Result<T, String> {
    v.ok_or_else(|| format!("missing field `{name}`"))
}

impl TryFrom<PartFields> for Part {
    type Error = String;

    fn try_from(f: PartFields) -> Result<Part, String> {
        Ok(match f.tag.as_str() {
            "text" => Part::Text { text: need(f.text, "text")?, entities: f.entities },
            "media" => Part::Media {
                kind: need(f.kind, "kind")?,
                detail: need(f.detail, "detail")?,
                file_id: f.file_id,
                file_unique_id: f.file_unique_id,
                mime_type: f.mime_type,
                thumb_file_id: f.thumb_file_id,
                size: f.size,
            },
            "event" => Part::Event { kind: need(f.kind, "kind")?, detail: need(f.detail, "detail")? },
            "unknown" => Part::Unknown { kind: need(f.kind, "kind")? },
            other => return Err(format!("unknown variant `{other}`, expected one of `text`, `media`, `event`, `unknown`")),
        })
    }
}

impl Part {
    pub fn text(text: impl Into<String>) -> Self {
        Part::Text { text: text.into(), entities: Vec::new() }
    }

    /// The part as one line of compact text, e.g. `[photo 1280x720]`.
    pub fn render_compact(&self) -> String {
        match self {
            Part::Text { text, .. } => text.clone(),
            Part::Media { kind, detail, .. } if detail.is_empty() => format!("[{kind}]"),
            Part::Media { kind, detail, .. } => format!("[{kind}: {detail}]"),
            Part::Event { kind, detail } if detail.is_empty() => format!("[event {kind}]"),
            Part::Event { kind, detail } => format!("[event {kind}: {detail}]"),
            Part::Unknown { kind } => format!("[{kind}]"),
        }
    }
}

/// The message a message replies to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplyRef {
    pub message_id: i64,
    pub user_id: Option<i64>,
    pub name: Option<String>,
    #[serde(default)]
    pub is_bot: bool,
    /// A short excerpt of the replied-to text (or the quoted part).
    pub excerpt: String,
}

/// A message from Telegram, normalised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboundMessage {
    pub conv: ConvKey,
    pub chat: ChatInfo,
    pub message_id: i64,
    /// Unix seconds.
    pub date: i64,
    pub edit_date: Option<i64>,
    pub speaker: Speaker,
    pub parts: Vec<Part>,
    pub reply_to: Option<ReplyRef>,
    /// Who the message was forwarded from, as a display string.
    pub forwarded_from: Option<String>,
    pub media_group_id: Option<String>,
    /// A service message (join, pin, ...) rather than something someone said.
    pub is_event: bool,
}

impl InboundMessage {
    /// All text parts joined, for gating and search.
    pub fn plain_text(&self) -> String {
        let mut out = String::new();
        for p in &self.parts {
            if let Part::Text { text, .. } = p {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
        }
        out
    }

    /// The parts rendered as one compact line.
    pub fn render_compact(&self) -> String {
        self.parts.iter().map(Part::render_compact).collect::<Vec<_>>().join(" ")
    }

    pub fn entities(&self) -> impl Iterator<Item = &Entity> {
        self.parts.iter().flat_map(|p| match p {
            Part::Text { entities, .. } => entities.as_slice(),
            _ => &[],
        })
    }
}

/// A reaction someone set on a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboundReaction {
    pub chat: ChatInfo,
    pub message_id: i64,
    pub date: i64,
    pub speaker: Speaker,
    /// Emoji now set (custom emoji as `custom:<id>`); empty when a reaction was removed.
    pub emoji: Vec<String>,
}

/// Everything the webhook may hand on, after normalisation.
#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    Message(InboundMessage),
    Edited(InboundMessage),
    Reaction(InboundReaction),
    /// Acknowledged and recorded, nothing else: channel posts, callback queries, unknown kinds.
    Ignored { kind: String, chat_id: Option<i64> },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_read_back_as_written_and_refuse_what_the_tagged_enum_refused() {
        let parts = vec![
            Part::Text { text: "hi @bob".into(), entities: vec![Entity { kind: "mention".into(), text: "@bob".into(), url: None, user_id: Some(2) }] },
            Part::text("plain"),
            Part::Media { kind: "photo".into(), detail: "[photo 1x1]".into(), file_id: Some("f".into()), file_unique_id: Some("u".into()), mime_type: None, thumb_file_id: Some("t".into()), size: Some(9) },
            Part::Media { kind: "voice".into(), detail: "[voice]".into(), file_id: None, file_unique_id: None, mime_type: Some("audio/ogg".into()), thumb_file_id: None, size: None },
            Part::Event { kind: "pin".into(), detail: "pinned".into() },
            Part::Unknown { kind: "story".into() },
        ];
        let text = serde_json::to_string(&parts).unwrap();
        assert_eq!(serde_json::from_str::<Vec<Part>>(&text).unwrap(), parts);
        assert_eq!(serde_json::from_value::<Vec<Part>>(serde_json::from_str(&text).unwrap()).unwrap(), parts);
        // Fields of other variants are ignored; a missing field or an unknown type is an error.
        assert_eq!(serde_json::from_str::<Part>(r#"{"type":"text","text":"a","kind":"x"}"#).unwrap(), Part::text("a"));
        assert!(serde_json::from_str::<Part>(r#"{"type":"text"}"#).is_err());
        assert!(serde_json::from_str::<Part>(r#"{"type":"media","kind":"photo"}"#).is_err());
        assert!(serde_json::from_str::<Part>(r#"{"type":"gif","kind":"x"}"#).is_err());
        assert!(serde_json::from_str::<Part>(r#"{"text":"no type"}"#).is_err());
    }

    #[test]
    fn conv_key_round_trips() {
        for k in [ConvKey::chat(-1001234567890), ConvKey { chat_id: -100123, thread_id: Some(7) }] {
            assert_eq!(ConvKey::parse(&k.to_string()), Some(k));
        }
        assert_eq!(ConvKey::parse("x"), None);
        assert_eq!(ConvKey::parse("1:y"), None);
    }

    #[test]
    fn parts_render_compactly() {
        let p = Part::Media {
            kind: "photo".into(),
            detail: "1280x720".into(),
            file_id: Some("f".into()),
            file_unique_id: None,
            mime_type: None,
            thumb_file_id: None,
            size: None,
        };
        assert_eq!(p.render_compact(), "[photo: 1280x720]");
        assert_eq!(Part::Unknown { kind: "story".into() }.render_compact(), "[story]");
    }
}
