//! The admin API under `/api/v1/` (bearer `ADMIN_TOKEN`, compared in constant time). Without
//! the token: 401 and nothing else; repeated failures from one source: 429; an `ADMIN_TOKEN`
//! shorter than 32 characters: 500 for everything (and a log line naming it). Documented in
//! `docs/openapi.yaml`. API conversations (`POST /chat`) take ids only from their own range
//! (`agent_core::policy::is_api_chat_id`), so they never rewrite a Telegram chat.
//!
//! status, sessions (paged), a session's messages (paged), session reset, costs, memories,
//! pairings, users' access, a chat's model, notify (send as the bot), chat (synchronous: text
//! in, the bot's reply out), and the chat object's state for debugging.

use crate::args;
use crate::chat::{access, deliver};
use crate::storage;
use crate::config::auth::{auth_failed, auth_throttled};
use crate::config::{now_ms, Ctx};
use crate::outbound::objects;
use agent_core::conversation::ConvKey;
use agent_core::policy::{is_api_chat_id, UserAccess, API_CHAT_ID_MAX, API_CHAT_ID_MIN};
use agent_core::scope::Scope;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use worker::{Method, Request, Response, Result, Url};

fn authorized(req: &Request, ctx: &Ctx) -> bool {
    let header = req.headers().get("authorization").ok().flatten().unwrap_or_default();
    let token = header.strip_prefix("Bearer ").unwrap_or("");
    ctx.secrets.admin_token.matches(token)
}

fn bad_request(msg: &str) -> Result<Response> {
    Ok(Response::from_json(&json!({"error": msg}))?.with_status(400))
}

fn not_found() -> Result<Response> {
    Ok(Response::from_json(&json!({"error": "not found"}))?.with_status(404))
}

fn query(url: &Url, name: &str) -> Option<String> {
    url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.to_string())
}

fn limit(url: &Url, default: i64) -> i64 {
    query(url, "limit").and_then(|l| l.parse().ok()).unwrap_or(default).clamp(1, 500)
}

