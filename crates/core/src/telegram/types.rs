//! Inbound Telegram Bot API types, as the webhook receives them.
//!
//! Invariants:
//! - Parsing is tolerant: every field that real payloads have been seen to omit is optional,
//!   unknown fields are ignored, and an update kind this code does not know becomes
//!   [`UpdateKind::Other`] instead of an error (Telegram adds kinds over time).
//! - Ids are `i64` newtypes-by-convention: user and chat ids exceed 32 bits and group ids are
//!   negative. They stay exact up to 2^53, which is what D1 can bind.
//! - Only the fields the bot uses are modelled; everything else in a message is kept in
//!   [`Message::rest`] so an unknown content kind still becomes a placeholder, never a loss.

use serde::Deserialize;
use serde_json::{Map, Value};

/// One webhook delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub update_id: i64,
    pub kind: UpdateKind,
}

/// What an update carries. Kinds the bot acts on are typed; the rest keep their field name.
#[derive(Debug, Clone, PartialEq)]
pub enum UpdateKind {
    Message(Message),
    EditedMessage(Message),
    ChannelPost(Message),
    EditedChannelPost(Message),
    BusinessMessage(Message),
    EditedBusinessMessage(Message),
    MessageReaction(MessageReactionUpdated),
    /// `stopped_message_generation` (Bot API 10.3): a person pressed Stop on a draft.
    StoppedGeneration(MessageGenerationStopped),
    /// `guest_message` (Bot API 10.0): the bot summoned into a chat it is not a member of
    /// (`core::guest`); never a message of that chat's conversation.
    GuestMessage(Message),
    /// `business_connection`: the bot connected to, changed on or removed from a person's
    /// Telegram Business account (`core::business`).
    BusinessConnection(BusinessConnection),
    /// `callback_query`: a press on an inline button under one of the bot's messages.
    CallbackQuery(CallbackQuery),
    /// `deleted_business_messages`: messages deleted in a business chat.
    DeletedBusinessMessages(BusinessMessagesDeleted),
    /// A known or unknown kind the bot does not act on, by its field name
    /// (`callback_query`, `chat_boost`, `new_update_kind`, ...).
    Other(String),
}

impl UpdateKind {
    /// The update's field name, as Telegram spells it.
    pub fn name(&self) -> &str {
        match self {
            UpdateKind::Message(_) => "message",
            UpdateKind::EditedMessage(_) => "edited_message",
            UpdateKind::ChannelPost(_) => "channel_post",
            UpdateKind::EditedChannelPost(_) => "edited_channel_post",
            UpdateKind::BusinessMessage(_) => "business_message",
            UpdateKind::EditedBusinessMessage(_) => "edited_business_message",
            UpdateKind::MessageReaction(_) => "message_reaction",
            UpdateKind::StoppedGeneration(_) => "stopped_message_generation",
            UpdateKind::GuestMessage(_) => "guest_message",
            UpdateKind::BusinessConnection(_) => "business_connection",
            UpdateKind::DeletedBusinessMessages(_) => "deleted_business_messages",
            UpdateKind::CallbackQuery(_) => "callback_query",
            UpdateKind::Other(name) => name,
        }
    }
}

/// Why a webhook body is not an update at all.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParseError {
    #[error("body is not JSON: {0}")]
    NotJson(String),
    #[error("body is not a JSON object")]
    NotObject,
    #[error("update_id is missing or not an integer")]
    NoUpdateId,
    #[error("{kind} is malformed: {reason}")]
    Malformed { update_id: i64, kind: String, reason: String },
}

impl ParseError {
    /// The update id, when the body had one (a malformed update is still deduplicated by it).
    pub fn update_id(&self) -> Option<i64> {
        match self {
            ParseError::Malformed { update_id, .. } => Some(*update_id),
            _ => None,
        }
    }
}

/// The longest webhook body the bot reads. Telegram's updates are a few KB (a text is at most
/// 4,096 characters); a longer body is acknowledged and ignored without being read whole, so
/// no message row can near D1's 2 MB and no forged text reaches the model whole.
pub const MAX_UPDATE_BYTES: usize = 256 * 1024;

