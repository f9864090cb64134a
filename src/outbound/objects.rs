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
use worker::{Method, Request, RequestInit, Response, Result};

/// Calls a chat object's route with a JSON body.
pub async fn call<T: Serialize>(ctx: &Ctx, conv: &ConvKey, route: &str, body: &T) -> Result<Response> {
    ctx.meter.add(1);
    let conv = conv.to_string();
    let stub = ctx.env.durable_object(CHATS)?.id_from_name(&conv)?.get_stub()?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_body(Some(serde_json::to_string(body)?.into()));
    let req = Request::new_with_init(&format!("https://chat{route}?conv={conv}"), &init)?;
    stub.fetch_with_request(req).await
}

/// Calls a route and fails unless the object answered 200.
pub async fn call_ok<T: Serialize>(ctx: &Ctx, conv: &ConvKey, route: &str, body: &T) -> Result<Response> {
    let resp = call(ctx, conv, route, body).await?;
    if resp.status_code() != 200 {
        return Err(worker::Error::RustError(format!("chat object answered {}", resp.status_code())));
    }
    Ok(resp)
}

/// Tells an object something that needs no answer (re-read its schedules): the call must be
/// answered 200, and its body is read to the end (an unread body keeps the caller's
/// invocation open: a cron run would never finish).
pub async fn notify<T: Serialize>(ctx: &Ctx, conv: &ConvKey, route: &str, body: &T) -> Result<()> {
    let mut resp = call_ok(ctx, conv, route, body).await?;
    resp.text().await.map(|_| ())
}

/// The object's state, for the admin API (`GET /state`).
pub async fn state(ctx: &Ctx, conv: &ConvKey) -> Result<Response> {
    ctx.meter.add(1);
    let conv = conv.to_string();
    let stub = ctx.env.durable_object(CHATS)?.id_from_name(&conv)?.get_stub()?;
    stub.fetch_with_str(&format!("https://chat/state?conv={conv}")).await
}
