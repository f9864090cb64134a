//! Sessions: what part of a conversation the prompt sees.
//!
//! A session starts at the first message after an idle gap longer than the timeout (default
//! 24 h), or right after `/new`/`/reset`. Older messages stay in D1 (the record and the source
//! of summaries and memories); only the prompt's window moves.

/// Where the current session starts, given the conversation's messages from the stored start
/// onwards as `(seq, unix seconds)` in order. Returns the seq of the first message of the
/// session, which is `stored_start` unless an idle gap came after it.
pub fn session_start(messages: &[(i64, i64)], stored_start: i64, idle_secs: i64) -> i64 {
    let mut start = stored_start;
    for pair in messages.windows(2) {
        let ((_, prev_date), (seq, date)) = (pair[0], pair[1]);
        if date - prev_date > idle_secs && seq > start {
            start = seq;
        }
    }
    start
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_gap_starts_a_new_session() {
        let day = 86_400;
        let msgs = [(1, 0), (2, 60), (3, 60 + day + 1), (4, 60 + day + 30)];
        assert_eq!(session_start(&msgs, 0, day), 3);
        assert_eq!(session_start(&msgs, 4, day), 4, "a later explicit start wins");
        assert_eq!(session_start(&msgs[..2], 0, day), 0);
        assert_eq!(session_start(&[], 7, day), 7);
    }
}
