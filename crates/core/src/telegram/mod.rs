//! The Telegram side: the Bot API's inbound update types ([`types`], re-exported here),
//! outbound method bodies and the error classification of its answers ([`api`]); how an update
//! becomes the bot's own model ([`normalize`]), whether a message asks the bot for a reply
//! ([`gating`]), the bot commands answered without a model call ([`commands`]), and the pace of
//! the drafts shown while an answer streams ([`drafts`]).

pub mod api;
pub mod commands;
pub mod drafts;
pub mod gating;
pub mod new_topic;
pub mod normalize;
pub mod private_answer;
pub mod types;

pub use types::*;

/// Counts a string's length as Telegram does: in UTF-16 code units.
pub fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// The substring at a UTF-16 `offset` and `length` (as in message entities). Offsets that fall
/// outside the text or inside a surrogate pair are clamped rather than trusted.
pub fn utf16_slice(s: &str, offset: usize, length: usize) -> &str {
    let mut start = None;
    let mut end = s.len();
    let mut units = 0usize;
    for (byte, ch) in s.char_indices() {
        if start.is_none() && units >= offset {
            start = Some(byte);
        }
        if units >= offset.saturating_add(length) {
            end = byte;
            break;
        }
        units += ch.len_utf16();
    }
    match start {
        Some(st) if st <= end => &s[st..end],
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_and_lengths_from_outside_never_overflow() {
        assert_eq!(utf16_slice("abc", 1, usize::MAX), "bc");
        assert_eq!(utf16_slice("abc", usize::MAX, usize::MAX), "");
        assert_eq!(utf16_slice("é🦀x", 1, 2), "🦀");
        assert_eq!(utf16_slice("é🦀x", 2, 2), "x", "an offset inside a surrogate pair starts at the next char");
    }

    #[test]
    fn a_stop_update_parses_and_a_broken_one_is_refused() {
        let u = parse_update(br#"{"update_id":7,"stopped_message_generation":{"chat":{"id":42,"type":"private"},"message_thread_id":3,"draft_id":99}}"#).unwrap();
        let UpdateKind::StoppedGeneration(s) = &u.kind else { panic!("{:?}", u.kind) };
        assert_eq!((s.chat.id, s.message_thread_id, s.draft_id), (42, Some(3), 99));
        assert_eq!(u.kind.name(), "stopped_message_generation");
        assert!(parse_update(br#"{"update_id":8,"stopped_message_generation":{"chat":{"id":"x"}}}"#).is_err());
    }

    #[test]
    fn a_guest_message_parses_as_its_own_kind() {
        let u = parse_update(br#"{"update_id":9,"guest_message":{"message_id":1,"date":1,"chat":{"id":-5,"type":"group"},"text":"hi","guest_query_id":"q"}}"#).unwrap();
        let UpdateKind::GuestMessage(m) = &u.kind else { panic!("{:?}", u.kind) };
        assert_eq!(m.guest_query_id.as_deref(), Some("q"));
        assert_eq!(u.kind.name(), "guest_message");
        assert!(matches!(crate::telegram::normalize::normalize(&u), crate::conversation::Inbound::Ignored { .. }), "never a message of the host chat");
        assert!(parse_update(br#"{"update_id":10,"guest_message":{"chat":1}}"#).is_err());
    }

    #[test]
    fn utf16_counts_surrogate_pairs_as_two() {
        assert_eq!(utf16_len("a😋b"), 4);
        assert_eq!(utf16_len("Лол"), 3);
    }

    #[test]
    fn utf16_slice_handles_emoji_offsets() {
        let s = "hi 😋 @bot!";
        // "@bot" starts after "hi " (3) + 😋 (2) + " " (1) = 6 units.
        assert_eq!(utf16_slice(s, 6, 4), "@bot");
        assert_eq!(utf16_slice(s, 3, 2), "😋");
        assert_eq!(utf16_slice(s, 100, 4), "");
        assert_eq!(utf16_slice(s, 9, 100), "t!");
    }
}
