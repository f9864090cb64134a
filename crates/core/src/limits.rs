//! Limits that keep strangers from making the owner pay: model budgets (per person per hour,
//! per chat per day, for the whole bot per day), the throttle of repeated failed
//! authentications, and the minimum strength of the shared secrets.
//!
//! Pure decisions over counts the edge reads from D1 (budgets) or keeps in the isolate's
//! memory (the throttle). Invariants (INVARIANTS.md): "Budgets" (one notice per window: the
//! person's hour, the day for chat and global budgets). Also:
//! - A limit of 0 means unlimited. Operators (`ADMIN_USER_IDS`) are never limited.
//! - The throttle's memory is bounded ([`AuthThrottle::MAX_SOURCES`]); forgetting a source
//!   only ever lets it try again, never locks anyone out for longer.

use crate::secret::Secret;
use std::collections::HashMap;

pub const HOUR_MS: i64 = 3_600_000;
pub const DAY_MS: i64 = 86_400_000;

/// The highest `USER_TURNS_PER_HOUR` (a higher setting is read as this): a person's row keeps
/// at most this many charges of the hour (`users.charged`, migration 0037), so it bounds the
/// row and the count stays exact up to any budget that can be set.
pub const MAX_USER_TURNS_PER_HOUR: u64 = 1000;

/// Shared secrets (`TELEGRAM_WEBHOOK_SECRET`, `ADMIN_TOKEN`) must be at least this long.
pub const MIN_SECRET_LEN: usize = 32;

/// Whether a shared secret is long enough to serve with (counted in characters).
pub fn secret_strong_enough(s: &Secret) -> bool {
    s.expose().chars().count() >= MIN_SECRET_LEN
}

/// The configured budgets (0: unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgets {
    /// Reply-asking messages per person per rolling hour (each turn needs at least one, so
    /// the person's turns never exceed it).
    pub user_turns_per_hour: u64,
    /// Model tokens per chat per UTC day.
    pub chat_tokens_per_day: u64,
    /// Model tokens of the whole bot per UTC day.
    pub global_tokens_per_day: u64,
}

/// What was used, as counted in D1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// The person's admitted reply-asking messages in the last hour.
    pub user_turns_last_hour: u64,
    pub chat_tokens_today: u64,
    pub global_tokens_today: u64,
}

/// Which budget was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    User,
    Chat,
    Global,
}

impl Scope {
    /// The refusal reason recorded in `refusals`.
    pub fn reason(self) -> &'static str {
        match self {
            Scope::User => "budget_user",
            Scope::Chat => "budget_chat",
            Scope::Global => "budget_global",
        }
    }

    /// The one notice the chat gets.
    pub fn message(self) -> &'static str {
        match self {
            Scope::User => "You've reached the number of questions I can answer for you this hour. Please try again later.",
            Scope::Chat => "This chat has used up today's budget for my answers. I'll be back tomorrow (UTC).",
            Scope::Global => "I've used up today's budget for answers. I'll be back tomorrow (UTC).",
        }
    }

    /// When the current notice window started: a notice given at or after it is not repeated.
    pub fn window_start(self, now_ms: i64) -> i64 {
        match self {
            Scope::User => now_ms - HOUR_MS,
            Scope::Chat | Scope::Global => day_start(now_ms),
        }
    }
}

/// Midnight UTC of the day containing `now_ms`.
pub fn day_start(now_ms: i64) -> i64 {
    now_ms - now_ms.rem_euclid(DAY_MS)
}

/// The budget check's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Go ahead (and charge the person one).
    Within,
    /// Over `scope`'s budget: no turn. `notify` when the chat has not been told in this window.
    Over { scope: Scope, notify: bool },
}

