//! Turns a Telegram [`Update`] into the bot's own [`Inbound`] model: an ordered list of parts,
//! speaker metadata, reply and forward references, the conversation key.
//!
//! Invariants: never fails and never drops content. Media become parts with a compact
//! description and their file ids; service messages become [`Part::Event`]s; any content field
//! this code does not know becomes a [`Part::Unknown`] placeholder.

use crate::conversation::*;
use crate::telegram::{self, Chat, FileMeta, Message, MessageEntity, Update, UpdateKind, User};
use serde_json::Value;

/// Entity kinds kept on text parts (the rest are formatting).
const KEPT_ENTITIES: [&str; 6] = ["mention", "text_mention", "bot_command", "url", "text_link", "email"];

/// Message fields that are metadata, not content: never turned into placeholders.
const METADATA_FIELDS: [&str; 33] = [
    "link_preview_options",
    "has_protected_content",
    "is_automatic_forward",
    "via_bot",
    "reply_markup",
    "forward_date",
    "forward_signature",
    "forward_from_message_id",
    "external_reply",
    "is_from_offline",
    "has_media_spoiler",
    "show_caption_above_media",
    "sender_boost_count",
    "sender_business_bot",
    "effect_id",
    "paid_star_count",
    "new_chat_member",
    "new_chat_participant",
    "left_chat_participant",
    "thumb",
    "reply_to_story",
    "sender_tag",
    "is_paid_post",
    "direct_messages_topic",
    "suggested_post_info",
    "reply_to_checklist_task_id",
    "paid_message_price_changed",
    "author_signature",
    "views",
    "is_accessible",
    "text_html",
    "connected_website",
    "chat_background_set",
];

/// Service message fields that become [`Part::Event`]s (beyond those typed on [`Message`]).
const SERVICE_FIELDS: [&str; 22] = [
    "group_chat_created",
    "supergroup_chat_created",
    "channel_chat_created",
    "delete_chat_photo",
    "new_chat_photo",
    "forum_topic_created",
    "forum_topic_edited",
    "forum_topic_closed",
    "forum_topic_reopened",
    "general_forum_topic_hidden",
    "general_forum_topic_unhidden",
    "video_chat_started",
    "video_chat_ended",
    "video_chat_scheduled",
    "video_chat_participants_invited",
    "message_auto_delete_timer_changed",
    "proximity_alert_triggered",
    "boost_added",
    "write_access_allowed",
    "users_shared",
    "chat_shared",
    "giveaway_created",
];

/// Normalises an update. Kinds the bot does not act on come back as [`Inbound::Ignored`].
pub fn normalize(update: &Update) -> Inbound {
    match &update.kind {
        UpdateKind::Message(m) => Inbound::Message(normalize_message(m)),
        UpdateKind::EditedMessage(m) => Inbound::Edited(normalize_message(m)),
        UpdateKind::MessageReaction(r) => {
            let speaker = match (&r.user, &r.actor_chat) {
                (Some(u), _) => speaker_from_user(u),
                (None, Some(c)) => speaker_from_chat(c),
                (None, None) => anonymous(),
            };
            let emoji = r
                .new_reaction
                .iter()
                .filter_map(|t| match (t.kind.as_str(), &t.emoji, &t.custom_emoji_id) {
                    ("emoji", Some(e), _) => Some(e.clone()),
                    ("custom_emoji", _, Some(id)) => Some(format!("custom:{id}")),
                    ("paid", _, _) => Some("⭐".to_string()),
                    _ => None,
                })
                .collect();
            Inbound::Reaction(InboundReaction {
                chat: chat_info(&r.chat),
                message_id: r.message_id,
                date: r.date,
                speaker,
                emoji,
            })
        }
        other => {
            let chat_id = match other {
                UpdateKind::ChannelPost(m)
                | UpdateKind::EditedChannelPost(m)
                | UpdateKind::BusinessMessage(m)
                | UpdateKind::EditedBusinessMessage(m) => Some(m.chat.id),
                _ => None,
            };
            Inbound::Ignored { kind: other.name().to_string(), chat_id }
        }
    }
}

