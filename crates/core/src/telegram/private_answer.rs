//! Answers that concern one person in a group (a command's answer, a refusal, a budget notice,
//! a pairing message) and how they reach that person alone: as an ephemeral message (Bot API
//! 10.2/10.3) where Telegram allows it, else as today. Telegram allows one
//! - replying to the person's ephemeral message within 15 s of it (any bot), or
//! - at any time, to any non-bot member, when the bot is an administrator of the chat.
//!
//! Whether the bot is an administrator is learnt from `getChatMember` about itself, kept in the
//! isolate's memory for [`ADMIN_TTL_MS`] ([`AdminCache`]): asked only when such an answer is
//! about to go and no reply window is open (a cold path: refusals and budget notices go at
//! most once per window), and never written to D1. A send Telegram refuses (the bot was
//! demoted within the time kept) falls back to today's answer, once, and marks the chat "not
//! an admin" until the time runs out.
//!
//! Invariants: a private answer never falls back to something that shows more than today's
//! answer does ([`Route::Today`] is exactly today's); a bot is never a receiver.

use crate::conversation::ChatKind;
use std::collections::HashMap;

/// How long the bot's own admin status in a chat is trusted.
pub const ADMIN_TTL_MS: i64 = 10 * 60 * 1000;
/// The most chats whose status an isolate keeps (past it the oldest half is forgotten).
pub const ADMIN_CACHE_MAX: usize = 512;

/// Whether a `ChatMember.status` is an administrator's (the creator is one too).
pub fn is_admin_status(status: &str) -> bool {
    matches!(status, "administrator" | "creator")
}

/// Who an answer about one person can go to alone: a person (not a bot) in a group.
pub fn receiver(kind: ChatKind, user_id: Option<i64>, is_bot: bool) -> Option<i64> {
    user_id.filter(|_| kind.is_group() && !is_bot)
}

/// How an answer concerning one person goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// An ephemeral message to the receiver; `reply_to`: the person's ephemeral message it
    /// answers within the window (`None`: the bot is an admin and sends it any time).
    Ephemeral { reply_to: Option<i64> },
    /// As today (a group message, or nothing where today says nothing).
    Today,
}

/// Whether the bot's admin status is worth asking for: not when a reply window is open.
pub fn needs_admin(reply_in_window: Option<i64>) -> bool {
    reply_in_window.is_none()
}

/// The route: `reply_in_window` is the person's ephemeral message id while Telegram's window
/// for replying to it is open; `admin` what is known of the bot's status (`None`: not asked).
pub fn route(reply_in_window: Option<i64>, admin: Option<bool>) -> Route {
    match (reply_in_window, admin) {
        (Some(id), _) => Route::Ephemeral { reply_to: Some(id) },
        (None, Some(true)) => Route::Ephemeral { reply_to: None },
        _ => Route::Today,
    }
}

/// The bot's admin status per chat, as last learnt, with when.
#[derive(Debug, Default)]
pub struct AdminCache {
    by_chat: HashMap<i64, (bool, i64)>,
}

impl AdminCache {
    /// The status learnt within [`ADMIN_TTL_MS`] of `now_ms`, if any.
    pub fn get(&self, chat: i64, now_ms: i64) -> Option<bool> {
        let (admin, at) = *self.by_chat.get(&chat)?;
        (now_ms - at < ADMIN_TTL_MS && now_ms >= at).then_some(admin)
    }

    /// Records what was learnt (a `getChatMember` answer, or a refused ephemeral send: false).
    pub fn set(&mut self, chat: i64, admin: bool, now_ms: i64) {
        if self.by_chat.len() >= ADMIN_CACHE_MAX && !self.by_chat.contains_key(&chat) {
            let mut ats: Vec<i64> = self.by_chat.values().map(|v| v.1).collect();
            crate::order::sort(&mut ats);
            let cut = ats[ats.len() / 2];
            self.by_chat.retain(|_, v| v.1 > cut);
        }
        self.by_chat.insert(chat, (admin, now_ms));
    }

    pub fn len(&self) -> usize {
        self.by_chat.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_chat.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_first_then_admin_rights_then_today() {
        assert_eq!(route(Some(7), None), Route::Ephemeral { reply_to: Some(7) });
        assert_eq!(route(Some(7), Some(false)), Route::Ephemeral { reply_to: Some(7) }, "any bot may reply within the window");
        assert_eq!(route(None, Some(true)), Route::Ephemeral { reply_to: None });
        assert_eq!(route(None, Some(false)), Route::Today);
        assert_eq!(route(None, None), Route::Today, "unknown status: as today");
        assert!(!needs_admin(Some(7)));
        assert!(needs_admin(None));
    }

    #[test]
    fn only_people_in_groups_receive() {
        assert_eq!(receiver(ChatKind::Supergroup, Some(5), false), Some(5));
        assert_eq!(receiver(ChatKind::Group, Some(5), false), Some(5));
        assert_eq!(receiver(ChatKind::Group, Some(5), true), None, "never a bot");
        assert_eq!(receiver(ChatKind::Group, None, false), None);
        assert_eq!(receiver(ChatKind::Private, Some(5), false), None);
    }

    #[test]
    fn admin_statuses() {
        assert!(is_admin_status("administrator"));
        assert!(is_admin_status("creator"));
        for s in ["member", "restricted", "left", "kicked", ""] {
            assert!(!is_admin_status(s), "{s}");
        }
    }

    #[test]
    fn the_status_is_trusted_for_its_time_only_and_the_cache_stays_bounded() {
        let mut c = AdminCache::default();
        assert_eq!(c.get(-1, 0), None);
        c.set(-1, true, 1_000);
        assert_eq!(c.get(-1, 1_000 + ADMIN_TTL_MS - 1), Some(true));
        assert_eq!(c.get(-1, 1_000 + ADMIN_TTL_MS), None, "stale: asked again");
        assert_eq!(c.get(-1, 999), None, "a clock gone back trusts nothing");
        c.set(-1, false, 2_000);
        assert_eq!(c.get(-1, 2_000), Some(false), "a refused send demotes at once");
        for i in 0..(ADMIN_CACHE_MAX as i64 * 3) {
            c.set(-100 - i, true, 10_000 + i);
        }
        assert!(c.len() <= ADMIN_CACHE_MAX);
        let last = -100 - (ADMIN_CACHE_MAX as i64 * 3 - 1);
        assert_eq!(c.get(last, 10_000 + ADMIN_CACHE_MAX as i64 * 3), Some(true), "the newest is kept");
    }
}
