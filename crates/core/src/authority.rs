//! On whose authority a turn's writes act: the person who asked for them in this turn.
//!
//! A turn answers a burst: the people's messages newer than what earlier turns answered. The
//! turn's target message is only the newest signal's, so in a group "cancel #5" from one
//! member followed by any message of another would otherwise lend the second member's
//! authority to the first member's request. The rule:
//! - The turn acts for the one person who wrote every message of its burst ([`burst_sender`]);
//!   a burst mixing senders, or with a message of no known sender, acts for nobody.
//! - What that authority decides: in a group, `cancel_schedule` cancels only that person's
//!   own reminders; a note `remember` stores about a person records who supplied it
//!   (`supplied_by`), so what one member says about another never reads as the other's own
//!   words outside the chat where it was said (`core::scope`).
//!
//! Pure: the edge passes the turn's history window and the seq its last answer covered.

use crate::history::{HistoryMessage, Role};

/// The one person who wrote every people's message after `answered_seq` (the turn's burst);
/// `None` when there is none, when senders mix, or when one message has no known sender.
pub fn burst_sender(messages: &[HistoryMessage], answered_seq: i64) -> Option<i64> {
    let mut senders = messages.iter().filter(|m| m.role == Role::User && m.seq > answered_seq).map(|m| m.user_id);
    let first = senders.next()??;
    senders.all(|u| u == Some(first)).then_some(first)
}

/// Who supplied a memory about `about` that cites `sources` (message ids), given who wrote
/// each message read (`authors`: message id and sender): the subject when every cited
/// message is one of theirs (their own words); else the first other sender cited; `None`
/// when nothing cited can be checked (no sources, or none among the messages read). Only a
/// memory whose supplier is its subject is ever shown outside the chat it was learned in.
pub fn supplier(about: Option<i64>, sources: &[i64], authors: &[(i64, Option<i64>)]) -> Option<i64> {
    let about = about?;
    let author = |id: &i64| authors.iter().find(|(m, _)| m == id).and_then(|(_, u)| *u);
    let cited: Vec<Option<i64>> = sources.iter().map(author).collect();
    if !cited.is_empty() && cited.iter().all(|u| *u == Some(about)) {
        return Some(about);
    }
    cited.into_iter().flatten().find(|u| *u != about)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(seq: i64, role: Role, user: Option<i64>) -> HistoryMessage {
        HistoryMessage {
            seq,
            message_id: Some(seq * 10),
            role,
            user_id: user,
            name: "x".into(),
            username: None,
            reply_to: None,
            reply_info: None,
            forwarded_from: None,
            parts: Vec::new(),
            date: 0,
            edited: false,
            turn_id: None,
            answered_upto: None,
            media_group_id: None,
            album_ids: Vec::new(),
        }
    }

    const ALICE: i64 = 1;
    const BOB: i64 = 2;

    #[test]
    fn a_burst_acts_for_its_one_sender_only() {
        let history = vec![msg(1, Role::User, Some(BOB)), msg(2, Role::Bot, None), msg(3, Role::User, Some(ALICE)), msg(4, Role::User, Some(ALICE))];
        // Bob's old message is answered: the burst is Alice's alone.
        assert_eq!(burst_sender(&history, 2), Some(ALICE));
        // Bob's request and Alice's message after it: nobody's authority.
        let mixed = vec![msg(3, Role::User, Some(BOB)), msg(4, Role::User, Some(ALICE))];
        assert_eq!(burst_sender(&mixed, 2), None);
        // Nothing new (a crew continuation), or a message of no known sender.
        assert_eq!(burst_sender(&history, 4), None);
        assert_eq!(burst_sender(&[msg(5, Role::User, None)], 0), None);
        assert_eq!(burst_sender(&[msg(5, Role::User, Some(ALICE)), msg(6, Role::User, None)], 0), None);
        // The bot's messages and events in between do not mix a burst.
        let with_bot = vec![msg(3, Role::User, Some(ALICE)), msg(4, Role::Bot, None), msg(5, Role::Event, Some(BOB)), msg(6, Role::User, Some(ALICE))];
        assert_eq!(burst_sender(&with_bot, 0), Some(ALICE));
    }

    #[test]
    fn a_memory_is_its_subjects_own_only_when_every_cited_message_is_theirs() {
        let authors = [(10, Some(ALICE)), (20, Some(BOB)), (30, Some(ALICE))];
        assert_eq!(supplier(Some(ALICE), &[10, 30], &authors), Some(ALICE));
        assert_eq!(supplier(Some(ALICE), &[20], &authors), Some(BOB));
        assert_eq!(supplier(Some(ALICE), &[10, 20], &authors), Some(BOB), "one of Bob's messages cited: Bob's words too");
        assert_eq!(supplier(Some(ALICE), &[], &authors), None, "nothing cited: unknown, never her own");
        assert_eq!(supplier(Some(ALICE), &[99], &authors), None, "a message not read: unknown");
        assert_eq!(supplier(Some(ALICE), &[10, 99], &authors), None);
        assert_eq!(supplier(None, &[10], &authors), None, "about nobody");
    }
}
