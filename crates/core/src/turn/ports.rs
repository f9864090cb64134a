//! The turn's three small ports: the model ([`ModelPort`]), the tools that return results
//! ([`ToolPort`]) and the time ([`Clock`]). The edge implements them over `fetch` and D1, the
//! tests with in-memory fakes.
use crate::fetch::FetchResponse;
use crate::gemini::{GenerateContentRequest, GenerateContentResponse, ModelError};
use serde_json::Value;

#[allow(async_fn_in_trait)]
pub trait ModelPort {
    async fn generate(&self, model: &str, request: &GenerateContentRequest) -> Result<GenerateContentResponse, ModelError>;
}

#[allow(async_fn_in_trait)]
pub trait ToolPort {
    /// One GET of a checked URL, redirects not followed. The body is read only when
    /// `fetch::should_read_body(status, content_type)`, and at most `fetch::MAX_BODY_BYTES` of it.
    /// `Err` is a network failure or timeout.
    async fn fetch_url(&self, url: &str) -> Result<FetchResponse, String>;
    async fn search_memory(&self, query: &str) -> Vec<String>;
    async fn remember(&self, content: &str, about_user_id: Option<i64>) -> Result<i64, String>;
    async fn set_plan(&self, content: &str) -> Result<(), String>;
    /// Creates a schedule in this chat (the edge plans it with `schedule::plan` over the chat's
    /// zone and active count). `Ok` is what the model reads (`schedule::created_value`); `Err`
    /// a reason it reads (time in the past, unknown zone, too many schedules...).
    async fn schedule(&self, request: &crate::chat::schedule::Request) -> Result<Value, String>;
    /// This chat's active schedules (`schedule::list_value`).
    async fn list_schedules(&self) -> Result<Value, String>;
    /// Cancels one of this chat's schedules.
    async fn cancel_schedule(&self, id: i64) -> Result<Value, String>;
    /// Sends the owner their Telegram Business digest as its own message; what the model reads
    /// is only whether it went (the contacts' words never enter the turn).
    async fn business_digest(&self) -> Result<Value, String> {
        Err("not available here".to_string())
    }
}

pub trait Clock {
    fn now_ms(&self) -> i64;
}