fn chat_info(c: &Chat) -> ChatInfo {
    let title = c.title.clone().or_else(|| {
        c.first_name.as_ref().map(|f| match &c.last_name {
            Some(l) => format!("{f} {l}"),
            None => f.clone(),
        })
    });
    ChatInfo {
        id: c.id,
        kind: ChatKind::from_telegram(&c.kind, c.id),
        title,
        username: c.username.clone(),
        is_forum: c.is_forum,
    }
}

fn speaker_from_user(u: &User) -> Speaker {
    Speaker {
        user_id: Some(u.id),
        name: u.display_name(),
        username: u.username.clone(),
        is_bot: u.is_bot,
    }
}

fn speaker_from_chat(c: &Chat) -> Speaker {
    Speaker {
        user_id: None,
        name: c.title.clone().or_else(|| c.username.clone()).unwrap_or_else(|| c.id.to_string()),
        username: c.username.clone(),
        is_bot: false,
    }
}

fn anonymous() -> Speaker {
    Speaker { user_id: None, name: "unknown".to_string(), username: None, is_bot: false }
}

fn message_speaker(m: &Message) -> Speaker {
    // Posts on behalf of a chat (anonymous admins, channels) name the chat, not the relay bot.
    match (&m.sender_chat, &m.from) {
        (Some(c), _) => {
            let mut s = speaker_from_chat(c);
            if let Some(sig) = &m.author_signature {
                s.name = format!("{} ({sig})", s.name);
            }
            s
        }
        (None, Some(u)) => speaker_from_user(u),
        (None, None) => anonymous(),
    }
}

/// The conversation a message belongs to: its chat, or its forum topic.
pub fn conv_key(m: &Message) -> ConvKey {
    // Forum topics only: in other supergroups message_thread_id marks reply threads.
    let in_topic = m.is_topic_message || m.chat.is_forum;
    let thread_id = if in_topic { m.message_thread_id } else { None };
    ConvKey { chat_id: m.chat.id, thread_id }
}

/// Normalises one message (also used for edited messages).
pub fn normalize_message(m: &Message) -> InboundMessage {
    let mut parts = Vec::new();
    push_media(m, &mut parts);
    if let Some(text) = &m.text {
        parts.push(text_part(text, m.entities.as_deref()));
    }
    if let Some(caption) = &m.caption {
        parts.push(text_part(caption, m.caption_entities.as_deref()));
    }
    let content_parts = parts.len();
    push_events(m, &mut parts);
    let is_event = content_parts == 0 && parts.len() > content_parts;
    push_unknown(m, &mut parts);
    if parts.is_empty() {
        parts.push(Part::Unknown { kind: "empty".to_string() });
    }

    InboundMessage {
        conv: conv_key(m),
        chat: chat_info(&m.chat),
        message_id: m.message_id,
        date: m.date,
        edit_date: m.edit_date,
        speaker: message_speaker(m),
        parts,
        reply_to: reply_ref(m),
        forwarded_from: forwarded_from(m),
        media_group_id: m.media_group_id.clone(),
        is_event,
    }
}

fn text_part(text: &str, entities: Option<&[MessageEntity]>) -> Part {
    let entities = entities
        .unwrap_or_default()
        .iter()
        .filter(|e| KEPT_ENTITIES.contains(&e.kind.as_str()))
        .map(|e| Entity {
            kind: e.kind.clone(),
            text: telegram::utf16_slice(text, e.offset, e.length).to_string(),
            url: e.url.clone(),
            user_id: e.user.as_ref().map(|u| u.id),
        })
        .collect();
    Part::Text { text: text.to_string(), entities }
}

fn media(kind: &str, detail: String, file: Option<&FileMeta>) -> Part {
    Part::Media {
        kind: kind.to_string(),
        detail,
        file_id: file.map(|f| f.file_id.clone()).filter(|s| !s.is_empty()),
        file_unique_id: file.map(|f| f.file_unique_id.clone()).filter(|s| !s.is_empty()),
        mime_type: file.and_then(|f| f.mime_type.clone()),
        thumb_file_id: file.and_then(FileMeta::thumbnail).map(|t| t.file_id.clone()).filter(|s| !s.is_empty()),
        size: file.and_then(|f| f.file_size),
    }
}