/// Parses a webhook body. Duplicate keys are tolerated (the last one wins), as Telegram's own
/// clients do; see fixture 020.
pub fn parse_update(body: &[u8]) -> Result<Update, ParseError> {
    let value: Value =
        serde_json::from_str(std::str::from_utf8(body).map_err(|e| ParseError::NotJson(e.to_string()))?).map_err(|e| ParseError::NotJson(e.to_string()))?;
    let Value::Object(mut map) = value else {
        return Err(ParseError::NotObject);
    };
    let update_id = map.get("update_id").and_then(Value::as_i64).ok_or(ParseError::NoUpdateId)?;
    map.remove("update_id");
    const MESSAGE_KINDS: [&str; 6] = [
        "message",
        "edited_message",
        "channel_post",
        "edited_channel_post",
        "business_message",
        "edited_business_message",
    ];
    let malformed = |kind: &str, e: serde_json::Error| ParseError::Malformed {
        update_id,
        kind: kind.to_string(),
        reason: e.to_string(),
    };
    for kind in MESSAGE_KINDS {
        if let Some(v) = map.remove(kind) {
            let msg = Message::deserialize(v).map_err(|e| malformed(kind, e))?;
            let kind = match kind {
                "message" => UpdateKind::Message(msg),
                "edited_message" => UpdateKind::EditedMessage(msg),
                "channel_post" => UpdateKind::ChannelPost(msg),
                "edited_channel_post" => UpdateKind::EditedChannelPost(msg),
                "business_message" => UpdateKind::BusinessMessage(msg),
                _ => UpdateKind::EditedBusinessMessage(msg),
            };
            return Ok(Update { update_id, kind });
        }
    }
    if let Some(v) = map.remove("message_reaction") {
        let r = MessageReactionUpdated::deserialize(v)
            .map_err(|e| malformed("message_reaction", e))?;
        return Ok(Update { update_id, kind: UpdateKind::MessageReaction(r) });
    }
    if let Some(v) = map.remove("stopped_message_generation") {
        let s = MessageGenerationStopped::deserialize(v).map_err(|e| malformed("stopped_message_generation", e))?;
        return Ok(Update { update_id, kind: UpdateKind::StoppedGeneration(s) });
    }
    if let Some(v) = map.remove("guest_message") {
        let m = Message::deserialize(v).map_err(|e| malformed("guest_message", e))?;
        return Ok(Update { update_id, kind: UpdateKind::GuestMessage(m) });
    }
    if let Some(v) = map.remove("business_connection") {
        let bad = |reason: String| ParseError::Malformed { update_id, kind: "business_connection".into(), reason };
        let c = BusinessConnection::from_json(v).map_err(bad)?;
        return Ok(Update { update_id, kind: UpdateKind::BusinessConnection(c) });
    }
    if let Some(v) = map.remove("callback_query") {
        let bad = |reason: String| ParseError::Malformed { update_id, kind: "callback_query".into(), reason };
        let q = CallbackQuery::from_json(v).map_err(bad)?;
        return Ok(Update { update_id, kind: UpdateKind::CallbackQuery(q) });
    }
    if let Some(v) = map.remove("deleted_business_messages") {
        let bad = |reason: String| ParseError::Malformed { update_id, kind: "deleted_business_messages".into(), reason };
        let d = BusinessMessagesDeleted::from_json(v).map_err(bad)?;
        return Ok(Update { update_id, kind: UpdateKind::DeletedBusinessMessages(d) });
    }
    let name = map.keys().next().cloned().unwrap_or_else(|| "empty".to_string());
    Ok(Update { update_id, kind: UpdateKind::Other(name) })
}

/// `MessageGenerationStopped` (Bot API 10.3): only the chat, the topic and the draft id (no
/// user, no time): the draft id alone tells which turn it was.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MessageGenerationStopped {
    pub chat: StoppedChat,
    #[serde(default)]
    pub message_thread_id: Option<i64>,
    pub draft_id: i64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StoppedChat {
    pub id: i64,
}

/// `BusinessConnection`. `rights` (BusinessBotRights, Bot API 9.0) missing means no rights;
/// only the two the bot uses are read, every other right is ignored.
///
/// The Business types are read from the update's JSON by hand ([`BusinessConnection::from_json`]
/// and the like): a derived deserializer each cost the wasm more than the whole reading here.
#[derive(Debug, Clone, PartialEq)]
pub struct BusinessConnection {
    pub id: String,
    pub user: User,
    pub user_chat_id: i64,
    pub date: i64,
    pub rights: Option<BusinessBotRights>,
    pub is_enabled: bool,
}

fn need_i64(v: &Value, k: &str) -> Result<i64, String> {
    v.get(k).and_then(Value::as_i64).ok_or_else(|| format!("missing or not an integer: `{k}`"))
}

fn need_str(v: &Value, k: &str) -> Result<String, String> {
    v.get(k).and_then(Value::as_str).map(str::to_string).ok_or_else(|| format!("missing or not a string: `{k}`"))
}

fn need_user(v: &mut Value, k: &str) -> Result<User, String> {
    let u = v.get_mut(k).map(Value::take).ok_or_else(|| format!("missing field `{k}`"))?;
    User::deserialize(u).map_err(|e| e.to_string())
}

