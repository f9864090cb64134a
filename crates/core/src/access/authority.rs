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
//!   words outside the chat where it was said (`core::memory::scope`).
//! - A reminder's run acts on its creator's authority, asked again at its time ([`gate`]).
//!
//! Invariants (INVARIANTS.md): "A run is its creator's request, made again", "Only its
//! creator cancels a reminder in a group".
//!
//! Pure: the edge passes the turn's history window and the seq its last answer covered.

use crate::history::{HistoryMessage, Role};
use crate::limits::{Scope, Verdict};
use crate::access::policy::{Access, Refusal};

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

/// What a run that is due (and not too late) may do, decided at its fire time from the access
/// policy for its creator in its chat and the budgets counted as for a message of the creator's.
#[derive(Debug, Clone, PartialEq)]
pub enum RunGate {
    /// A scheduled turn (its creator is charged one request).
    Fire,
    /// The chat or the bot is over its daily tokens: the run's own text, no model call.
    TextOnly,
    /// The creator or the chat no longer passes the access policy (blocked, not on the list,
    /// the group dropped from the allowlist): the schedule is cancelled, nothing runs.
    Cancel(Refusal),
    /// The creator is over their hourly requests and the schedule repeats: this run is
    /// skipped, like a run too late (it runs next time), never retried in a loop. A one-off
    /// run over the creator's hour goes out as its own text instead ([`RunGate::TextOnly`]):
    /// a reminder set once is never lost because its creator chatted a lot that hour.
    Skip,
}

/// Decides a due run: access first (a reminder never outlives its creator's access), then the
/// budgets (`limits::check` over the creator's hour and the chat's and the bot's day).
/// `recurring`: the schedule has a next run after this one.
pub fn gate(access: &Access, budget: &Verdict, recurring: bool) -> RunGate {
    match (access, budget) {
        (Access::Refuse(reason), _) => RunGate::Cancel(*reason),
        (Access::Pair, _) => RunGate::Cancel(Refusal::AwaitingApproval),
        (Access::Allow, Verdict::Within) => RunGate::Fire,
        (Access::Allow, Verdict::Over { scope: Scope::User, .. }) if recurring => RunGate::Skip,
        (Access::Allow, Verdict::Over { .. }) => RunGate::TextOnly,
    }
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

    #[test]
    fn a_due_run_passes_the_policy_and_its_creators_budget_again() {
        use crate::config::Config;
        use crate::conversation::ChatKind;
        use crate::limits::{self, Budgets, Usage};
        use crate::access::policy::{self, UserAccess};
        let cfg = |pairs: &[(&str, &str)]| Config::from_vars(&pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        let budgets = Budgets { user_turns_per_hour: 2, chat_tokens_per_day: 1000, global_tokens_per_day: 0 };
        let within = Usage { user_turns_last_hour: 1, chat_tokens_today: 10, global_tokens_today: 10 };
        let decide = |cfg: &Config, kind, chat, who, known, usage: &Usage| {
            let access = policy::decide(cfg, kind, chat, who, known);
            gate(&access, &limits::check(&budgets, usage, false, |_| None, 0), true)
        };
        let open = cfg(&[]);
        assert_eq!(decide(&open, ChatKind::Private, 7, Some(7), None, &within), RunGate::Fire);
        // Blocked since it was set: cancelled, whatever the budgets.
        assert_eq!(decide(&open, ChatKind::Private, 7, Some(7), Some(UserAccess::Blocked), &within), RunGate::Cancel(Refusal::Blocked));
        // The group was dropped from the allowlist.
        let listed = cfg(&[("GROUP_ALLOWLIST", "-100")]);
        assert_eq!(decide(&listed, ChatKind::Supergroup, -100, Some(7), None, &within), RunGate::Fire);
        assert_eq!(decide(&listed, ChatKind::Supergroup, -200, Some(7), None, &within), RunGate::Cancel(Refusal::GroupNotAllowed));
        // A stranger under a private policy (the operator changed it since).
        let private = cfg(&[("DM_POLICY", "pairing")]);
        assert_eq!(decide(&private, ChatKind::Private, 7, Some(7), None, &within), RunGate::Cancel(Refusal::AwaitingApproval));
        // The creator's hour is spent: skipped; the chat's tokens: the text only.
        let spent = Usage { user_turns_last_hour: 2, ..within };
        assert_eq!(decide(&open, ChatKind::Private, 7, Some(7), None, &spent), RunGate::Skip);
        // A one-off reminder over its creator's hour is not lost: its own text goes out.
        let once = gate(&policy::decide(&open, ChatKind::Private, 7, Some(7), None), &limits::check(&budgets, &spent, false, |_| None, 0), false);
        assert_eq!(once, RunGate::TextOnly);
        let tokens = Usage { chat_tokens_today: 1000, ..spent };
        assert_eq!(decide(&open, ChatKind::Private, 7, Some(7), None, &tokens), RunGate::TextOnly);
    }
}