fn dims(f: &FileMeta) -> Option<String> {
    Some(format!("{}x{}", f.width?, f.height?))
}

fn secs(f: &FileMeta) -> Option<String> {
    f.duration.map(|d| format!("{d}s"))
}

fn human_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{} KB", b >> 10),
        b => format!("{b} B"),
    }
}

fn join(items: impl IntoIterator<Item = Option<String>>) -> String {
    items.into_iter().flatten().filter(|s| !s.is_empty()).collect::<Vec<_>>().join(", ")
}

fn push_media(m: &Message, parts: &mut Vec<Part>) {
    push_files(m, parts);
    push_shared(m, parts);
}

/// A message's files, in this order: photo, sticker, GIF or document, voice, audio, video,
/// video note.
fn push_files(m: &Message, parts: &mut Vec<Part>) {
    if let Some(sizes) = &m.photo {
        // The last size is the largest.
        if let Some(best) = sizes.iter().max_by_key(|p| p.width.unwrap_or(0) * p.height.unwrap_or(0)) {
            parts.push(media("photo", join([dims(best)]), Some(best)));
        }
    }
    if let Some(s) = &m.sticker {
        let kind = match (s.is_animated, s.is_video) {
            (Some(true), _) => Some("animated".to_string()),
            (_, Some(true)) => Some("video".to_string()),
            _ => None,
        };
        let detail = join([
            s.emoji.clone(),
            s.set_name.as_ref().map(|n| format!("set {n}")),
            kind,
            Some(format!("id {}", s.file_unique_id)).filter(|_| !s.file_unique_id.is_empty()),
        ]);
        parts.push(media("sticker", detail, Some(s)));
    }
    if let Some(a) = &m.animation {
        parts.push(media("gif", join([a.file_name.clone(), secs(a), dims(a)]), Some(a)));
    } else if let Some(d) = &m.document {
        // Telegram sends an animation as a document too; describe it once.
        let detail = join([d.file_name.clone(), d.mime_type.clone(), d.file_size.map(human_size)]);
        parts.push(media("document", detail, Some(d)));
    }
    if let Some(v) = &m.voice {
        parts.push(media("voice", join([secs(v)]), Some(v)));
    }
    if let Some(a) = &m.audio {
        let title = match (&a.performer, &a.title) {
            (Some(p), Some(t)) => Some(format!("{p} – {t}")),
            (None, Some(t)) => Some(t.clone()),
            _ => a.file_name.clone(),
        };
        parts.push(media("audio", join([title, secs(a)]), Some(a)));
    }
    if let Some(v) = &m.video {
        parts.push(media("video", join([v.file_name.clone(), secs(v), dims(v)]), Some(v)));
    }
    if let Some(v) = &m.video_note {
        parts.push(media("video_note", join([secs(v)]), Some(v)));
    }
}

/// What a message shares that is not a file: a venue or location, a contact, a poll, a dice
/// roll, a story.
fn push_shared(m: &Message, parts: &mut Vec<Part>) {
    if let Some(v) = &m.venue {
        let detail = join([
            Some(v.title.clone()),
            Some(v.address.clone()),
            Some(format!("{:.5},{:.5}", v.location.latitude, v.location.longitude)),
        ]);
        parts.push(media("venue", detail, None));
    } else if let Some(l) = &m.location {
        let live = l.live_period.map(|p| format!("live for {p}s"));
        parts.push(media("location", join([Some(format!("{:.5},{:.5}", l.latitude, l.longitude)), live]), None));
    }
    if let Some(c) = &m.contact {
        let name = match &c.last_name {
            Some(l) => format!("{} {l}", c.first_name),
            None => c.first_name.clone(),
        };
        let detail = join([Some(name), Some(c.phone_number.clone()), c.user_id.map(|u| format!("user {u}"))]);
        parts.push(media("contact", detail, None));
    }
    if let Some(p) = &m.poll {
        let options = p.options.iter().map(|o| o.text.as_str()).collect::<Vec<_>>().join(" / ");
        let kind = if p.kind == "quiz" { "quiz" } else { "poll" };
        parts.push(media(kind, format!("\"{}\" options: {options}", p.question), None));
    }
    if let Some(d) = &m.dice {
        parts.push(media("dice", format!("{} = {}", d.emoji, d.value), None));
    }
    if let Some(story) = m.rest.get("story") {
        let from = story
            .get("chat")
            .and_then(|c| c.get("title").or_else(|| c.get("username")))
            .and_then(Value::as_str)
            .map(|t| format!("from {t}"));
        parts.push(media("story", join([from]), None));
    }
}

