//! The adaptive debounce: how long the chat object waits for a burst to end before a turn.
//!
//! A person who sends one message should not wait; one who sends several in a row should get
//! one answer to all of them. So the quiet window is short by default in private chats
//! ([`PRIVATE_QUIET_MS`]), longer in groups ([`GROUP_QUIET_MS`]), grows once a burst shows
//! (a second message in the same burst: [`BURST_QUIET_MS`]), and is learnt per chat: the gaps
//! between a chat's consecutive messages that looked like one burst ([`Burstiness`], kept in
//! the chat object's state) stretch the window to cover them. The burst's first message still
//! bounds the whole wait (`debounce_max_ms`). An operator's `DEBOUNCE_MS` overrides all of
//! this (a fixed quiet window, as before).
//!
//! Early start ([`starts_early`]): in a private chat with the adaptive window (and no crew
//! speaking there), the first message of a burst does not wait the window: its turn starts at
//! once, so its first words show as soon as a bot that never waits would show them. The
//! window still counts: a second message within it abandons that early start (the state,
//! `chat_state`), and the burst gets its ordinary debounced turn; an early start hands nothing
//! to its turn (no tool runs, no message goes out) before its window is over. Groups, crews
//! and an operator's fixed `DEBOUNCE_MS` keep the plain debounce: one model call per burst.
//!
//! Invariants:
//! - The window is never shorter than the kind's floor, never longer than [`QUIET_CAP_MS`]
//!   (nor the caller's maximum wait), whatever was learnt.
//! - Learning is bounded state (one average and a count), safe to run twice on one gap.

use serde::{Deserialize, Serialize};

/// The quiet window of a private chat with nothing learnt.
pub const PRIVATE_QUIET_MS: i64 = 400;
/// The quiet window of a group (people answer each other; the bot can wait).
pub const GROUP_QUIET_MS: i64 = 1500;
/// Once a burst shows (two messages in one pending burst), a private chat waits at least this.
pub const BURST_QUIET_MS: i64 = 1200;
/// The longest quiet window learning can give.
pub const QUIET_CAP_MS: i64 = 3000;
/// A gap longer than this is a new conversation step, not part of a burst: not learnt.
pub const BURST_GAP_MS: i64 = 6000;
/// The window covers the learnt typical gap times this factor (in tenths).
const COVER_TENTHS: i64 = 15;

/// How a chat's window is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// The operator's `DEBOUNCE_MS`: always this quiet window.
    Fixed(i64),
    /// Adaptive, for a private chat (`group: false`) or a group.
    Adaptive { group: bool },
}

/// What a chat has shown of its bursts: the average gap (ms) between consecutive messages
/// that came within [`BURST_GAP_MS`] of each other, and how many such gaps were seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Burstiness {
    #[serde(default)]
    pub gap_ms: i64,
    #[serde(default)]
    pub samples: u32,
    /// When the chat's previous reply-asking message came.
    #[serde(default)]
    pub last_ms: Option<i64>,
}

impl Burstiness {
    /// Learns from the gap between a message and the one before it. Long gaps are not bursts
    /// and teach nothing. An exponential average (weight 1/4 for the new gap) after the first.
    pub fn observe(&mut self, gap_ms: i64) {
        if !(0..=BURST_GAP_MS).contains(&gap_ms) {
            return;
        }
        self.gap_ms = if self.samples == 0 { gap_ms } else { (self.gap_ms * 3 + gap_ms) / 4 };
        self.samples = self.samples.saturating_add(1);
    }

    /// A reply-asking message came at `at_ms`: learns from the gap since the previous one.
    pub fn message_at(&mut self, at_ms: i64) {
        if let Some(last) = self.last_ms {
            self.observe(at_ms - last);
        }
        self.last_ms = Some(self.last_ms.map_or(at_ms, |l| l.max(at_ms)));
    }

    /// The quiet window this chat has earned: its typical gap, covered with a margin, once
    /// at least two gaps were seen (one is chance).
    fn learnt_ms(&self) -> i64 {
        if self.samples < 2 {
            return 0;
        }
        self.gap_ms * COVER_TENTHS / 10
    }
}

/// The quiet window after the newest message of a burst of `count` messages.
pub fn quiet_ms(policy: Policy, burst: &Burstiness, count: u32) -> i64 {
    match policy {
        Policy::Fixed(ms) => ms,
        Policy::Adaptive { group } => {
            let floor = if group { GROUP_QUIET_MS } else { PRIVATE_QUIET_MS };
            let bursting = if count >= 2 && !group { BURST_QUIET_MS } else { 0 };
            floor.max(bursting).max(burst.learnt_ms().min(QUIET_CAP_MS))
        }
    }
}

