//! Who may talk to the bot. Decided before anything costs a model call; every refusal is
//! returned as a reason the edge records.
//!
//! Private chats follow `DM_POLICY`: `open`, `allowlist`, `pairing` (an unknown user gets a
//! one-time code an operator approves) or `disabled`. Groups follow `GROUP_ALLOWLIST`: a listed
//! group is approved for all its members. With no group allowlist, groups are open only when
//! private chats are (`DM_POLICY=open`); otherwise the speaker in a group is checked as in a
//! private chat (on `DM_ALLOWLIST` or approved), so a refused stranger cannot get service by
//! creating a group and adding the bot. A blocked user is refused everywhere. Operators
//! (`ADMIN_USER_IDS`) are always allowed.
//!
//! Invariants (INVARIANTS.md): "Refused text stays out of every model call" (messages are
//! marked `excluded` from [`admitted_by_level`], which is [`decide`] evaluated for every level,
//! so what the chat object refuses and what stays out of history never disagree), "API
//! conversations are never Telegram chats" ([`API_CHAT_ID_MIN`]..=[`API_CHAT_ID_MAX`], above
//! every id Telegram can give a chat), "A refused sender costs a counter, not rows". Also: the
//! access level stored in `users.access` is [`UserAccess`] (the SQL `CHECK` of migration 0006
//! lists exactly [`UserAccess::ALL`]).

use crate::config::{Config, DmPolicy};
use crate::conversation::ChatKind;

/// What D1 knows about a user's access (`users.access`; NULL there means the policy's
/// default for strangers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserAccess {
    Allowed,
    Blocked,
}

impl UserAccess {
    /// Every level, as the SQL `CHECK (access IN (...))` lists them.
    pub const ALL: [UserAccess; 2] = [UserAccess::Allowed, UserAccess::Blocked];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "allowed" => Some(UserAccess::Allowed),
            "blocked" => Some(UserAccess::Blocked),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            UserAccess::Allowed => "allowed",
            UserAccess::Blocked => "blocked",
        }
    }
}

/// Telegram gives chats ids with at most 52 significant bits; API conversations take the ids
/// from 2^52 up to the largest integer a JS number (and so D1) holds exactly.
pub const API_CHAT_ID_MIN: i64 = 1 << 52;
pub const API_CHAT_ID_MAX: i64 = (1 << 53) - 1;

/// Whether `chat_id` is an API conversation's id (never a Telegram chat).
pub fn is_api_chat_id(chat_id: i64) -> bool {
    (API_CHAT_ID_MIN..=API_CHAT_ID_MAX).contains(&chat_id)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Blocked,
    DmDisabled,
    NotAllowlisted,
    GroupNotAllowed,
    /// Pairing is pending: the user has a code, an operator has not approved it yet.
    AwaitingApproval,
    /// A message with no user behind it (a channel or anonymous admin) in a private policy.
    NoUser,
    /// A group with no allowlist under a restricted `DM_POLICY`: the speaker is not approved.
    SpeakerNotAllowed,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Blocked => "blocked",
            Refusal::DmDisabled => "dm_disabled",
            Refusal::NotAllowlisted => "not_allowlisted",
            Refusal::GroupNotAllowed => "group_not_allowed",
            Refusal::AwaitingApproval => "awaiting_approval",
            Refusal::NoUser => "no_user",
            Refusal::SpeakerNotAllowed => "speaker_not_allowed",
        }
    }

    /// The short message the user sees, if any (groups get silence).
    pub fn user_message(self) -> Option<&'static str> {
        match self {
            Refusal::DmDisabled => Some("Sorry, I don't take private messages."),
            Refusal::NotAllowlisted => Some("Sorry, I only talk to people on my list. Ask my operator to add you."),
            _ => None,
        }
    }
}

/// What a person refused in a group is told, and only as an ephemeral message (Bot API 10.2:
/// the bot an admin there; `telegram::private_answer`): where that cannot go, nothing, as before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupNotice {
    Text(&'static str),
    /// `DM_POLICY=pairing`: the person gets their pairing code (or is reminded of it).
    Pair,
}