/// Decides whether a reply-asking message may start model work. `last_notice` gives, per
/// scope, the time of the latest budget refusal recorded for this chat (and person, for
/// [`Scope::User`]). The widest exhausted scope wins (global, then chat, then person), so the
/// notice names the real reason.
pub fn check(b: &Budgets, u: &Usage, is_admin: bool, last_notice: impl Fn(Scope) -> Option<i64>, now_ms: i64) -> Verdict {
    if is_admin {
        return Verdict::Within;
    }
    let over = |limit: u64, used: u64| limit > 0 && used >= limit;
    let scope = if over(b.global_tokens_per_day, u.global_tokens_today) {
        Scope::Global
    } else if over(b.chat_tokens_per_day, u.chat_tokens_today) {
        Scope::Chat
    } else if over(b.user_turns_per_hour, u.user_turns_last_hour) {
        Scope::User
    } else {
        return Verdict::Within;
    };
    let notify = last_notice(scope).is_none_or(|t| t < scope.window_start(now_ms));
    Verdict::Over { scope, notify }
}

/// A line per budget for `/usage` and the admin API: `used of limit` or `used (no limit)`.
pub fn describe(b: &Budgets, u: &Usage) -> String {
    let line = |what: &str, used: u64, limit: u64| {
        if limit == 0 {
            format!("{what}: {used} (no limit)")
        } else {
            format!("{what}: {used} of {limit}")
        }
    };
    [
        line("Your requests this hour", u.user_turns_last_hour, b.user_turns_per_hour),
        line("Tokens in this chat today (UTC)", u.chat_tokens_today, b.chat_tokens_per_day),
        line("Tokens bot-wide today (UTC)", u.global_tokens_today, b.global_tokens_per_day),
    ]
    .join("\n")
}

/// Failed authentications per source (an IP address), in fixed windows. Kept in the isolate's
/// memory: the check costs nothing on the good path and an attacker's failures cost the owner
/// no storage writes. Each isolate counts on its own, so the bound is per isolate.
#[derive(Debug, Default)]
pub struct AuthThrottle {
    sources: HashMap<String, (i64, u32)>,
}

impl AuthThrottle {
    /// Failures allowed per source per window before it is throttled.
    pub const MAX_FAILURES: u32 = 10;
    pub const WINDOW_MS: i64 = 60_000;
    /// Sources remembered at most (the oldest windows are forgotten first).
    pub const MAX_SOURCES: usize = 4096;

    /// Whether `source` must be turned away (429) without looking at what it presented.
    pub fn throttled(&self, source: &str, now_ms: i64) -> bool {
        self.sources
            .get(source)
            .is_some_and(|(start, n)| now_ms - start < Self::WINDOW_MS && *n >= Self::MAX_FAILURES)
    }

    /// Counts a failed authentication from `source`.
    pub fn failed(&mut self, source: &str, now_ms: i64) {
        if !self.sources.contains_key(source) && self.sources.len() >= Self::MAX_SOURCES {
            self.sources.retain(|_, (start, _)| now_ms - *start < Self::WINDOW_MS);
            if self.sources.len() >= Self::MAX_SOURCES {
                if let Some(oldest) = self.sources.iter().min_by_key(|(_, (start, _))| *start).map(|(k, _)| k.clone()) {
                    self.sources.remove(&oldest);
                }
            }
        }
        let entry = self.sources.entry(source.to_string()).or_insert((now_ms, 0));
        if now_ms - entry.0 >= Self::WINDOW_MS {
            *entry = (now_ms, 0);
        }
        entry.1 = entry.1.saturating_add(1);
    }

