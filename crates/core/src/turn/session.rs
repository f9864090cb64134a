//! Sessions: what part of a conversation the prompt sees.
//!
//! A session starts at the first message after an idle gap longer than the timeout (default
//! 24 h), or right after `/new`/`/reset`. Older messages stay in D1 (the record and the source
//! of summaries and memories); only the prompt's window moves.

use crate::history::{HistoryMessage, Role};

/// Where the current session starts, given the conversation's messages from the stored start
/// onwards, in seq order. Returns the seq of the first message of the session, which is
/// `stored_start` unless an idle gap between people's messages came after it. (The bot's own
/// messages are dated when sent, so they do not count for gaps.)
pub fn session_start(messages: &[HistoryMessage], stored_start: i64, idle_secs: i64) -> i64 {
    let mut start = stored_start;
    let mut prev: Option<i64> = None;
    for m in messages.iter().filter(|m| m.role != Role::Bot) {
        if let Some(prev_date) = prev {
            if m.date - prev_date > idle_secs && m.seq > start {
                start = m.seq;
            }
        }
        prev = Some(m.date);
    }
    start
}

/// Whether a message belongs to the session starting at `start`. A bot message belongs to the
/// session of the messages its turn answered.
pub fn in_session(m: &HistoryMessage, start: i64) -> bool {
    m.seq >= start && (m.role != Role::Bot || m.answered_upto.is_none_or(|upto| upto >= start))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(seq: i64, date: i64, role: Role, answered_upto: Option<i64>) -> HistoryMessage {
        HistoryMessage {
            seq,
            message_id: Some(seq),
            role,
            user_id: Some(1),
            name: "A".into(),
            username: None,
            reply_to: None,
            reply_info: None,
            forwarded_from: None,
            parts: vec![],
            date,
            edited: false,
            turn_id: None,
            answered_upto,
            media_group_id: None,
            album_ids: Vec::new(),
        }
    }

    #[test]
    fn idle_gap_starts_a_new_session() {
        let day = 86_400;
        let u = |seq, date| msg(seq, date, Role::User, None);
        let msgs = [u(1, 0), u(2, 60), u(3, 60 + day + 1), u(4, 60 + day + 30)];
        assert_eq!(session_start(&msgs, 0, day), 3);
        assert_eq!(session_start(&msgs, 4, day), 4, "a later explicit start wins");
        assert_eq!(session_start(&msgs[..2], 0, day), 0);
        assert_eq!(session_start(&[], 7, day), 7);
    }

    #[test]
    fn bot_messages_follow_the_session_they_answered() {
        let day = 86_400;
        // The reply to an old message is dated now; it must not open the new session.
        let msgs = [msg(1, 0, Role::User, None), msg(2, 3 * day, Role::Bot, Some(1)), msg(3, 3 * day + 5, Role::User, None)];
        let start = session_start(&msgs, 0, day);
        assert_eq!(start, 3);
        assert!(!in_session(&msgs[1], start));
        assert!(in_session(&msgs[2], start));
        assert!(in_session(&msg(4, 0, Role::Bot, None), start), "a bot message without a turn goes by seq");
    }
}
