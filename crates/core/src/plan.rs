//! A reply plan: the actions of one turn, carried out in order by the chat's Durable Object.

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

/// What became of a step, for the history the model sees later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepOutcome {
    Sent { message_ids: Vec<i64> },
    Done,
    Cancelled,
    Failed { error: String },
}
