//! Telegram's Stop button in the chat object: a `stopped_message_generation` update names
//! only the chat, the topic and the draft id. The running turn whose drafts carry that id
//! (`core::telegram::drafts::stops_turn`) stops at once (`bot::stream::stop_turn`: its model
//! stream is aborted; what it sends then is `STOP_KEEPS`'s); a Stop for any other draft (a
//! finished turn's, a late or repeated press) does nothing.

use super::ChatObject;
use agent_core::telegram::drafts::stops_turn;

impl ChatObject {
    /// Stops the running turn if `draft_id` is its draft's. Returns whether it did.
    pub(super) async fn stop_generation(&self, draft_id: i64) -> bool {
        let running = self.with(|st| st.turn().map(|t| t.turn_id.clone())).await;
        match running {
            Some(turn_id) if self.in_flight.get() && stops_turn(&turn_id, draft_id) => {
                crate::bot::stream::stop_turn(&turn_id);
                true
            }
            _ => {
                worker::console_log!("a Stop for draft {draft_id}, which is no running turn's: nothing to stop");
                false
            }
        }
    }
}
