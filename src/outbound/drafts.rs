//! Telegram's message drafts (`sendMessageDraft`, Bot API 9): a partial answer shown in a
//! private chat while it is being written; an empty text shows a "Thinking…" placeholder.
//! Drafts are ephemeral: the answer itself is always a message sent through the outbox.

use super::telegram::TelegramClient;
use agent_core::telegram::api::TelegramError;
use serde_json::json;

impl TelegramClient {
    /// Shows (or updates) draft `draft_id` in a private chat: `html` in Telegram's HTML parse
    /// mode, or the placeholder when empty.
    pub async fn draft(&self, chat_id: i64, thread_id: Option<i64>, draft_id: i64, html: &str) -> Result<(), TelegramError> {
        let mut body = json!({ "chat_id": chat_id, "draft_id": draft_id, "text": html });
        if !html.is_empty() {
            body["parse_mode"] = json!("HTML");
        }
        if let Some(thread) = thread_id {
            body["message_thread_id"] = json!(thread);
        }
        self.call("sendMessageDraft", &body).await.map(|_| ())
    }
}

impl TelegramClient {
    /// A turn's draft (as [`TelegramClient::draft`]) with Telegram's Stop button (`can_stop`,
    /// Bot API 10.3): a press comes back as a `stopped_message_generation` update naming
    /// `draft_id`. `keep_on_stop` is left off: the draft vanishes soon whatever it says, so
    /// keeping a stopped answer means sending it (`STOP_KEEPS`).
    pub async fn stoppable_draft(&self, chat_id: i64, thread_id: Option<i64>, draft_id: i64, html: &str) -> Result<(), TelegramError> {
        let mut body = json!({ "chat_id": chat_id, "draft_id": draft_id, "text": html, "can_stop": true });
        if !html.is_empty() {
            body["parse_mode"] = json!("HTML");
        }
        if let Some(thread) = thread_id {
            body["message_thread_id"] = json!(thread);
        }
        self.call("sendMessageDraft", &body).await.map(|_| ())
    }

    /// Shows (or updates) draft `draft_id` in a private chat as a rich message (with Stop)
    /// (`sendRichMessageDraft`, Bot API 10.1): `html` is rich HTML (`core::format::rich`).
    pub async fn rich_draft(&self, chat_id: i64, thread_id: Option<i64>, draft_id: i64, html: &str) -> Result<(), TelegramError> {
        let mut body = json!({ "chat_id": chat_id, "draft_id": draft_id, "rich_message": { "html": html, "skip_entity_detection": true }, "can_stop": true });
        if let Some(thread) = thread_id {
            body["message_thread_id"] = json!(thread);
        }
        self.call("sendRichMessageDraft", &body).await.map(|_| ())
    }
}
