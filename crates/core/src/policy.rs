//! Who may talk to the bot. Decided before anything costs a model call; every refusal is
//! returned as a reason the edge records.
//!
//! Private chats follow `DM_POLICY`: `open`, `allowlist`, `pairing` (an unknown user gets a
//! one-time code an operator approves) or `disabled`. Groups follow `GROUP_ALLOWLIST` (empty:
//! all groups). A blocked user is refused everywhere. Operators (`ADMIN_USER_IDS`) are always
//! allowed.

use crate::config::{Config, DmPolicy};
use crate::conversation::ChatKind;

/// What D1 knows about a user's access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserAccess {
    Allowed,
    Blocked,
}

impl UserAccess {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "allowed" => Some(UserAccess::Allowed),
            "blocked" => Some(UserAccess::Blocked),
            _ => None,
        }
    }
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
    match kind {
        ChatKind::Group | ChatKind::Supergroup => {
            if !cfg.group_allowlist.is_empty() && !cfg.group_allowlist.contains(&chat_id) {
                Access::Refuse(Refusal::GroupNotAllowed)
            } else {
                Access::Allow
            }
        }
        ChatKind::Channel => Access::Refuse(Refusal::GroupNotAllowed),
        ChatKind::Private => {
            let Some(user) = user_id else { return Access::Refuse(Refusal::NoUser) };
            let listed = cfg.dm_allowlist.contains(&user) || known == Some(UserAccess::Allowed);
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
    fn pairing_codes_are_readable() {
        let code = pairing_code([0, 1, 2, 3, 250, 251, 252, 255]);
        assert_eq!(code.len(), 8);
        assert!(code.chars().all(|c| !"01OIL".contains(c)));
        assert_eq!(normalize_code(" abcd-efgh "), "ABCDEFGH");
    }
}
