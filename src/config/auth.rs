//! Who may call in: the webhook secret and the admin token are compared in constant time
//! (`agent_core::secret`), and sources that fail too often are throttled.
//!
//! Invariant: the throttle lives in the isolate's memory (a thread-local
//! `limits::AuthThrottle`): checking it costs nothing on the good path, and failures cost the
//! owner no D1 writes or Durable Object calls (which an attacker could otherwise run up). The
//! source is `CF-Connecting-IP`, which Cloudflare sets and clients cannot forge; without it
//! (local development) all requests share one source.

use super::now_ms;
use agent_core::limits::AuthThrottle;
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