/// Whether a burst's first message starts its turn at once ("early start", module doc): the
/// adaptive window of a private chat (`policy`; `None`: the operator's fixed window) where no
/// crew speaks (a crew's personas take turns on the whole burst).
pub fn starts_early(policy: Option<Policy>, crew_speaks: bool) -> bool {
    matches!(policy, Some(Policy::Adaptive { group: false })) && !crew_speaks
}

/// When a burst (`first`, `last` message times, `count` messages) is ready for a turn.
pub fn deadline(policy: Policy, burst: &Burstiness, first_ms: i64, last_ms: i64, count: u32, max_ms: i64) -> i64 {
    (last_ms + quiet_ms(policy, burst, count)).min(first_ms + max_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRIVATE: Policy = Policy::Adaptive { group: false };
    const GROUP: Policy = Policy::Adaptive { group: true };

    #[test]
    fn only_private_chats_with_the_adaptive_window_and_no_crew_start_early() {
        assert!(starts_early(Some(PRIVATE), false));
        assert!(!starts_early(Some(PRIVATE), true), "a crew takes turns on the whole burst");
        assert!(!starts_early(Some(GROUP), false), "groups keep the debounce");
        assert!(!starts_early(None, false), "an operator's fixed DEBOUNCE_MS is kept as is");
    }

    #[test]
    fn a_single_private_message_waits_a_short_window() {
        assert_eq!(quiet_ms(PRIVATE, &Burstiness::default(), 1), PRIVATE_QUIET_MS);
        assert!(PRIVATE_QUIET_MS <= 500);
    }

    #[test]
    fn groups_wait_longer_than_private_chats() {
        assert!(quiet_ms(GROUP, &Burstiness::default(), 1) > quiet_ms(PRIVATE, &Burstiness::default(), 1));
    }

    #[test]
    fn a_burst_in_progress_extends_the_window() {
        let b = Burstiness::default();
        assert!(quiet_ms(PRIVATE, &b, 2) > quiet_ms(PRIVATE, &b, 1));
    }

    #[test]
    fn the_operator_override_is_used_as_is() {
        let mut b = Burstiness::default();
        for _ in 0..10 {
            b.observe(2000);
        }
        assert_eq!(quiet_ms(Policy::Fixed(300), &b, 5), 300);
    }

    #[test]
    fn a_chat_that_sends_bursts_learns_a_longer_window() {
        let mut b = Burstiness::default();
        b.observe(1000);
        assert_eq!(quiet_ms(PRIVATE, &b, 1), PRIVATE_QUIET_MS, "one gap is chance");
        b.observe(1000);
        assert_eq!(quiet_ms(PRIVATE, &b, 1), 1500);
        assert_eq!(quiet_ms(GROUP, &b, 1), 1500);
    }

    #[test]
    fn messages_teach_their_gaps() {
        let mut b = Burstiness::default();
        for at in [0, 800, 1600, 20_000] {
            b.message_at(at);
        }
        assert_eq!((b.gap_ms, b.samples, b.last_ms), (800, 2, Some(20_000)));
    }

    #[test]
    fn long_gaps_teach_nothing_and_learning_is_capped() {
        let mut b = Burstiness::default();
        b.observe(BURST_GAP_MS + 1);
        b.observe(-5);
        assert_eq!(b.samples, 0);
        for _ in 0..20 {
            b.observe(BURST_GAP_MS);
        }
        assert_eq!(quiet_ms(PRIVATE, &b, 1), QUIET_CAP_MS);
    }

    #[test]
    fn the_first_message_bounds_the_whole_wait() {
        let b = Burstiness::default();
        assert_eq!(deadline(PRIVATE, &b, 0, 100, 1, 8000), 500);
        assert_eq!(deadline(PRIVATE, &b, 0, 7900, 9, 8000), 8000);
    }

    proptest::proptest! {
        #[test]
        fn the_window_stays_within_its_bounds(gaps in proptest::collection::vec(-100i64..20_000, 0..30), count in 0u32..10, group: bool) {
            let mut b = Burstiness::default();
            for g in gaps { b.observe(g); }
            let q = quiet_ms(Policy::Adaptive { group }, &b, count);
            proptest::prop_assert!(q >= PRIVATE_QUIET_MS && q <= QUIET_CAP_MS);
        }
    }
}
