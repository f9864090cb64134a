//! `/new` in a private chat with topics (Bot API 9.3/9.4): with `NEW_OPENS_TOPIC=on` (the
//! default) and the bot's topics on (`getMe`'s `has_topics_enabled`), `/new` opens a fresh
//! topic (`createForumTopic`) instead of resetting the current conversation, which is left as
//! it is. The topic gets the placeholder name [`PLACEHOLDER_NAME`] and is named from its first
//! message like a topic Telegram marks as implicitly named
//! (`drafts::implicit_topic_name`); the bot greets the person in it once ([`GREETING`]).
//! Refused (topics off in the chat, the method missing), `/new` resets as before and says so.

use crate::conversation::ChatKind;
use serde::Deserialize;

/// The name a topic opened by `/new` gets until its first message names it. Distinctive, so a
/// topic a person named is not taken for one (a person naming a topic exactly so has it renamed
/// from its first message, once).
pub const PLACEHOLDER_NAME: &str = "💬 New conversation";

/// The bot's first message in a topic opened by `/new` (so the person sees where to write).
pub const GREETING: &str = "A fresh conversation: what shall we talk about?";

/// The answer to `/new` in the chat (or topic) it was sent in, when a topic was opened.
pub const OPENED: &str = "Opened a new topic for a fresh conversation; this one stays as it is.";

/// The answer to `/new` when Telegram refused to open a topic: today's reset, said so.
pub const REFUSED: &str = "Okay, starting a new conversation here (I couldn't open a new topic). The earlier one stays on record.";

/// Whether `/new` opens a topic: the setting on, a private chat, the bot's topics enabled.
pub fn opens_topic(setting_on: bool, kind: ChatKind, has_topics_enabled: bool) -> bool {
    setting_on && kind == ChatKind::Private && has_topics_enabled
}

/// The part of `createForumTopic`'s `ForumTopic` the bot keeps.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CreatedTopic {
    pub message_thread_id: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_private_chats_with_topics_and_the_setting_on() {
        assert!(opens_topic(true, ChatKind::Private, true));
        assert!(!opens_topic(false, ChatKind::Private, true));
        assert!(!opens_topic(true, ChatKind::Private, false));
        assert!(!opens_topic(true, ChatKind::Supergroup, true), "a forum group's /new resets its topic as before");
        let name_chars = PLACEHOLDER_NAME.chars().count();
        assert!((1..=128).contains(&name_chars), "createForumTopic takes 1-128 characters");
    }

    #[test]
    fn the_created_topic_parses() {
        let t: CreatedTopic = serde_json::from_str(r#"{"message_thread_id":77,"name":"x","icon_color":7322096}"#).unwrap();
        assert_eq!(t.message_thread_id, 77);
    }

    #[test]
    fn a_topic_new_opened_is_named_from_its_first_message_like_an_implicit_one() {
        let msg = |name: &str| {
            let json = format!(r#"{{"message_id":12,"date":1,"chat":{{"id":42,"type":"private"}},"message_thread_id":10,"is_topic_message":true,"text":"Soup recipes for winter","reply_to_message":{{"message_id":10,"date":1,"chat":{{"id":42,"type":"private"}},"forum_topic_created":{{"name":{name:?},"icon_color":1}}}}}}"#);
            serde_json::from_str::<crate::telegram::Message>(&json).unwrap()
        };
        let named = crate::telegram::drafts::implicit_topic_name(&msg(PLACEHOLDER_NAME));
        assert_eq!(named, Some((42, 10, "Soup recipes for winter".to_string())));
        assert_eq!(crate::telegram::drafts::implicit_topic_name(&msg("Soups")), None);
    }
}