fn push_events(m: &Message, parts: &mut Vec<Part>) {
    let event = |kind: &str, detail: String| Part::Event { kind: kind.to_string(), detail };
    if let Some(users) = &m.new_chat_members {
        let names = users.iter().map(User::display_name).collect::<Vec<_>>().join(", ");
        parts.push(event("joined", names));
    }
    if let Some(u) = &m.left_chat_member {
        parts.push(event("left", u.display_name()));
    }
    if let Some(t) = &m.new_chat_title {
        parts.push(event("title_changed", t.clone()));
    }
    if let Some(p) = &m.pinned_message {
        // Only the pinner's own words are quoted: a pinned message of someone else may be one
        // the access policy refused (never stored, or excluded), and its text must not reach a
        // prompt through the pin (the reply excerpt's rule, decided here without the policy).
        let author = p.get("from").and_then(|f| f.get("id")).and_then(Value::as_i64);
        let own = author.is_some() && author == m.from.as_ref().map(|u| u.id);
        let text = p
            .get("text")
            .filter(|_| own)
            .or_else(|| p.get("caption").filter(|_| own))
            .and_then(Value::as_str)
            .map(|t| excerpt(t, 80))
            .unwrap_or_default();
        parts.push(event("pinned", text));
    }
    if let Some(id) = m.migrate_to_chat_id {
        parts.push(event("migrated", format!("to chat {id}")));
    }
    if let Some(id) = m.migrate_from_chat_id {
        parts.push(event("migrated", format!("from chat {id}")));
    }
    for key in SERVICE_FIELDS {
        if let Some(v) = m.rest.get(key) {
            let detail = v.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
            parts.push(event(key, detail));
        }
    }
}

fn push_unknown(m: &Message, parts: &mut Vec<Part>) {
    let has_content = !parts.is_empty();
    for (key, value) in &m.rest {
        let known = METADATA_FIELDS.contains(&key.as_str())
            || SERVICE_FIELDS.contains(&key.as_str())
            || key == "story";
        // With other content present, only object-valued fields look like content kinds.
        if !known && (!has_content || value.is_object()) {
            parts.push(Part::Unknown { kind: key.clone() });
        }
    }
}

fn reply_ref(m: &Message) -> Option<ReplyRef> {
    let r = m.reply_to_message.as_deref()?;
    // In forum topics every message "replies" to the topic root; that is not a real reply.
    if (m.is_topic_message || m.chat.is_forum) && Some(r.message_id) == m.message_thread_id {
        return None;
    }
    let speaker = message_speaker(r);
    let excerpt = match &m.quote {
        Some(q) if !q.text.is_empty() => excerpt(&q.text, 120),
        _ => excerpt(&normalize_message(r).render_compact(), 120),
    };
    Some(ReplyRef {
        message_id: r.message_id,
        user_id: speaker.user_id,
        name: Some(speaker.name),
        is_bot: speaker.is_bot,
        excerpt,
    })
}

fn forwarded_from(m: &Message) -> Option<String> {
    if let Some(o) = &m.forward_origin {
        let name = o
            .sender_user
            .as_ref()
            .map(User::display_name)
            .or_else(|| o.sender_user_name.clone())
            .or_else(|| o.sender_chat.as_ref().or(o.chat.as_ref()).map(|c| speaker_from_chat(c).name));
        return Some(name.unwrap_or_else(|| "unknown".to_string()));
    }
    m.forward_from
        .as_ref()
        .map(User::display_name)
        .or_else(|| m.forward_from_chat.as_ref().map(|c| speaker_from_chat(c).name))
        .or_else(|| m.forward_sender_name.clone())
}

/// The first `max` characters of `s` on one line, with an ellipsis when cut.
pub fn excerpt(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let mut cut: String = flat.chars().take(max).collect();
        cut.push('…');
        cut
    }
}
