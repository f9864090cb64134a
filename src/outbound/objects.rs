//! The chat Durable Object client: one object per conversation, named by its key, called with
//! a JSON body on one of its routes (`/inbox`, `/job`, `/dead`, `/chat`, `/schedules`,
//! `/state`).
//!
//! Invariant: the conversation key travels as the object's name and in the `conv` query
//! parameter (so an object learns its own key on its first call); nothing else in the URL.

use crate::config::env::CHATS;
use crate::config::Ctx;
use agent_core::conversation::ConvKey;
use serde::Serialize;
use worker::js_sys::{Promise, Reflect, Uint8Array};
use worker::wasm_bindgen::{self, prelude::wasm_bindgen, JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{web_sys, Response, Result};

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

/// Posts a JSON body to a chat object's route; the answer as the runtime gives it.
///
/// Through the runtime's own objects, not `worker::Stub` and `worker::Request`: those check the
/// binding's type by its constructor's name, make a `Request`, read its URL, method and headers
/// back into Rust, and read the answer's headers, `cf` and WebSocket up front. Every webhook
/// that asks for a reply and every queued job makes this call.
async fn post(ctx: &Ctx, conv: &ConvKey, route: &str, body: &impl Serialize) -> Result<web_sys::Response> {
    ctx.meter.add(1);
    let conv = conv.to_string();
    let namespace: Namespace = Reflect::get(&ctx.env, &JsValue::from_str(CHATS))?.unchecked_into();
    let stub = namespace.get(&namespace.id_from_name(&conv)?)?;
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    init.set_body(&Uint8Array::from(serde_json::to_vec(body)?.as_slice()));
    let answer = JsFuture::from(stub.fetch(&format!("https://chat{route}?conv={conv}"), &init)?).await?;
    Ok(answer.dyn_into()?)
}

/// Calls a chat object's route with a JSON body.
pub async fn call<T: Serialize>(ctx: &Ctx, conv: &ConvKey, route: &str, body: &T) -> Result<Response> {
    post(ctx, conv, route, body).await.map(Response::from)
}

/// Calls a route and fails unless the object answered 200 (its body is not read).
pub async fn call_ok<T: Serialize>(ctx: &Ctx, conv: &ConvKey, route: &str, body: &T) -> Result<web_sys::Response> {
    let resp = post(ctx, conv, route, body).await?;
    if resp.status() != 200 {
        return Err(worker::Error::RustError(format!("chat object answered {}", resp.status())));
    }
    Ok(resp)
}

/// Tells an object something that needs no answer (re-read its schedules): the call must be
/// answered 200, and its body is read to the end (an unread body keeps the caller's
/// invocation open: a cron run would never finish).
pub async fn notify<T: Serialize>(ctx: &Ctx, conv: &ConvKey, route: &str, body: &T) -> Result<()> {
    let resp = call_ok(ctx, conv, route, body).await?;
    JsFuture::from(resp.array_buffer()?).await.map(|_| ())?;
    Ok(())
}

/// The object's state, for the admin API (`GET /state`).
pub async fn state(ctx: &Ctx, conv: &ConvKey) -> Result<Response> {
    ctx.meter.add(1);
    let conv = conv.to_string();
    let stub = ctx.env.durable_object(CHATS)?.id_from_name(&conv)?.get_stub()?;
    stub.fetch_with_str(&format!("https://chat/state?conv={conv}")).await
}
