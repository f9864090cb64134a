//! # edge-agent: the worker (the edge)
//!
//! A Telegram AI agent as a Cloudflare Worker. This crate is the thin edge: `#[event]`
//! handlers, the chat Durable Object, D1 queries, and the HTTP clients for Telegram and
//! Gemini. All decisions live in the pure `agent_core` crate.
//!
//! The rooms follow the flow of an update, and imports point one way, down this list
//! (`scripts/check-modules.mjs` fails otherwise; INVARIANTS.md, "Layers"):
//! - [`ingress`] (the webhook), [`api`] (the admin API), [`background`] (queue consumer, cron,
//!   consolidation, retention): the entry points, called from the handlers below.
//! - [`chat`]: the chat Durable Object (its state, routes, alarm, plans, jobs, schedules,
//!   the crew cycle).
//! - [`bot`]: what the bot can do in a conversation (a turn, delivery, streaming, memory,
//!   access, commands, usage, crew lineup and gating), used by the object; never imports it.
//! - [`storage`] (D1: every SQL statement) and [`outbound`] (Telegram, Gemini, the chat
//!   objects, the queues).
//! - [`config`]: bindings, secrets, configuration, bundled prompts, the per-invocation context.

use worker::{event, Context, Env, MessageBatch, Method, Request, Response, Result, ScheduleContext, ScheduledEvent};

pub mod api;
pub mod background;
pub mod bot;
pub mod chat;
pub mod config;
pub mod ingress;
pub mod outbound;
pub mod storage;

pub use chat::ChatObject;
use config::Ctx;

/// Chains console_error_panic_hook after the panic hook worker installs (which logs and
/// re-initialises the instance); replacing it would lose that recovery.
#[event(start)]
fn start() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        console_error_panic_hook::hook(info);
        previous(info);
    }));
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let ctx = Ctx::new(env);
    let path = req.path();
    let _metrics = ctx.metrics(|| format!("fetch {path}"));
    let result = match (req.method(), path.as_str()) {
        (Method::Post, "/telegram/webhook") => ingress::webhook::handle(req, &ctx).await,
        (Method::Get, "/health") | (Method::Get, "/") => Response::from_json(&serde_json::json!({
            "ok": true,
            "name": "edge-agent",
            "version": env!("CARGO_PKG_VERSION"),
        })),
        // The command menu, for `npm run webhook:set` (public: it is what Telegram shows anyway).
        (Method::Get, "/telegram/commands") => Response::from_json(&agent_core::telegram::commands::menu()),
        _ if path.starts_with("/api/v1/") => api::handle(req, &ctx).await,
        // The Mini App: its page and its API (identity from Telegram's signed init data).
        _ if path == "/app" || path.starts_with("/app/") => api::miniapp::handle(req, &ctx).await,
        _ => Response::error("not found", 404),
    };
    result.or_else(|e| {
        worker::console_error!("{} {path} failed: {e}", "request");
        Response::error("internal error", 500)
    })
}

#[event(queue)]
async fn queue(batch: MessageBatch<serde_json::Value>, env: Env, _ctx: Context) -> Result<()> {
    let ctx = Ctx::new(env);
    let _metrics = ctx.metrics(|| format!("queue {}", batch.queue()));
    if let Err(e) = background::queue::consume(batch, &ctx).await {
        worker::console_error!("queue batch failed: {e}");
    }
    Ok(())
}

#[event(scheduled)]
async fn scheduled(event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    let ctx = Ctx::new(env);
    let _metrics = ctx.metrics(|| format!("cron {}", event.cron()));
    background::cron::run(&ctx, &event.cron()).await;
}
