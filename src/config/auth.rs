//! Who may call in: the webhook secret and the admin token are compared in constant time
//! (`agent_core::secret`), and sources that fail too often are throttled.
//!
//! Invariants (INVARIANTS.md): "Secrets are secrets" (failed authentications are throttled
//! per source). The throttle lives in the isolate's memory (a thread-local
//! `limits::AuthThrottle`): checking it costs nothing on the good path, and failures cost the
//! owner no D1 writes or Durable Object calls (which an attacker could otherwise run up). The
//! source is `CF-Connecting-IP`, which Cloudflare sets and clients cannot forge; without it
//! (local development) all requests share one source.

use super::now_ms;
use agent_core::limits::{secret_strong_enough, AuthThrottle};
use agent_core::secret::Secret;
use std::cell::RefCell;

thread_local! {
    static AUTH_THROTTLE: RefCell<AuthThrottle> = RefCell::new(AuthThrottle::default());
}

fn auth_source(req: &worker::Request) -> String {
    req.headers().get("CF-Connecting-IP").ok().flatten().unwrap_or_else(|| "local".to_string())
}

/// Whether the request's source failed to authenticate too often lately (answer 429).
pub fn auth_throttled(req: &worker::Request) -> bool {
    let source = auth_source(req);
    AUTH_THROTTLE.with(|t| t.borrow().throttled(&source, now_ms()))
}

/// Counts a failed authentication (a wrong webhook secret or admin token) of the request's source.
pub fn auth_failed(req: &worker::Request) {
    let source = auth_source(req);
    AUTH_THROTTLE.with(|t| t.borrow_mut().failed(&source, now_ms()));
}

/// Checks the secret a caller presented for `what` (e.g. "the webhook") against `secret`
/// (named `name` in logs and answers, never shown). `Some(response)` when the caller is
/// refused: 500 when the configured secret is missing or too weak (the endpoint serves
/// nothing), 429 for a source that failed too often (its secret is not even looked at), 401
/// for a wrong secret (counted against the source).
pub fn refuse(req: &worker::Request, secret: &Secret, name: &str, what: &str, presented: &str) -> worker::Result<Option<worker::Response>> {
    if !secret_strong_enough(secret) {
        worker::console_error!("{name} is missing or shorter than 32 characters; refusing to serve {what}");
        return worker::Response::error(format!("server misconfigured: {name} is too short"), 500).map(Some);
    }
    if auth_throttled(req) {
        return worker::Response::error("too many failed attempts", 429).map(Some);
    }
    if !secret.matches(presented) {
        auth_failed(req);
        return worker::Response::error("unauthorized", 401).map(Some);
    }
    Ok(None)
}
