//! Whether a message asks the bot for a reply.
//!
//! Private chats: always. Groups: only when addressed: an @mention (or a text mention) of the
//! bot, a reply to one of the bot's messages, a command (`/cmd`, or `/cmd@thisbot`), or the
//! bot's name as a word (configurable). Everything else is stored as context only. Messages
//! from bots and service messages never ask for a reply (no bot-to-bot loops).
//!
//! A message that starts with a command asks for nothing, in any chat, unless the command is
//! one of ours (`crate::telegram::commands::parse`) addressed to us: `/cmd@otherbot` and commands the
//! bot does not have start no turn (they would cost a model call for nothing).

use crate::conversation::{ChatKind, InboundMessage};
use serde::{Deserialize, Serialize};

/// Who the bot is, as gating needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct BotIdentity {
    pub id: i64,
    /// Without the `@`.
    pub username: String,
    /// The display name people call it by.
    pub name: String,
}

/// Why a turn was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    Private,
    Mention,
    Reply,
    Command,
    Name,
    Reaction,
    /// A schedule the bot set came due (`schedule_message`): no person asked just now.
    Schedule,
}

/// The trigger for `m`, or `None` when it is context only.
pub fn reply_trigger(m: &InboundMessage, bot: &BotIdentity, name_trigger: bool) -> Option<Trigger> {
    if m.is_event || m.speaker.is_bot || m.speaker.user_id == Some(bot.id) {
        return None;
    }
    if starts_with_foreign_command(m, bot) {
        return None;
    }
    match m.chat.kind {
        ChatKind::Private => return Some(Trigger::Private),
        ChatKind::Channel => return None,
        ChatKind::Group | ChatKind::Supergroup => {}
    }
    let username = bot.username.to_ascii_lowercase();
    for e in m.entities() {
        match e.kind.as_str() {
            "bot_command" => match e.text.split_once('@') {
                None => return Some(Trigger::Command),
                Some((_, to)) if !username.is_empty() && to.eq_ignore_ascii_case(&username) => {
                    return Some(Trigger::Command)
                }
                Some(_) => {}
            },
            "mention" if !username.is_empty() && e.text.trim_start_matches('@').eq_ignore_ascii_case(&username) => {
                return Some(Trigger::Mention)
            }
            "text_mention" if e.user_id == Some(bot.id) => return Some(Trigger::Mention),
            _ => {}
        }
    }
    if m.reply_to.as_ref().is_some_and(|r| r.user_id == Some(bot.id)) {
        return Some(Trigger::Reply);
    }
    if name_trigger && contains_word(&m.plain_text(), &bot.name) {
        return Some(Trigger::Name);
    }
    None
}

/// Whether `m` starts with a command (a `bot_command` entity at its start) that is not one of
/// this bot's commands addressed to it.
fn starts_with_foreign_command(m: &InboundMessage, bot: &BotIdentity) -> bool {
    let text = m.plain_text();
    let text = text.trim_start();
    let leading = m.entities().any(|e| e.kind == "bot_command" && !e.text.is_empty() && text.starts_with(e.text.as_str()));
    leading && crate::telegram::commands::parse(m, &bot.username).is_none()
}

