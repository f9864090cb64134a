//! The admin API under `/api/v1/` (bearer `ADMIN_TOKEN`, compared in constant time). Without
//! the token: 401 and nothing else.

use crate::chat;
use crate::env::Ctx;
use worker::{Method, Request, Response, Result};

fn authorized(req: &Request, ctx: &Ctx) -> bool {
    let header = req.headers().get("authorization").ok().flatten().unwrap_or_default();
    let token = header.strip_prefix("Bearer ").unwrap_or("");
    ctx.secrets.admin_token.matches(token)
}

pub async fn handle(req: Request, ctx: &Ctx) -> Result<Response> {
    if !authorized(&req, ctx) {
        return Response::error("unauthorized", 401);
    }
    let path = req.path();
    let segments: Vec<&str> = path.trim_start_matches("/api/v1/").split('/').filter(|s| !s.is_empty()).collect();
    match (req.method(), segments.as_slice()) {
        (Method::Get, ["chats", conv, "state"]) => {
            let stub = ctx.env.durable_object(crate::env::CHATS)?.id_from_name(conv)?.get_stub()?;
            let _ = chat::APOLOGY;
            stub.fetch_with_str(&format!("https://chat/state?conv={conv}")).await
        }
        _ => Response::error("not found", 404),
    }
}