    pub fn len(&self) -> usize {
        self.sources.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: Budgets = Budgets { user_turns_per_hour: 3, chat_tokens_per_day: 1000, global_tokens_per_day: 5000 };
    const NOW: i64 = 10 * DAY_MS + 5 * HOUR_MS;

    fn never(_: Scope) -> Option<i64> {
        None
    }

    #[test]
    fn within_until_each_limit_is_reached() {
        let u = Usage { user_turns_last_hour: 2, chat_tokens_today: 999, global_tokens_today: 4999 };
        assert_eq!(check(&B, &u, false, never, NOW), Verdict::Within);
        let u3 = Usage { user_turns_last_hour: 3, ..u };
        assert_eq!(check(&B, &u3, false, never, NOW), Verdict::Over { scope: Scope::User, notify: true });
        let c = Usage { chat_tokens_today: 1000, ..u3 };
        assert_eq!(check(&B, &c, false, never, NOW), Verdict::Over { scope: Scope::Chat, notify: true });
        let g = Usage { global_tokens_today: 5000, ..c };
        assert_eq!(check(&B, &g, false, never, NOW), Verdict::Over { scope: Scope::Global, notify: true });
    }

    #[test]
    fn zero_is_unlimited_and_operators_are_never_limited() {
        let u = Usage { user_turns_last_hour: 1_000_000, chat_tokens_today: u64::MAX, global_tokens_today: u64::MAX };
        let none = Budgets { user_turns_per_hour: 0, chat_tokens_per_day: 0, global_tokens_per_day: 0 };
        assert_eq!(check(&none, &u, false, never, NOW), Verdict::Within);
        assert_eq!(check(&B, &u, true, never, NOW), Verdict::Within);
    }

    #[test]
    fn one_notice_per_window() {
        let u = Usage { user_turns_last_hour: 3, ..Default::default() };
        // Told 10 minutes ago: quiet. Told 61 minutes ago: tell again.
        let recent = |_: Scope| Some(NOW - 10 * 60_000);
        assert_eq!(check(&B, &u, false, recent, NOW), Verdict::Over { scope: Scope::User, notify: false });
        let old = |_: Scope| Some(NOW - 61 * 60_000);
        assert_eq!(check(&B, &u, false, old, NOW), Verdict::Over { scope: Scope::User, notify: true });
        // Daily budgets: told earlier today → quiet; told yesterday → tell.
        let c = Usage { chat_tokens_today: 1000, ..Default::default() };
        let today = |_: Scope| Some(day_start(NOW) + 1);
        assert_eq!(check(&B, &c, false, today, NOW), Verdict::Over { scope: Scope::Chat, notify: false });
        let yesterday = |_: Scope| Some(day_start(NOW) - 1);
        assert_eq!(check(&B, &c, false, yesterday, NOW), Verdict::Over { scope: Scope::Chat, notify: true });
    }

    #[test]
    fn describe_shows_used_and_limits() {
        let u = Usage { user_turns_last_hour: 2, chat_tokens_today: 10, global_tokens_today: 20 };
        let text = describe(&B, &u);
        assert!(text.contains("2 of 3") && text.contains("10 of 1000") && text.contains("20 of 5000"), "{text}");
        let none = Budgets { user_turns_per_hour: 0, ..B };
        assert!(describe(&none, &u).contains("2 (no limit)"));
    }

    #[test]
    fn secrets_need_32_characters() {
        assert!(!secret_strong_enough(&Secret::new("")));
        assert!(!secret_strong_enough(&Secret::new("a".repeat(31))));
        assert!(secret_strong_enough(&Secret::new("a".repeat(32))));
        // Characters, not bytes.
        assert!(!secret_strong_enough(&Secret::new("é".repeat(20))));
    }

    #[test]
    fn throttle_after_repeated_failures_per_source_and_window() {
        let mut t = AuthThrottle::default();
        for _ in 0..AuthThrottle::MAX_FAILURES - 1 {
            t.failed("1.2.3.4", 0);
        }
        assert!(!t.throttled("1.2.3.4", 0));
        t.failed("1.2.3.4", 0);
        assert!(t.throttled("1.2.3.4", 0));
        assert!(t.throttled("1.2.3.4", AuthThrottle::WINDOW_MS - 1));
        assert!(!t.throttled("5.6.7.8", 0), "other sources are not affected");
        assert!(!t.throttled("1.2.3.4", AuthThrottle::WINDOW_MS), "the window ends");
        t.failed("1.2.3.4", AuthThrottle::WINDOW_MS);
        assert!(!t.throttled("1.2.3.4", AuthThrottle::WINDOW_MS));
    }

    #[test]
    fn throttle_memory_is_bounded() {
        let mut t = AuthThrottle::default();
        for i in 0..(AuthThrottle::MAX_SOURCES + 100) {
            t.failed(&format!("10.0.{}.{}", i / 256, i % 256), i as i64);
        }
        assert!(t.len() <= AuthThrottle::MAX_SOURCES);
    }
}
