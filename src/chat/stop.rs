//! A running turn's one stop switch (`bot::stream::Stop`, one per turn this instance drives,
//! made with the turn's `Live`): this file is where the chat object throws it, for either of
//! the two reasons a turn stops part-way (`bot::stream::StopReason`). The switch wakes the
//! turn's model call at once (no timer looks for it); what stays is the reason's.
//!
//! - Telegram's Stop button: a `stopped_message_generation` update names only the chat, the
//!   topic and the draft id. The running turn whose drafts carry that id
//!   (`ChatState::turn_to_stop`) stops at once, keeping what it wrote (sent or not
//!   as `STOP_KEEPS` says); a Stop for any other draft (a finished turn's, a late or repeated
//!   press) does nothing.
//! - An early start a newer message abandoned (`inbox.rs`): it stops at once, dropping what it
//!   wrote.

use super::ChatObject;
use crate::bot::stream::StopReason;

impl ChatObject {
    /// Stops the running turn if `draft_id` is its draft's. Returns whether it did.
    pub(super) async fn stop_generation(&self, draft_id: i64) -> bool {
        match self.with(|st| st.turn_to_stop(draft_id)).await {
            Some(turn_id) if self.throw_stop(&turn_id, StopReason::Person) => true,
            _ => {
                worker::console_log!("a Stop for draft {draft_id}, which is no running turn's: nothing to stop");
                false
            }
        }
    }

    /// Stops the model call of turn `turn_id` if this instance drives it (an abandoned early
    /// start): the call ends at once as `ModelError::Abandoned`. False: not running here.
    pub(super) fn abandon_turn(&self, turn_id: &str) -> bool {
        self.throw_stop(turn_id, StopReason::Abandoned)
    }

    /// Throws the stop switch of turn `turn_id` for `reason`, if this instance drives it.
    fn throw_stop(&self, turn_id: &str, reason: StopReason) -> bool {
        let stop = self.running.borrow().switch_of(turn_id);
        stop.inspect(|s| s.throw(reason)).is_some()
    }
}