impl BusinessConnection {
    /// Reads a `BusinessConnection` object (an update's or `getBusinessConnection`'s).
    pub fn from_json(mut v: Value) -> Result<Self, String> {
        let flag = |r: &Value, k: &str| r.get(k).and_then(Value::as_bool).unwrap_or(false);
        let rights = v.get("rights").filter(|r| r.is_object()).map(|r| BusinessBotRights { can_reply: flag(r, "can_reply"), can_read_messages: flag(r, "can_read_messages") });
        Ok(BusinessConnection {
            id: need_str(&v, "id")?,
            user_chat_id: need_i64(&v, "user_chat_id")?,
            date: need_i64(&v, "date")?,
            is_enabled: flag(&v, "is_enabled"),
            rights,
            user: need_user(&mut v, "user")?,
        })
    }

    /// The rights, none when Telegram sent none.
    pub fn rights(&self) -> BusinessBotRights {
        self.rights.unwrap_or_default()
    }
}

/// `CallbackQuery`: only what a press on the bot's buttons needs.
#[derive(Debug, Clone, PartialEq)]
pub struct CallbackQuery {
    pub id: String,
    pub from: User,
    /// The message the button is under: (chat id, message id).
    pub message: Option<(i64, i64)>,
    pub data: Option<String>,
}

impl CallbackQuery {
    pub fn from_json(mut v: Value) -> Result<Self, String> {
        let message = v.get("message").and_then(|m| Some((m.get("chat")?.get("id")?.as_i64()?, m.get("message_id")?.as_i64()?)));
        Ok(CallbackQuery { id: need_str(&v, "id")?, data: v.get("data").and_then(Value::as_str).map(str::to_string), message, from: need_user(&mut v, "from")? })
    }
}

/// `BusinessMessagesDeleted`.
#[derive(Debug, Clone, PartialEq)]
pub struct BusinessMessagesDeleted {
    pub business_connection_id: String,
    pub chat_id: i64,
    pub message_ids: Vec<i64>,
}