impl Refusal {
    /// The notice for a refusal in a group under `dm_policy`: the blocked, messages with no
    /// person and pending pairings (told when the code was given) get none.
    pub fn group_notice(self, dm_policy: DmPolicy) -> Option<GroupNotice> {
        match self {
            Refusal::SpeakerNotAllowed if dm_policy == DmPolicy::Pairing => Some(GroupNotice::Pair),
            Refusal::SpeakerNotAllowed => Some(GroupNotice::Text("Sorry, I only answer people my operator has approved. Ask my operator to add you.")),
            Refusal::GroupNotAllowed => Some(GroupNotice::Text("Sorry, I don't answer in this group. Ask my operator to add it.")),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    Allow,
    Refuse(Refusal),
    /// Private chat under `pairing` with an unknown user: give them a code.
    Pair,
}

/// Decides access for a message from `user_id` in a chat of `kind` with id `chat_id`.
pub fn decide(cfg: &Config, kind: ChatKind, chat_id: i64, user_id: Option<i64>, known: Option<UserAccess>) -> Access {
    let is_admin = user_id.is_some_and(|u| cfg.admin_user_ids.contains(&u));
    if is_admin {
        return Access::Allow;
    }
    if known == Some(UserAccess::Blocked) {
        return Access::Refuse(Refusal::Blocked);
    }
    let listed = |user: i64| cfg.dm_allowlist.contains(&user) || known == Some(UserAccess::Allowed);
    match kind {
        ChatKind::Group | ChatKind::Supergroup => {
            if !cfg.group_allowlist.is_empty() {
                if cfg.group_allowlist.contains(&chat_id) {
                    Access::Allow
                } else {
                    Access::Refuse(Refusal::GroupNotAllowed)
                }
            } else if cfg.dm_policy == DmPolicy::Open {
                Access::Allow
            } else {
                // No operator approved this group: the speaker must be someone the bot would
                // answer in private (pairing codes are given in private chats only).
                match user_id {
                    None => Access::Refuse(Refusal::NoUser),
                    Some(user) if listed(user) => Access::Allow,
                    Some(_) => Access::Refuse(Refusal::SpeakerNotAllowed),
                }
            }
        }
        ChatKind::Channel => Access::Refuse(Refusal::GroupNotAllowed),
        ChatKind::Private => {
            let Some(user) = user_id else { return Access::Refuse(Refusal::NoUser) };
            let listed = listed(user);
            match cfg.dm_policy {
                DmPolicy::Open => Access::Allow,
                DmPolicy::Disabled => Access::Refuse(Refusal::DmDisabled),
                DmPolicy::Allowlist if listed => Access::Allow,
                DmPolicy::Allowlist => Access::Refuse(Refusal::NotAllowlisted),
                DmPolicy::Pairing if listed => Access::Allow,
                DmPolicy::Pairing => Access::Pair,
            }
        }
    }
}

/// Whether a message would be admitted for each stored access level of its sender: `(none,
/// allowed, blocked)`. The webhook binds these three answers into the message insert, which
/// picks the one matching `users.access` in the same batch: the message is marked `excluded`
/// (kept for the audit trail, out of history, consolidation and every model call) exactly
/// when [`decide`] would refuse it.
pub fn admitted_by_level(cfg: &Config, kind: ChatKind, chat_id: i64, user_id: Option<i64>) -> (bool, bool, bool) {
    let ok = |known| decide(cfg, kind, chat_id, user_id, known) == Access::Allow;
    (ok(None), ok(Some(UserAccess::Allowed)), ok(Some(UserAccess::Blocked)))
}

/// Whether [`admitted_by_level`]'s answers admit a sender whose stored level is `level`
/// (`users.access`, as stored: `None` for none or one not known).
pub fn admitted_at(admitted: (bool, bool, bool), level: Option<&str>) -> bool {
    match level.and_then(UserAccess::parse) {
        None => admitted.0,
        Some(UserAccess::Allowed) => admitted.1,
        Some(UserAccess::Blocked) => admitted.2,
    }
}

/// How the webhook limits what a refused sender costs, before it writes anything: one counter
/// row per sender per hour (`refused_senders`, in the update's own D1 batch) counts the updates
/// the policy refuses; the first `per_hour` of them are recorded as today (the update, the
/// message marked `excluded`, and the hand-off to the chat object, which records the refusal
/// and sends its one notice); past it, nothing but the counter (which stops moving at
/// `per_hour + 1`), so a persistent stranger costs no D1 write and no object call per message.
/// Whether an update is refused is decided in SQL from the three answers of
/// [`admitted_by_level`], as the message's `excluded` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefusedLimit {
    /// The sender: the person; or the chat, for a message with no person (a channel post) and
    /// for a chat the policy refuses whoever speaks (a group off the allowlist), so a busy
    /// refused group costs as much as one stranger, not one per member.
    pub sender: i64,
    /// The start of the hour the update falls in (ms).
    pub window_start: i64,
    /// Refused updates of the hour that are recorded.
    pub per_hour: u32,
}

pub const REFUSED_WINDOW_MS: i64 = 3_600_000;

impl RefusedLimit {
    /// `admitted`: [`admitted_by_level`] for this update.
    pub fn new(chat_id: i64, user_id: Option<i64>, admitted: (bool, bool, bool), now_ms: i64, per_hour: u32) -> Self {
        let whoever_speaks = admitted == (false, false, false);
        let sender = if whoever_speaks { chat_id } else { user_id.unwrap_or(chat_id) };
        RefusedLimit { sender, window_start: now_ms - now_ms.rem_euclid(REFUSED_WINDOW_MS), per_hour }
    }