/// Case-insensitive whole-word search (Unicode letters and digits are word characters).
pub fn contains_word(haystack: &str, word: &str) -> bool {
    let word = word.trim().to_lowercase();
    if word.is_empty() {
        return false;
    }
    let hay = haystack.to_lowercase();
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    // `get` instead of indexing: the offsets come from `find`, but user text never panics.
    while let Some(pos) = hay.get(from..).and_then(|rest| rest.find(&word)) {
        let start = from.saturating_add(pos);
        let end = start.saturating_add(word.len());
        let before = hay.get(..start).and_then(|h| h.chars().next_back());
        let after = hay.get(end..).and_then(|h| h.chars().next());
        if !before.is_some_and(is_word) && !after.is_some_and(is_word) {
            return true;
        }
        from = start.saturating_add(hay.get(start..).and_then(|h| h.chars().next()).map_or(1, char::len_utf8));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::*;

    fn bot() -> BotIdentity {
        BotIdentity { id: 42, username: "edge_bot".into(), name: "Edge".into() }
    }

    fn msg(kind: ChatKind, text: &str, entities: Vec<Entity>) -> InboundMessage {
        InboundMessage {
            conv: ConvKey::chat(-1),
            chat: ChatInfo { id: -1, kind, title: None, username: None, is_forum: false },
            message_id: 1,
            date: 0,
            edit_date: None,
            speaker: Speaker { user_id: Some(7), name: "Alice".into(), username: None, is_bot: false },
            parts: vec![Part::Text { text: text.into(), entities }],
            reply_to: None,
            forwarded_from: None,
            media_group_id: None,
            is_event: false,
        }
    }

    fn entity(kind: &str, text: &str) -> Entity {
        Entity { kind: kind.into(), text: text.into(), url: None, user_id: None }
    }

    #[test]
    fn private_chats_always_ask() {
        assert_eq!(reply_trigger(&msg(ChatKind::Private, "hi", vec![]), &bot(), true), Some(Trigger::Private));
    }

    #[test]
    fn group_chatter_does_not_ask() {
        assert_eq!(reply_trigger(&msg(ChatKind::Supergroup, "hello all", vec![]), &bot(), true), None);
        // Another bot's mention or command is not ours.
        let other = msg(ChatKind::Group, "/help@other_bot", vec![entity("bot_command", "/help@other_bot")]);
        assert_eq!(reply_trigger(&other, &bot(), true), None);
        let mention = msg(ChatKind::Group, "@someone hi", vec![entity("mention", "@someone")]);
        assert_eq!(reply_trigger(&mention, &bot(), true), None);
    }

    #[test]
    fn addressed_group_messages_ask() {
        let g = ChatKind::Supergroup;
        let m = msg(g, "hey @Edge_Bot", vec![entity("mention", "@Edge_Bot")]);
        assert_eq!(reply_trigger(&m, &bot(), true), Some(Trigger::Mention));
        let c = msg(g, "/status@edge_bot", vec![entity("bot_command", "/status@edge_bot")]);
        assert_eq!(reply_trigger(&c, &bot(), true), Some(Trigger::Command));
        let c = msg(g, "/status", vec![entity("bot_command", "/status")]);
        assert_eq!(reply_trigger(&c, &bot(), true), Some(Trigger::Command));
        let mut r = msg(g, "indeed", vec![]);
        r.reply_to = Some(ReplyRef { message_id: 3, user_id: Some(42), name: None, is_bot: true, excerpt: String::new() });
        assert_eq!(reply_trigger(&r, &bot(), true), Some(Trigger::Reply));
        let n = msg(g, "what do you think, edge?", vec![]);
        assert_eq!(reply_trigger(&n, &bot(), true), Some(Trigger::Name));
        assert_eq!(reply_trigger(&n, &bot(), false), None);
        let mut tm = msg(g, "Edge Bot", vec![Entity { kind: "text_mention".into(), text: "Edge Bot".into(), url: None, user_id: Some(42) }]);
        tm.parts.push(Part::text(""));
        assert_eq!(reply_trigger(&tm, &bot(), false), Some(Trigger::Mention));
    }

    #[test]
    fn commands_for_other_bots_or_unknown_ones_never_ask() {
        for kind in [ChatKind::Private, ChatKind::Supergroup] {
            let other = msg(kind, "/status@other_bot", vec![entity("bot_command", "/status@other_bot")]);
            assert_eq!(reply_trigger(&other, &bot(), true), None, "{kind:?}");
            let unknown = msg(kind, "/frobnicate now", vec![entity("bot_command", "/frobnicate")]);
            assert_eq!(reply_trigger(&unknown, &bot(), true), None, "{kind:?}");
            // Even when the message also mentions this bot.
            let both = msg(kind, "/help@other_bot @edge_bot", vec![entity("bot_command", "/help@other_bot"), entity("mention", "@edge_bot")]);
            assert_eq!(reply_trigger(&both, &bot(), true), None, "{kind:?}");
            // Ours still ask.
            let ours = msg(kind, "/usage@edge_bot", vec![entity("bot_command", "/usage@edge_bot")]);
            assert!(reply_trigger(&ours, &bot(), true).is_some(), "{kind:?}");
        }
        let ours = msg(ChatKind::Private, "/start", vec![entity("bot_command", "/start")]);
        assert_eq!(reply_trigger(&ours, &bot(), true), Some(Trigger::Private));
        // A command in the middle of a sentence is not a leading command.
        let mid = msg(ChatKind::Private, "try /frobnicate", vec![entity("bot_command", "/frobnicate")]);
        assert_eq!(reply_trigger(&mid, &bot(), true), Some(Trigger::Private));
    }

    #[test]
    fn bots_and_events_never_ask() {
        let mut m = msg(ChatKind::Private, "hi", vec![]);
        m.speaker.is_bot = true;
        assert_eq!(reply_trigger(&m, &bot(), true), None);
        let mut e = msg(ChatKind::Private, "", vec![]);
        e.is_event = true;
        assert_eq!(reply_trigger(&e, &bot(), true), None);
    }

    #[test]
    fn words_match_whole_words_only() {
        assert!(contains_word("Hi Edge!", "edge"));
        assert!(contains_word("edge", "Edge"));
        assert!(!contains_word("hedge funds", "edge"));
        assert!(!contains_word("edgelord", "edge"));
        assert!(contains_word("Привет, Эдж.", "эдж"));
    }
}