pub async fn handle(mut req: Request, ctx: &Ctx) -> Result<Response> {
    if !agent_core::limits::secret_strong_enough(&ctx.secrets.admin_token) {
        worker::console_error!("ADMIN_TOKEN is missing or shorter than 32 characters; refusing to serve the admin API");
        return Response::error("server misconfigured: ADMIN_TOKEN is too short", 500);
    }
    if auth_throttled(&req) {
        return Response::error("too many failed attempts", 429);
    }
    if !authorized(&req, ctx) {
        auth_failed(&req);
        return Response::error("unauthorized", 401);
    }
    let url = req.url()?;
    let path = url.path().trim_start_matches("/api/v1/").to_string();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let body: Value = if req.method() == Method::Post || req.method() == Method::Put {
        req.json().await.unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    match (req.method(), segments.as_slice()) {
        (Method::Get, ["status"]) => status(ctx).await,
        (Method::Get, ["sessions"]) => sessions(ctx, &url).await,
        (Method::Get, ["sessions", conv, "messages"]) => session_messages(ctx, conv, &url).await,
        (Method::Post, ["sessions", conv, "reset"]) => reset(ctx, conv).await,
        (Method::Get, ["costs"]) => costs(ctx, &url).await,
        (Method::Get, ["memories"]) => memories(ctx, &url).await,
        (Method::Delete, ["memories"]) => forget_user(ctx, &url).await,
        (Method::Delete, ["memories", id]) => forget_one(ctx, id).await,
        (Method::Post, ["notes"]) => add_note(ctx, &body).await,
        (Method::Get, ["pairings"]) => pairings(ctx).await,
        (Method::Post, ["pairings", code, "approve"]) => match access::approve(ctx, code, "admin-api").await? {
            Some(a) => Response::from_json(&json!({"approved": true, "user_id": a.user_id})),
            None => not_found(),
        },
        (Method::Put, ["users", id, "access"]) => {
            let Ok(user_id) = id.parse::<i64>() else { return bad_request("user id must be a number") };
            let value = body.get("access").and_then(Value::as_str);
            let level = value.map(UserAccess::parse);
            if matches!(level, Some(None)) {
                return bad_request("access must be \"allowed\", \"blocked\" or null");
            }
            access::set_access(ctx, user_id, level.flatten(), "admin api").await?;
            Response::from_json(&json!({"user_id": user_id, "access": value}))
        }
        (Method::Put, ["chats", id, "model"]) => {
            let Ok(chat_id) = id.parse::<i64>() else { return bad_request("chat id must be a number") };
            let model = body.get("model").and_then(Value::as_str).map(str::trim).filter(|m| !m.is_empty());
            let n = ctx.db().run("UPDATE chats SET model = ?2 WHERE chat_id = ?1", args![chat_id, model]).await?;
            if n == 0 {
                return not_found();
            }
            Response::from_json(&json!({"chat_id": chat_id, "model": model}))
        }
        (Method::Post, ["notify"]) => notify(ctx, &body).await,
        (Method::Post, ["chat"]) => chat_sync(ctx, &body).await,
        (Method::Get, ["chats", conv, "state"]) => {
            let Some(key) = ConvKey::parse(conv) else { return bad_request("bad conversation key") };
            objects::state(ctx, &key).await
        }
        _ => not_found(),
    }
}

#[derive(Deserialize, Serialize)]
struct Counts {
    chats: i64,
    messages: i64,
    turns: i64,
    memories: i64,
    notes: i64,
    dead_letters: i64,
    pending_pairings: i64,
}

#[derive(Deserialize, Serialize)]
struct FailureRow {
    kind: String,
    job_key: Option<String>,
    conv: Option<String>,
    detail: String,
    created_at: i64,
}

async fn status(ctx: &Ctx) -> Result<Response> {
    let db = ctx.db();
    let results = db
        .batch(vec![
            db.stmt(
                "SELECT (SELECT COUNT(*) FROM chats) AS chats, (SELECT COUNT(*) FROM messages) AS messages,
                   (SELECT COUNT(*) FROM turns) AS turns, (SELECT COUNT(*) FROM memories) AS memories,
                   (SELECT COUNT(*) FROM notes) AS notes,
                   (SELECT COUNT(*) FROM failures WHERE kind = 'dead_letter') AS dead_letters,
                   (SELECT COUNT(*) FROM pairings WHERE approved_at IS NULL AND expires_at > ?1) AS pending_pairings",
                args![now_ms()],
            )?,
            db.stmt("SELECT kind, job_key, conv, detail, created_at FROM failures ORDER BY id DESC LIMIT 20", args![])?,
        ])
        .await?;
    let counts: Option<Counts> = crate::storage::rows(&results[0])?.into_iter().next();
    let failures: Vec<FailureRow> = crate::storage::rows(&results[1])?;
    Response::from_json(&json!({
        "version": env!("CARGO_PKG_VERSION"),
        "model": ctx.cfg.gemini_model,
        "history_format": ctx.cfg.history_format.as_str(),
        "dm_policy": ctx.cfg.dm_policy.as_str(),
        "counts": counts,
        "recent_failures": failures,
    }))
}

#[derive(Deserialize, Serialize)]
struct SessionRow {
    conv: String,
    chat_id: i64,
    title: Option<String>,
    kind: Option<String>,
    messages: i64,
    last_message_at: Option<i64>,
    session_start_seq: Option<i64>,
}

async fn sessions(ctx: &Ctx, url: &Url) -> Result<Response> {
    let limit = limit(url, 50);
    // Cursor: the last conv of the previous page (pages go by conversation key).
    let after = query(url, "cursor").unwrap_or_default();
    let rows: Vec<SessionRow> = ctx
        .db()
        .all(
            "SELECT m.conv AS conv, m.chat_id AS chat_id, c.title AS title, c.kind AS kind, COUNT(*) AS messages,
               MAX(m.date) AS last_message_at, v.session_start_seq AS session_start_seq
             FROM messages m LEFT JOIN chats c ON c.chat_id = m.chat_id LEFT JOIN conversations v ON v.conv = m.conv
             WHERE m.conv > ?1 GROUP BY m.conv ORDER BY m.conv LIMIT ?2",
            args![after, limit],
        )
        .await?;
    let next = (rows.len() as i64 == limit).then(|| rows.last().map(|r| r.conv.clone())).flatten();
    Response::from_json(&json!({"sessions": rows, "next_cursor": next}))
}

#[derive(Deserialize, Serialize)]
struct MessageLine {
    seq: i64,
    message_id: Option<i64>,
    role: String,
    user_id: Option<i64>,
    name: String,
    text: String,
    date: i64,
    turn_id: Option<String>,
}

async fn session_messages(ctx: &Ctx, conv: &str, url: &Url) -> Result<Response> {
    let limit = limit(url, 100);
    let before = query(url, "before").and_then(|b| b.parse::<i64>().ok()).unwrap_or(i64::MAX);
    let mut rows: Vec<MessageLine> = ctx
        .db()
        .all(
            "SELECT seq, message_id, role, user_id, name, text, date, turn_id FROM messages
             WHERE conv = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3",
            args![conv, before, limit],
        )
        .await?;
    let next = (rows.len() as i64 == limit).then(|| rows.last().map(|r| r.seq)).flatten();
    rows.reverse();
    Response::from_json(&json!({"conv": conv, "messages": rows, "next_before": next}))
}

async fn reset(ctx: &Ctx, conv: &str) -> Result<Response> {
    let Some(key) = ConvKey::parse(conv) else { return bad_request("bad conversation key") };
    // The new session starts after the newest message on record.
    storage::conversations::start_new_session(&ctx.db(), &key, storage::conversations::NewSession::AfterNewest, now_ms()).await?;
    Response::from_json(&json!({"conv": conv, "reset": true}))
}

async fn costs(ctx: &Ctx, url: &Url) -> Result<Response> {
    let period = query(url, "period").unwrap_or_else(|| "all".into());
    let now = now_ms();
    let since = match period.as_str() {
        "today" => now - now.rem_euclid(86_400_000),
        "week" => now - 7 * 86_400_000,
        "all" => 0,
        _ => return bad_request("period must be today, week or all"),
    };
    let rows = storage::usage::totals(&ctx.db(), None, since, true).await?;
    let chat = query(url, "chat_id").and_then(|c| c.parse::<i64>().ok());
    let user = query(url, "user_id").and_then(|c| c.parse::<i64>().ok());
    let used = access::budget_usage(ctx, chat.unwrap_or(0), user).await?;
    let b = ctx.cfg.budgets;
    let budgets = json!({
        "user_turns_per_hour": b.user_turns_per_hour,
        "chat_tokens_per_day": b.chat_tokens_per_day,
        "global_tokens_per_day": b.global_tokens_per_day,
        "global_tokens_today": used.global_tokens_today,
        "chat_tokens_today": chat.map(|_| used.chat_tokens_today),
        "user_turns_last_hour": user.map(|_| used.user_turns_last_hour),
    });
    let mut total = 0.0;
    let items: Vec<Value> = rows
        .iter()
        .map(|r| {
            let cost = agent_core::usage::cost(&ctx.cfg, &r.usage);
            total += cost.unwrap_or(0.0);
            json!({
                "chat_id": r.chat_id,
                "day": r.day,
                "model": r.usage.model,
                "calls": r.usage.calls,
                "prompt_tokens": r.usage.prompt_tokens,
                "output_tokens": r.usage.candidates_tokens,
                "thinking_tokens": r.usage.thoughts_tokens,
                "cached_tokens": r.usage.cached_tokens,
                "cost_usd": cost,
            })
        })
        .collect();
    Response::from_json(&json!({"period": period, "since": since, "rows": items, "total_cost_usd": total, "budgets": budgets}))
}

#[derive(Deserialize, Serialize)]
struct MemoryLine {
    id: String,
    kind: String,
    chat_id: Option<i64>,
    about_user_id: Option<i64>,
    text: String,
    updated_at: i64,
}

/// Everything remembered, narrowed by `user_id` and/or `chat_id` (`Scope::Operator`).
async fn memories(ctx: &Ctx, url: &Url) -> Result<Response> {
    let user = query(url, "user_id").and_then(|u| u.parse::<i64>().ok());
    let chat = query(url, "chat_id").and_then(|u| u.parse::<i64>().ok());
    let scope = Scope::Operator { chat_id: chat, about_user_id: user };
    let on_n = scope.notes("", 1);
    let on_m = scope.memories("", 1 + on_n.binds.len());
    let mut binds = crate::storage::scope_args(&on_n);
    binds.extend(crate::storage::scope_args(&on_m));
    let rows: Vec<MemoryLine> = ctx
        .db()
        .all(
            &format!(
                "SELECT 'n' || id AS id, 'note:' || source AS kind, chat_id, about_user_id, content AS text, created_at AS updated_at
                   FROM notes WHERE {}
                 UNION ALL
                 SELECT 'm' || id AS id, kind, chat_id, about_user_id,
                   trim(coalesce(attribute || ': ', '') || value) AS text, updated_at
                   FROM memories WHERE superseded_by IS NULL AND {}
                 ORDER BY updated_at DESC LIMIT 500",
                on_n.sql, on_m.sql
            ),
            binds,
        )
        .await?;
    Response::from_json(&json!({"memories": rows}))
}

async fn forget_user(ctx: &Ctx, url: &Url) -> Result<Response> {
    let Some(user) = query(url, "user_id").and_then(|u| u.parse::<i64>().ok()) else {
        return bad_request("user_id is required");
    };
    let db = ctx.db();
    let scope = Scope::Operator { chat_id: None, about_user_id: Some(user) };
    let (on_n, on_m) = (scope.notes("", 1), scope.memories("", 1));
    let results = db
        .batch(vec![
            db.stmt(&format!("DELETE FROM notes WHERE {} RETURNING id", on_n.sql), crate::storage::scope_args(&on_n))?,
            db.stmt(&format!("DELETE FROM memories WHERE {} RETURNING id", on_m.sql), crate::storage::scope_args(&on_m))?,
        ])
        .await?;
    // Counted from RETURNING: D1's change counts include the search index's trigger writes.
    let mut n = 0;
    for r in &results {
        n += crate::storage::rows::<Value>(r)?.len();
    }
    Response::from_json(&json!({"user_id": user, "deleted": n}))
}

async fn forget_one(ctx: &Ctx, id: &str) -> Result<Response> {
    let (table, n) = match (id.chars().next(), id.get(1..).and_then(|n| n.parse::<i64>().ok())) {
        (Some('n'), Some(n)) => ("notes", n),
        (Some('m'), Some(n)) => ("memories", n),
        _ => return bad_request("memory ids look like n12 (notes) or m7 (memories)"),
    };
    let deleted: Vec<Value> = ctx.db().all(&format!("DELETE FROM {table} WHERE id = ?1 RETURNING id"), args![n]).await?;
    if deleted.is_empty() {
        return not_found();
    }
    Response::from_json(&json!({"deleted": id}))
}

async fn add_note(ctx: &Ctx, body: &Value) -> Result<Response> {
    let Some(content) = body.get("content").and_then(Value::as_str).map(str::trim).filter(|c| !c.is_empty()) else {
        return bad_request("content is required");
    };
    let chat_id = body.get("chat_id").and_then(Value::as_i64);
    let about = body.get("about_user_id").and_then(Value::as_i64);
    let id: Option<Value> = ctx
        .db()
        .first(
            "INSERT INTO notes (chat_id, about_user_id, content, source, created_at) VALUES (?1, ?2, ?3, 'operator', ?4) RETURNING id",
            args![chat_id, about, content, now_ms()],
        )
        .await?;
    Response::from_json(&json!({"note": id}))
}

#[derive(Deserialize, Serialize)]
struct PairingRow {
    code: String,
    user_id: i64,
    name: Option<String>,
    created_at: i64,
    expires_at: i64,
}

async fn pairings(ctx: &Ctx) -> Result<Response> {
    let rows: Vec<PairingRow> = ctx
        .db()
        .all(
            "SELECT code, user_id, name, created_at, expires_at FROM pairings
             WHERE approved_at IS NULL AND expires_at > ?1 ORDER BY created_at DESC LIMIT 100",
            args![now_ms()],
        )
        .await?;
    Response::from_json(&json!({"pairings": rows}))
}

async fn notify(ctx: &Ctx, body: &Value) -> Result<Response> {
    let (Some(chat_id), Some(text)) = (body.get("chat_id").and_then(Value::as_i64), body.get("text").and_then(Value::as_str)) else {
        return bad_request("chat_id and text are required");
    };
    if text.trim().is_empty() {
        return bad_request("text is empty");
    }
    let conv = ConvKey { chat_id, thread_id: body.get("thread_id").and_then(Value::as_i64) };
    // A caller-chosen key makes retries of the same notification idempotent.
    let key = match body.get("idempotency_key").and_then(Value::as_str) {
        Some(k) => format!("notify:{k}"),
        None => format!("notify:{}:{}", now_ms(), hex(&crate::config::random_bytes::<6>())),
    };
    match deliver::send_text(ctx, &conv, &key, text, None, None).await {
        Ok(ids) => Response::from_json(&json!({"sent": true, "message_ids": ids})),
        Err(e) => Ok(Response::from_json(&json!({"sent": false, "error": e.message()}))?.with_status(502)),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `POST /api/v1/chat`: text in, the bot's reply out, synchronously. The conversation is an
/// API conversation: `chat_id` must lie in the API range (2^52 to 2^53 - 1), above every
/// Telegram chat id, else 400; nothing is sent to Telegram, the reply is returned and stored
/// as the bot's message.
async fn chat_sync(ctx: &Ctx, body: &Value) -> Result<Response> {
    let (Some(chat_id), Some(text)) = (body.get("chat_id").and_then(Value::as_i64), body.get("text").and_then(Value::as_str)) else {
        return bad_request("chat_id and text are required");
    };
    if !is_api_chat_id(chat_id) {
        return bad_request(&format!(
            "chat_id must be an API conversation id, from {API_CHAT_ID_MIN} to {API_CHAT_ID_MAX} (Telegram chat ids are refused)"
        ));
    }
    if text.trim().is_empty() {
        return bad_request("text is empty");
    }
    let name = body.get("name").and_then(Value::as_str).unwrap_or("api").to_string();
    let resp = objects::call(ctx, &ConvKey::chat(chat_id), "/chat", &json!({"text": text, "name": name})).await?;
    let status = resp.status_code();
    let mut resp = resp;
    let value: Value = resp.json().await.unwrap_or(Value::Null);
    Ok(Response::from_json(&value)?.with_status(status))
}
