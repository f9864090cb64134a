//! The history's message model: one stored message as the prompt renderers read it
//! ([`HistoryMessage`]), whose it is ([`Role`]), what it replies to ([`ReplyInfo`]), a bot turn
//! as Gemini returned it ([`BotTurn`]), and the order the renderers show them in.
use crate::conversation::Part as MsgPart;
use crate::gemini::Content;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Bot,
    Event,
}

impl Role {
    pub fn parse(s: &str) -> Role {
        match s {
            "bot" => Role::Bot,
            "event" => Role::Event,
            _ => Role::User,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Bot => "bot",
            Role::Event => "event",
        }
    }
}

/// Who and what a message replies to, as stored with it (`messages.reply_to_user_id`,
/// `reply_to_name`, `reply_excerpt`): the replied-to message may be long gone from the history.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReplyInfo {
    pub user_id: Option<i64>,
    pub name: Option<String>,
    pub excerpt: Option<String>,
}

/// One stored message, as the renderers need it.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryMessage {
    pub seq: i64,
    pub message_id: Option<i64>,
    pub role: Role,
    pub user_id: Option<i64>,
    pub name: String,
    pub username: Option<String>,
    pub reply_to: Option<i64>,
    /// The replied-to message's author and excerpt, when `reply_to` is set and they are known.
    pub reply_info: Option<ReplyInfo>,
    pub forwarded_from: Option<String>,
    pub parts: Vec<MsgPart>,
    /// Unix seconds.
    pub date: i64,
    pub edited: bool,
    /// For the bot's messages: the turn that produced them.
    pub turn_id: Option<String>,
    /// For the bot's messages: the newest message seq their turn saw. A reply belongs right
    /// after what it answers, even when it was stored after newer messages arrived.
    pub answered_upto: Option<i64>,
    /// The album (Telegram's `media_group_id`) the message belongs to.
    pub media_group_id: Option<String>,
    /// For an album joined into one message (`core::turn::media::join_albums`): the message ids of
    /// all its messages (a reply to any of them is a reply to the album).
    pub album_ids: Vec<i64>,
}

impl HistoryMessage {
    /// A message from Telegram as history (what the store writes and reads back).
    pub fn from_inbound(seq: i64, m: &crate::conversation::InboundMessage) -> Self {
        HistoryMessage {
            seq,
            message_id: Some(m.message_id),
            role: if m.is_event { Role::Event } else { Role::User },
            user_id: m.speaker.user_id,
            name: m.speaker.name.clone(),
            username: m.speaker.username.clone(),
            reply_to: m.reply_to.as_ref().map(|r| r.message_id),
            reply_info: m.reply_to.as_ref().map(|r| ReplyInfo {
                user_id: r.user_id,
                name: r.name.clone(),
                excerpt: Some(r.excerpt.clone()).filter(|e| !e.trim().is_empty()),
            }),
            forwarded_from: m.forwarded_from.clone(),
            parts: m.parts.clone(),
            date: m.date,
            edited: m.edit_date.is_some(),
            turn_id: None,
            answered_upto: None,
            media_group_id: m.media_group_id.clone(),
            album_ids: Vec::new(),
        }
    }

    pub fn compact_text(&self) -> String {
        self.parts.iter().map(MsgPart::render_compact).collect::<Vec<_>>().join(" ")
    }
}

/// A stored bot turn: the model's contents exactly as returned (with the function responses
/// sent back for tool rounds), and the outcome of each function call, by call index.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BotTurn {
    pub contents: Vec<Content>,
    #[serde(default)]
    pub outcomes: BTreeMap<usize, Value>,
}

/// Orders messages as the conversation happened: by seq, except that each bot message sits
/// right after the newest message its turn saw (a reply is stored after Telegram accepts it,
/// which can be after messages that arrived meanwhile).
pub fn chronological(msgs: &mut [HistoryMessage]) {
    crate::order::sort_by_key(msgs, |m| match (m.role, m.answered_upto) {
        (Role::Bot, Some(upto)) => (upto, 1, m.seq),
        _ => (m.seq, 0, 0),
    });
}
