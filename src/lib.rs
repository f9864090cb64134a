//! # edge-agent: the worker (the edge)
//!
//! A Telegram AI agent as a Cloudflare Worker. This crate is the thin edge: `#[event]`
//! handlers, the chat Durable Object, D1 queries, and the HTTP clients for Telegram and
//! Gemini. All decisions live in the pure `agent_core` crate.
//!
//! Module map (ARCHITECTURE.md has the invariants):
//! - [`webhook`]: `POST /telegram/webhook`, the only hot path.
//! - [`chat`]: the chat Durable Object (debounce, single-flight turns, plans).
//! - [`agent`]: one turn (context → prompt → Gemini → stored result).
//! - [`deliver`]: plan steps through the Bot API, exactly once.
//! - [`queue`]: retry jobs and dead letters. [`consolidate`]: memory jobs. [`retention`]:
//!   the cron's pruning of tables that only grow.
//! - [`access`], [`commands`], [`memory`], [`usage`]: policy, commands, recall, costs.
//! - [`store`], [`db`]: named D1 queries. [`telegram`], [`gemini`], [`net`]: outbound HTTP.
//! - [`env`], [`prompts`]: bindings, secrets, config, bundled prompts.

use worker::{event, Context, Env, MessageBatch, Method, Request, Response, Result, ScheduleContext, ScheduledEvent};

pub mod access;
pub mod admin;
pub mod agent;
pub mod chat;
pub mod commands;
pub mod consolidate;
pub mod db;
pub mod deliver;
pub mod env;
pub mod gemini;
pub mod memory;
pub mod net;
pub mod prompts;
pub mod queue;
pub mod retention;
pub mod store;
pub mod telegram;
pub mod usage;
pub mod webhook;

pub use chat::ChatObject;
use env::Ctx;

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
    let result = match (req.method(), path.as_str()) {
        (Method::Post, "/telegram/webhook") => webhook::handle(req, &ctx).await,
        (Method::Get, "/health") | (Method::Get, "/") => Response::from_json(&serde_json::json!({
            "ok": true,
            "name": "edge-agent",
            "version": env!("CARGO_PKG_VERSION"),
        })),
        // The command menu, for `npm run webhook:set` (public: it is what Telegram shows anyway).
        (Method::Get, "/telegram/commands") => Response::from_json(&agent_core::commands::menu()),
        _ if path.starts_with("/api/v1/") => admin::handle(req, &ctx).await,
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
    if let Err(e) = queue::consume(batch, &ctx).await {
        worker::console_error!("queue batch failed: {e}");
    }
    Ok(())
}

#[event(scheduled)]
async fn scheduled(event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    let ctx = Ctx::new(env);
    match consolidate::enqueue_due(&ctx).await {
        Ok(n) => worker::console_log!("cron {}: queued {n} consolidation jobs", event.cron()),
        Err(e) => worker::console_error!("cron {}: could not queue consolidation: {e}", event.cron()),
    }
    match retention::prune(&ctx).await {
        Ok(pruned) if pruned.iter().any(|(_, n)| *n > 0) => worker::console_log!("cron {}: pruned {pruned:?}", event.cron()),
        Ok(_) => {}
        Err(e) => worker::console_error!("cron {}: could not prune old rows: {e}", event.cron()),
    }
}