    /// Whether the `n`th refused update of the hour (1-based, as the counter stands after it) is
    /// past the limit: not recorded, not handed on.
    pub fn over(&self, n: u32) -> bool {
        n > self.per_hour
    }
}

/// Alphabet of pairing codes: no 0/O, 1/I/L, so codes survive being read aloud.
const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";

/// A pairing code from random bytes (the edge supplies them): 8 characters, about 39 bits.
pub fn pairing_code(random: [u8; 8]) -> String {
    random.iter().map(|b| CODE_ALPHABET[*b as usize % CODE_ALPHABET.len()] as char).collect()
}

/// Normalises a code someone typed (case, spaces, dashes).
pub fn normalize_code(s: &str) -> String {
    s.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_uppercase()).collect()
}

pub fn pairing_message(code: &str, ttl_secs: i64) -> String {
    format!(
        "Hi! I don't know you yet. Your pairing code is {code}. Send it to my operator; once they \
         approve it I'll answer you. The code expires in {} minutes.",
        ttl_secs / 60
    )
}

pub const PAIRING_APPROVED_MESSAGE: &str = "You're approved. Write to me any time!";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_level_picks_its_answer() {
        let cfg = Config::default();
        let admitted = admitted_by_level(&cfg, ChatKind::Group, -5, Some(7));
        assert!(admitted_at(admitted, None) && admitted_at(admitted, Some("allowed")));
        assert!(!admitted_at(admitted, Some("blocked")), "blocked means blocked");
        assert_eq!(admitted_at(admitted, Some("something else")), admitted.0);
    }

    #[test]
    fn group_refusals_tell_only_the_person_and_never_the_blocked() {
        assert_eq!(Refusal::SpeakerNotAllowed.group_notice(DmPolicy::Pairing), Some(GroupNotice::Pair));
        assert!(matches!(Refusal::SpeakerNotAllowed.group_notice(DmPolicy::Allowlist), Some(GroupNotice::Text(_))));
        assert!(matches!(Refusal::GroupNotAllowed.group_notice(DmPolicy::Open), Some(GroupNotice::Text(_))));
        for r in [Refusal::Blocked, Refusal::NoUser, Refusal::AwaitingApproval] {
            assert_eq!(r.group_notice(DmPolicy::Pairing), None, "{r:?}");
        }
    }
    use std::collections::BTreeMap;

    fn cfg(pairs: &[(&str, &str)]) -> Config {
        let vars: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::from_vars(&vars)
    }

    #[test]
    fn private_policies() {
        let p = ChatKind::Private;
        assert_eq!(decide(&cfg(&[]), p, 1, Some(1), None), Access::Allow);
        assert_eq!(decide(&cfg(&[("DM_POLICY", "disabled")]), p, 1, Some(1), None), Access::Refuse(Refusal::DmDisabled));
        let allow = cfg(&[("DM_POLICY", "allowlist"), ("DM_ALLOWLIST", "1")]);
        assert_eq!(decide(&allow, p, 1, Some(1), None), Access::Allow);
        assert_eq!(decide(&allow, p, 2, Some(2), None), Access::Refuse(Refusal::NotAllowlisted));
        assert_eq!(decide(&allow, p, 2, Some(2), Some(UserAccess::Allowed)), Access::Allow);
        let pairing = cfg(&[("DM_POLICY", "pairing")]);
        assert_eq!(decide(&pairing, p, 3, Some(3), None), Access::Pair);
        assert_eq!(decide(&pairing, p, 3, Some(3), Some(UserAccess::Allowed)), Access::Allow);
    }

    #[test]
    fn blocked_users_and_groups() {
        let c = cfg(&[("GROUP_ALLOWLIST", "-100")]);
        assert_eq!(decide(&c, ChatKind::Supergroup, -100, Some(1), None), Access::Allow);
        assert_eq!(decide(&c, ChatKind::Supergroup, -200, Some(1), None), Access::Refuse(Refusal::GroupNotAllowed));
        assert_eq!(
            decide(&c, ChatKind::Supergroup, -100, Some(1), Some(UserAccess::Blocked)),
            Access::Refuse(Refusal::Blocked)
        );
        assert_eq!(decide(&cfg(&[]), ChatKind::Private, 1, Some(1), Some(UserAccess::Blocked)), Access::Refuse(Refusal::Blocked));
    }

    #[test]
    fn admins_always_pass() {
        let c = cfg(&[("DM_POLICY", "disabled"), ("ADMIN_USER_IDS", "9")]);
        assert_eq!(decide(&c, ChatKind::Private, 9, Some(9), Some(UserAccess::Blocked)), Access::Allow);
    }

    #[test]
    fn restricted_private_chats_restrict_groups_without_an_allowlist() {
        let g = ChatKind::Supergroup;
        // Open: any group.
        assert_eq!(decide(&cfg(&[]), g, -5, Some(7), None), Access::Allow);
        for policy in ["pairing", "allowlist", "disabled"] {
            let c = cfg(&[("DM_POLICY", policy), ("DM_ALLOWLIST", "1"), ("ADMIN_USER_IDS", "9")]);
            // A stranger's own group gets nothing.
            assert_eq!(decide(&c, g, -5, Some(7), None), Access::Refuse(Refusal::SpeakerNotAllowed), "{policy}");
            assert_eq!(decide(&c, ChatKind::Group, -5, None, None), Access::Refuse(Refusal::NoUser), "{policy}");
            // Listed, approved and operators are answered there.
            assert_eq!(decide(&c, g, -5, Some(1), None), Access::Allow, "{policy}");
            assert_eq!(decide(&c, g, -5, Some(7), Some(UserAccess::Allowed)), Access::Allow, "{policy}");
            assert_eq!(decide(&c, g, -5, Some(9), None), Access::Allow, "{policy}");
            assert_eq!(decide(&c, g, -5, Some(1), Some(UserAccess::Blocked)), Access::Refuse(Refusal::Blocked), "{policy}");
        }
        // An allowlisted group is approved for every member; others are refused.
        let c = cfg(&[("DM_POLICY", "pairing"), ("GROUP_ALLOWLIST", "-5")]);
        assert_eq!(decide(&c, g, -5, Some(7), None), Access::Allow);
        assert_eq!(decide(&c, g, -6, Some(7), Some(UserAccess::Allowed)), Access::Refuse(Refusal::GroupNotAllowed));
    }

    #[test]
    fn admitted_by_level_agrees_with_decide() {
        let c = cfg(&[("DM_POLICY", "pairing"), ("DM_ALLOWLIST", "1"), ("ADMIN_USER_IDS", "9")]);
        assert_eq!(admitted_by_level(&c, ChatKind::Private, 7, Some(7)), (false, true, false));
        assert_eq!(admitted_by_level(&c, ChatKind::Private, 1, Some(1)), (true, true, false));
        assert_eq!(admitted_by_level(&c, ChatKind::Private, 9, Some(9)), (true, true, true));
        assert_eq!(admitted_by_level(&c, ChatKind::Supergroup, -5, Some(7)), (false, true, false));
        assert_eq!(admitted_by_level(&cfg(&[]), ChatKind::Supergroup, -5, Some(7)), (true, true, false));
        assert_eq!(admitted_by_level(&cfg(&[]), ChatKind::Channel, -5, None), (false, false, false));
    }

    #[test]
    fn a_refused_sender_is_counted_per_person_per_hour() {
        let hour = REFUSED_WINDOW_MS;
        let by_level = (false, true, false);
        let a = RefusedLimit::new(7, Some(7), by_level, 5 * hour + 10, 5);
        assert_eq!(a, RefusedLimit { sender: 7, window_start: 5 * hour, per_hour: 5 });
        let in_group = RefusedLimit::new(-100, Some(7), by_level, 6 * hour - 1, 5);
        assert_eq!((in_group.sender, in_group.window_start), (7, 5 * hour), "the same hour, any chat: one counter");
        assert_eq!(RefusedLimit::new(-100, Some(7), by_level, 6 * hour, 5).window_start, 6 * hour, "a new hour, a new counter");
        assert_eq!(RefusedLimit::new(-100, None, by_level, 0, 5).sender, -100, "no person: the chat");
        // A group off the allowlist refuses whoever speaks: one counter for the group.
        let c = cfg(&[("GROUP_ALLOWLIST", "-5")]);
        let refused_group = admitted_by_level(&c, ChatKind::Supergroup, -6, Some(7));
        assert_eq!(RefusedLimit::new(-6, Some(7), refused_group, 0, 5).sender, -6);
        assert_eq!(RefusedLimit::new(-6, Some(8), refused_group, 0, 5).sender, -6);
        assert!(!a.over(1) && !a.over(5), "the first few are recorded, the first one's notice too");
        assert!(a.over(6));
    }

    #[test]
    fn access_levels_match_the_schema() {
        let sql = include_str!("../../../../migrations/0006_access_and_budgets.sql");
        let listed: Vec<String> = UserAccess::ALL.iter().map(|a| format!("'{}'", a.as_str())).collect();
        assert!(sql.contains(&format!("CHECK (access IN ({}))", listed.join(", "))), "migration 0006 must list {listed:?}");
        for a in UserAccess::ALL {
            assert_eq!(UserAccess::parse(a.as_str()), Some(a));
        }
        assert_eq!(UserAccess::parse("admin"), None);
    }

    #[test]
    fn api_chat_ids_are_never_telegram_ids() {
        // Telegram's largest ids: users below 2^52, supergroups and channels -100xxxxxxxxxx.
        for real in [1, 8_000_000_000, (1 << 52) - 1, -1_009_999_999_999, -1, 0] {
            assert!(!is_api_chat_id(real), "{real}");
        }
        assert!(is_api_chat_id(API_CHAT_ID_MIN));
        assert!(is_api_chat_id(API_CHAT_ID_MAX));
        assert!(!is_api_chat_id(API_CHAT_ID_MAX + 1));
        // Exactly representable as a JS number.
        assert_eq!(API_CHAT_ID_MAX as f64 as i64, API_CHAT_ID_MAX);
    }

    #[test]
    fn pairing_codes_are_readable() {
        let code = pairing_code([0, 1, 2, 3, 250, 251, 252, 255]);
        assert_eq!(code.len(), 8);
        assert!(code.chars().all(|c| !"01OIL".contains(c)));
        assert_eq!(normalize_code(" abcd-efgh "), "ABCDEFGH");
    }
}