impl BusinessMessagesDeleted {
    pub fn from_json(v: Value) -> Result<Self, String> {
        let chat_id = v.get("chat").map(|c| need_i64(c, "id")).unwrap_or_else(|| Err("missing field `chat`".into()))?;
        let ids = v.get("message_ids").and_then(Value::as_array).ok_or("missing field `message_ids`")?;
        Ok(BusinessMessagesDeleted {
            business_connection_id: need_str(&v, "business_connection_id")?,
            chat_id,
            message_ids: ids.iter().filter_map(Value::as_i64).collect(),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub struct BusinessBotRights {
    /// Send and edit messages in private chats that had incoming messages in the last 24 hours.
    #[serde(default)]
    pub can_reply: bool,
    /// Mark incoming private messages as read.
    #[serde(default)]
    pub can_read_messages: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct User {
    pub id: i64,
    #[serde(default)]
    pub is_bot: bool,
    #[serde(default)]
    pub first_name: String,
    pub last_name: Option<String>,
    pub username: Option<String>,
    pub language_code: Option<String>,
}

impl User {
    /// "First Last", or the username, or the id: never empty.
    pub fn display_name(&self) -> String {
        let mut name = self.first_name.trim().to_string();
        if let Some(last) = self.last_name.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
            if !name.is_empty() {
                name.push(' ');
            }
            name.push_str(last);
        }
        if name.is_empty() {
            name = self.username.clone().unwrap_or_else(|| self.id.to_string());
        }
        name
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Chat {
    pub id: i64,
    /// `private`, `group`, `supergroup` or `channel`; older payloads may omit it.
    #[serde(rename = "type", default)]
    pub kind: String,
    pub title: Option<String>,
    pub username: Option<String>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    #[serde(default)]
    pub is_forum: bool,
}

impl Chat {
    pub fn is_private(&self) -> bool {
        self.kind == "private" || (self.kind.is_empty() && self.id > 0)
    }
    pub fn is_group(&self) -> bool {
        self.kind == "group" || self.kind == "supergroup"
    }
    pub fn is_channel(&self) -> bool {
        self.kind == "channel"
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MessageEntity {
    #[serde(rename = "type")]
    pub kind: String,
    /// In UTF-16 code units, as Telegram counts.
    pub offset: usize,
    pub length: usize,
    pub url: Option<String>,
    pub user: Option<User>,
    pub language: Option<String>,
    pub custom_emoji_id: Option<String>,
}

/// Any file-like attachment. Telegram's media types share most fields, so one tolerant struct
/// serves photo sizes, stickers, animations, voice, audio, video, video notes and documents.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default)]
pub struct FileMeta {
    pub file_id: String,
    pub file_unique_id: String,
    pub file_name: Option<String>,
    pub mime_type: Option<String>,
    pub file_size: Option<u64>,
    pub width: Option<u32>,
    pub height: Option<u32>,
    pub duration: Option<u32>,
    pub length: Option<u32>,
    pub performer: Option<String>,
    pub title: Option<String>,
    pub emoji: Option<String>,
    pub set_name: Option<String>,
    pub is_animated: Option<bool>,
    pub is_video: Option<bool>,
    /// A small picture of it (stickers, videos, animations, documents). Telegram still sends
    /// the pre-6.6 name `thumb` alongside it, so both are read (an alias would refuse the pair).
    pub thumbnail: Option<Thumbnail>,
    pub thumb: Option<Thumbnail>,
}

impl FileMeta {
    /// The thumbnail, under either name.
    pub fn thumbnail(&self) -> Option<&Thumbnail> {
        self.thumbnail.as_ref().or(self.thumb.as_ref())
    }
}

/// A thumbnail (`PhotoSize`): a small JPEG or WEBP picture of a file.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default)]
pub struct Thumbnail {
    pub file_id: String,
    pub file_unique_id: String,
    pub file_size: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Location {
    pub latitude: f64,
    pub longitude: f64,
    pub live_period: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Venue {
    pub location: Location,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub address: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Contact {
    #[serde(default)]
    pub phone_number: String,
    #[serde(default)]
    pub first_name: String,
    pub last_name: Option<String>,
    pub user_id: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PollOption {
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub voter_count: u64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Poll {
    #[serde(default)]
    pub question: String,
    #[serde(default)]
    pub options: Vec<PollOption>,
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub is_anonymous: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Dice {
    #[serde(default)]
    pub emoji: String,
    #[serde(default)]
    pub value: i64,
}

/// The origin of a forwarded message (Bot API 7.0 `forward_origin`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MessageOrigin {
    #[serde(rename = "type", default)]
    pub kind: String,
    pub sender_user: Option<User>,
    pub sender_user_name: Option<String>,
    pub sender_chat: Option<Chat>,
    pub chat: Option<Chat>,
    pub author_signature: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TextQuote {
    #[serde(default)]
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Message {
    pub message_id: i64,
    pub message_thread_id: Option<i64>,
    pub from: Option<User>,
    pub sender_chat: Option<Chat>,
    #[serde(default)]
    pub date: i64,
    pub chat: Chat,
    #[serde(default)]
    pub is_topic_message: bool,
    pub reply_to_message: Option<Box<Message>>,
    pub quote: Option<TextQuote>,
    pub edit_date: Option<i64>,
    pub media_group_id: Option<String>,
    pub author_signature: Option<String>,
    pub business_connection_id: Option<String>,
    /// A business message sent for the account's owner by a bot (Bot API 7.2).
    #[serde(default)]
    pub sender_business_bot: Option<User>,
    /// Telegram's own away or greeting message of a business account (not the owner typing).
    #[serde(default)]
    pub is_from_offline: bool,
    /// An ephemeral message (Bot API 10.2: only its sender and the bot see it; its
    /// `message_id` is 0): the id to reply to it with, within Telegram's 15 s.
    #[serde(default)]
    pub ephemeral_message_id: Option<i64>,
    /// A guest message (Bot API 10.0): the id to answer it with (`answerGuestQuery`).
    #[serde(default)]
    pub guest_query_id: Option<String>,

    pub forward_origin: Option<MessageOrigin>,
    pub forward_from: Option<User>,
    pub forward_from_chat: Option<Chat>,
    pub forward_sender_name: Option<String>,

    pub text: Option<String>,
    pub entities: Option<Vec<MessageEntity>>,
    pub caption: Option<String>,
    pub caption_entities: Option<Vec<MessageEntity>>,

    pub photo: Option<Vec<FileMeta>>,
    pub sticker: Option<FileMeta>,
    pub animation: Option<FileMeta>,
    pub voice: Option<FileMeta>,
    pub audio: Option<FileMeta>,
    pub video: Option<FileMeta>,
    pub video_note: Option<FileMeta>,
    pub document: Option<FileMeta>,
    pub location: Option<Location>,
    pub venue: Option<Venue>,
    pub contact: Option<Contact>,
    pub poll: Option<Poll>,
    pub dice: Option<Dice>,

    pub new_chat_members: Option<Vec<User>>,
    pub left_chat_member: Option<User>,
    pub new_chat_title: Option<String>,
    pub pinned_message: Option<Box<Value>>,
    pub migrate_to_chat_id: Option<i64>,
    pub migrate_from_chat_id: Option<i64>,

    /// Every other field, so unknown content kinds and service messages are still seen.
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ReactionType {
    #[serde(rename = "type", default)]
    pub kind: String,
    pub emoji: Option<String>,
    pub custom_emoji_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MessageReactionUpdated {
    pub chat: Chat,
    pub message_id: i64,
    pub user: Option<User>,
    pub actor_chat: Option<Chat>,
    #[serde(default)]
    pub date: i64,
    #[serde(default)]
    pub old_reaction: Vec<ReactionType>,
    #[serde(default)]
    pub new_reaction: Vec<ReactionType>,
}
