//! The Mini App: a page served by the Worker (`GET /app`, its script and style, under a strict
//! Content-Security-Policy: nothing inline, nothing from another origin; the page's files,
//! `page/`, are answered by the JavaScript entry before the wasm is called,
//! src/entry/miniapp.mjs, so they stay out of the wasm's size budget) and its API under
//! `/app/api/`, where the person is who Telegram's signed init data says
//! (`agent_core::access::webapp::verify`, sent as `Authorization: tma <initData>`; never a
//! URL, never a request body's field; none at all while no bot token is configured). Failed
//! checks are throttled like the admin token's. An operator's init data opens the operator's
//! view (`ops/`) for `MINIAPP_OPERATOR_MAX_AGE_SECONDS` only, and not once operator sessions
//! were ended (`POST /api/v1/miniapp/end-operator-sessions`).
//! Bodies over `MAX_BODY_BYTES` are refused (413).
//!
//! Invariants (INVARIANTS.md): "The Mini App trusts only signed init data".

mod business;
mod group;
mod person;

use crate::config::auth::{auth_failed, auth_throttled};
use crate::config::{now_ms, Ctx};
use agent_core::access::webapp;
use serde_json::{json, Value};
use worker::{Method, Request, Response, Result};

/// The longest wording a person may give a memory (characters).
pub const MAX_WORDING_CHARS: usize = 500;

/// An item's id in the page (`m7` a memory, `n12` a note), for the person's and the group's views.
fn item_id(id: &str) -> Option<crate::storage::memory::ItemId> {
    use crate::storage::memory::ItemId;
    match (id.chars().next(), id.get(1..).and_then(|n| n.parse::<i64>().ok())) {
        (Some('n'), Some(n)) => Some(ItemId::Note(n)),
        (Some('m'), Some(n)) => Some(ItemId::Memory(n)),
        _ => None,
    }
}

/// The largest request body the Mini App's API reads.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// Only this origin's script, style and API; no inline code, no frames but Telegram's web
/// client, no forms posting elsewhere. The same as src/entry/miniapp.mjs's `CSP` (the page's
/// files), compared by tests/e2e/miniapp.test.js.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
     base-uri 'none'; form-action 'none'; frame-ancestors https://web.telegram.org";

/// Headers every answer of the Mini App carries.
fn secured(mut resp: Response) -> Result<Response> {
    let h = resp.headers_mut();
    h.set("content-security-policy", CSP)?;
    h.set("x-content-type-options", "nosniff")?;
    h.set("referrer-policy", "no-referrer")?;
    Ok(resp)
}

/// A JSON answer that no cache keeps.
pub(crate) fn answer(value: &Value, status: u16) -> Result<Response> {
    let mut resp = Response::from_json(value)?.with_status(status);
    resp.headers_mut().set("cache-control", "no-store")?;
    Ok(resp)
}

pub async fn handle(req: Request, ctx: &Ctx) -> Result<Response> {
    secured(route(req, ctx).await?)
}

async fn route(req: Request, ctx: &Ctx) -> Result<Response> {
    let path = req.path();
    let Some(rest) = path.strip_prefix("/app/api/") else { return answer(&json!({"error": "not found"}), 404) };
    if auth_throttled(&req) {
        return answer(&json!({"error": "too many failed attempts"}), 429);
    }
    let header = req.headers().get("authorization").ok().flatten().unwrap_or_default();
    let raw = header.strip_prefix("tma ").unwrap_or("");
    let init = match webapp::verify(raw, ctx.secrets.bot_token.expose(), now_ms() / 1000, ctx.cfg.miniapp_max_age_secs) {
        Ok(init) => init,
        Err(why) => {
            auth_failed(&req);
            worker::console_warn!("mini app: refused init data ({why})");
            return answer(&json!({"error": "open this page from Telegram again"}), 401);
        }
    };
    let body: Value = match req.method() {
        Method::Put | Method::Post => match crate::outbound::net::request_body_within(req.inner(), MAX_BODY_BYTES).await {
            Ok(Some(bytes)) => std::str::from_utf8(&bytes).ok().and_then(|t| serde_json::from_str(t).ok()).unwrap_or(Value::Null),
            Ok(None) => return answer(&json!({"error": "request too large"}), 413),
            Err(e) => return answer(&json!({"error": e}), 400),
        },
        _ => Value::Null,
    };
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    if let ["ops", admin_path @ ..] = segments.as_slice() {
        // An operator (`ADMIN_USER_IDS`) reaches the admin API's own routes, with init data
        // younger than an operator session's lifetime and signed after the last end of
        // operator sessions.
        if !ctx.cfg.admin_user_ids.contains(&init.user.id) {
            return answer(&json!({"error": "for operators only"}), 403);
        }
        let not_before = crate::storage::miniapp::operators_not_before(&ctx.db()).await?;
        if !webapp::operator_session_live(&init, now_ms() / 1000, ctx.cfg.miniapp_operator_max_age_secs, not_before) {
            return answer(&json!({"error": "the operator session ended: open this page from Telegram again"}), 401);
        }
        return super::dispatch(ctx, req.method(), admin_path, &req.url()?, &body).await;
    }
    person::route(ctx, &init, req.method(), &segments, &body).await
}
