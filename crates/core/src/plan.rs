//! A reply plan: the actions of one turn, carried out in order by the chat's Durable Object,
//! and the rules the object follows while carrying them out: which message a step replies to
//! by default ([`default_reply_to`]) and what a step that failed for good does to the rest of
//! the plan ([`after_fatal`]).

use serde::{Deserialize, Serialize};

/// One action of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Step {
    /// Send a message (Markdown; rendered and split at send time).
    Send {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply_to: Option<i64>,
        /// Send with link previews off: the text links something no person posted (decided by
        /// `fetch::needs_preview_off` when the turn ends).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        no_link_preview: bool,
    },
    React { message_id: i64, emoji: String },
    Sticker {
        set_name: String,
        emoji: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply_to: Option<i64>,
    },
    /// Pause before the next step (an alarm, not a sleep).
    Wait { seconds: u32 },
}

/// The longest pause a plan may take between steps.
pub const MAX_WAIT_SECS: u32 = 60;

impl Step {
    pub fn kind(&self) -> &'static str {
        match self {
            Step::Send { .. } => "send",
            Step::React { .. } => "react",
            Step::Sticker { .. } => "sticker",
            Step::Wait { .. } => "wait",
        }
    }
    /// Whether the step puts something in front of the user.
    pub fn is_visible(&self) -> bool {
        !matches!(self, Step::Wait { .. })
    }
}

/// The message a step replies to when it names none: in groups, the first message of a reply
/// (the plan's first Send, or a Sticker before any Send) threads to the message the turn
/// answers (`target`), so people see what it answers; in private chats nothing threads.
pub fn default_reply_to(group: bool, steps: &[Step], index: usize, target: Option<i64>) -> Option<i64> {
    let step = steps.get(index)?;
    let first_send = !steps.iter().take(index).any(|s| matches!(s, Step::Send { .. }));
    (group && first_send && matches!(step, Step::Send { .. } | Step::Sticker { .. })).then_some(target).flatten()
}

/// What a step that failed for good does to its plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// The rest of the plan makes no sense without it (or the bot may not write here): drop it.
    DropPlan,
    /// Skip the step and go on (a refused reaction or sticker).
    Skip,
}

/// A failed send drops the plan (what follows refers to it); so does any step when the chat
/// blocked the bot. A reaction or sticker Telegram refused is skipped.
pub fn after_fatal(step: &Step, blocked: bool) -> AfterFailure {
    if blocked || matches!(step, Step::Send { .. }) {
        AfterFailure::DropPlan
    } else {
        AfterFailure::Skip
    }
}

/// What became of a step, for the history the model sees later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepOutcome {
    Sent { message_ids: Vec<i64> },
    Done,
    Cancelled,
    Failed { error: String },
}

#[cfg(test)]
mod rule_tests {
    use super::*;

    fn send() -> Step {
        Step::Send { text: "hi".into(), reply_to: None, no_link_preview: false }
    }
    fn sticker() -> Step {
        Step::Sticker { set_name: "s".into(), emoji: "👍".into(), reply_to: None }
    }
    fn react() -> Step {
        Step::React { message_id: 1, emoji: "👍".into() }
    }

    #[test]
    fn in_groups_only_the_first_message_of_a_reply_threads_to_the_target() {
        let steps = vec![react(), sticker(), send(), Step::Wait { seconds: 1 }, send()];
        let replies: Vec<_> = (0..steps.len()).map(|i| default_reply_to(true, &steps, i, Some(7))).collect();
        assert_eq!(replies, vec![None, Some(7), Some(7), None, None]);
        // A sticker after the first send does not thread.
        let steps = vec![send(), sticker()];
        assert_eq!(default_reply_to(true, &steps, 1, Some(7)), None);
    }

    #[test]
    fn private_chats_and_turns_without_a_target_do_not_thread() {
        let steps = vec![send(), send()];
        assert_eq!(default_reply_to(false, &steps, 0, Some(7)), None);
        assert_eq!(default_reply_to(true, &steps, 0, None), None);
        assert_eq!(default_reply_to(true, &steps, 5, Some(7)), None);
    }

    #[test]
    fn a_failed_send_drops_the_plan_and_a_refused_reaction_or_sticker_is_skipped() {
        assert_eq!(after_fatal(&send(), false), AfterFailure::DropPlan);
        assert_eq!(after_fatal(&react(), false), AfterFailure::Skip);
        assert_eq!(after_fatal(&sticker(), false), AfterFailure::Skip);
        // Blocked: nothing more can go out.
        assert_eq!(after_fatal(&react(), true), AfterFailure::DropPlan);
        assert_eq!(after_fatal(&sticker(), true), AfterFailure::DropPlan);
    }
}
