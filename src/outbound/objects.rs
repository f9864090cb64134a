//! The chat Durable Object's client and the one message format between the worker and an
//! object: a [`ChatRequest`], serialized here and parsed once by the object's fetch handler
//! (`chat::ChatObject`), one object per conversation, named by its key.
//!
//! Invariant: the conversation key travels as the object's name and in the `conv` query
//! parameter (so an object learns its own key on its first call); nothing else in the URL,
//! whose path is always `/`: what is asked is the request in the body.

use crate::config::env::CHATS;
use crate::config::Ctx;
use agent_core::conversation::{ConvKey, InboundMessage, InboundReaction};
use agent_core::telegram::gating::Trigger;
use agent_core::background::jobs::Job;
use serde::{Deserialize, Serialize};
use worker::js_sys::{Promise, Reflect, Uint8Array};
use worker::wasm_bindgen::{self, prelude::wasm_bindgen, JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{web_sys, Response, Result};

/// What the worker asks of a chat object (the body of every call, serde's external tagging:
/// `{"<name>": ...}`, or `"<name>"` for a request without a body), and what each answers.
/// Not adjacently tagged: that form is read through serde's buffered `Content`, which alone
/// added about 40 KB gzip of code to the wasm.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatRequest {
    /// An update that asks for a reply arrived (the webhook): answers `ok`.
    Arrival(Arrival),
    /// A retry job for a turn or a step (the queue consumer): answers its `JobOutcome`.
    Job(Job),
    /// A dead-lettered job (the queue consumer): the object gives it up; answers `ok`.
    Dead(Job),
    /// An API chat turn (`POST /api/v1/chat`): answers the reply, with its status.
    Chat { text: String, name: String },
    /// Re-read the chat's next schedule run (after a change made elsewhere, or the cron's
    /// check): answers `{"next_run_ms"}`.
    Schedules,
    /// The chat's crew switch (`None`: follow `CREW_CHATS`): answers `{"enabled"}`.
    Crew { enabled: Option<bool> },
    /// Telegram's Stop was pressed on draft `draft_id` (a `stopped_message_generation`
    /// update): the running turn whose draft it is stops; any other, nothing. Answers `ok`.
    Stop { draft_id: i64 },
    /// When the object next wakes (its alarm; the admin API's `GET /api/v1/chats/{id}/wake`):
    /// answers `{"next_wake_ms"}`, `null` when nothing is due.
    Wake,
}

impl ChatRequest {
    /// The request's name (its tag on the wire), for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            ChatRequest::Arrival(_) => "arrival",
            ChatRequest::Job(_) => "job",
            ChatRequest::Dead(_) => "dead",
            ChatRequest::Chat { .. } => "chat",
            ChatRequest::Schedules => "schedules",
            ChatRequest::Crew { .. } => "crew",
            ChatRequest::Wake => "wake",
            ChatRequest::Stop { .. } => "stop",
        }
    }
}

/// An update that arrived for a chat and asks for a reply: a message or a reaction, as the
/// webhook hands it to the chat's object.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Arrival {
    pub update_id: i64,
    pub trigger: Trigger,
    pub message: Option<InboundMessage>,
    pub reaction: Option<InboundReaction>,
    /// `users.access` of the sender, read in the webhook's batch.
    pub access: Option<String>,
    pub bot_username: String,
}

#[wasm_bindgen]
extern "C" {
    /// The chat objects' namespace (`env.CHATS`), as the runtime gives it.
    type Namespace;
    #[wasm_bindgen(method, catch, js_name = idFromName)]
    fn id_from_name(this: &Namespace, name: &str) -> std::result::Result<JsValue, JsValue>;
    #[wasm_bindgen(method, catch)]
    fn get(this: &Namespace, id: &JsValue) -> std::result::Result<Stub, JsValue>;

    /// A chat object's stub.
    type Stub;
    #[wasm_bindgen(method, catch)]
    fn fetch(this: &Stub, url: &str, init: &web_sys::RequestInit) -> std::result::Result<Promise, JsValue>;
}

/// Posts a request to a chat object; the answer as the runtime gives it.
///
/// Through the runtime's own objects, not `worker::Stub` and `worker::Request`: those check the
/// binding's type by its constructor's name, make a `Request`, read its URL, method and headers
/// back into Rust, and read the answer's headers, `cf` and WebSocket up front. Every webhook
/// that asks for a reply and every queued job makes this call.
async fn post(ctx: &Ctx, conv: &ConvKey, request: &ChatRequest) -> Result<web_sys::Response> {
    ctx.meter.add(1);
    let conv = conv.to_string();
    let namespace: Namespace = Reflect::get(&ctx.env, &JsValue::from_str(CHATS))?.unchecked_into();
    let stub = namespace.get(&namespace.id_from_name(&conv)?)?;
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    init.set_body(&Uint8Array::from(serde_json::to_vec(request)?.as_slice()));
    let answer = JsFuture::from(stub.fetch(&format!("https://chat/?conv={conv}"), &init)?).await?;
    Ok(answer.dyn_into()?)
}

/// Asks a chat object something; its answer.
pub async fn call(ctx: &Ctx, conv: &ConvKey, request: &ChatRequest) -> Result<Response> {
    post(ctx, conv, request).await.map(Response::from)
}

/// Asks a chat object something and fails unless it answered 200 (its body is not read).
pub async fn call_ok(ctx: &Ctx, conv: &ConvKey, request: &ChatRequest) -> Result<web_sys::Response> {
    let resp = post(ctx, conv, request).await?;
    if resp.status() != 200 {
        return Err(worker::Error::RustError(format!("chat object answered {}", resp.status())));
    }
    Ok(resp)
}

/// Tells an object something that needs no answer (re-read its schedules): the call must be
/// answered 200, and its body is read to the end (an unread body keeps the caller's
/// invocation open: a cron run would never finish).
pub async fn notify(ctx: &Ctx, conv: &ConvKey, request: &ChatRequest) -> Result<()> {
    let resp = call_ok(ctx, conv, request).await?;
    JsFuture::from(resp.array_buffer()?).await.map(|_| ())?;
    Ok(())
}

/// Hands an arrived update to its chat object; fails if the object did not accept it (the
/// webhook then answers 500 and Telegram redelivers).
/// Tells the chat object of `conv` that Stop was pressed on draft `draft_id`.
pub async fn send_stop(ctx: &Ctx, conv: &ConvKey, draft_id: i64) -> Result<()> {
    notify(ctx, conv, &ChatRequest::Stop { draft_id }).await
}

pub async fn send_arrival(ctx: &Ctx, conv: &ConvKey, arrival: Arrival) -> Result<()> {
    call_ok(ctx, conv, &ChatRequest::Arrival(arrival)).await.map(|_| ())
}
