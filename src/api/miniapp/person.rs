//! What every person may do in the Mini App, about themself only: the person is the signed
//! init data's user, and every query runs in their own private chat's scope, exactly as the
//! commands there do (`/memory`, `/forget`, `/reminders`, `/cancel`, `/usage`, `/business`),
//! through the same functions. Another person's memory or reminder id finds nothing (404).

use crate::config::tz::Intl;
use super::{answer, item_id, MAX_WORDING_CHARS};
use crate::bot::{memory, usage};
use crate::config::{now_ms, Ctx};
use crate::outbound::objects::{self, ChatRequest};
use crate::storage::memory as memory_rows;
use crate::storage::{access, miniapp as rows, schedules};
use agent_core::access::policy::{self, Access, UserAccess};
use agent_core::access::webapp::InitData;
use agent_core::chat::schedule;
use agent_core::conversation::{ChatKind, ConvKey};
use agent_core::memory::scope::Scope;
use agent_core::telegram::commands::ForgetTarget;
use serde_json::{json, Value};
use worker::{Method, Response, Result};

fn not_found() -> Result<Response> {
    answer(&json!({"error": "not found"}), 404)
}

fn bad(msg: &str) -> Result<Response> {
    answer(&json!({"error": msg}), 400)
}


pub async fn route(ctx: &Ctx, init: &InitData, method: Method, segments: &[&str], body: &Value) -> Result<Response> {
    let user = init.user.id;
    // The access policy of the person's private chat, as for a command there.
    let (level, _) = access::run_state(&ctx.db(), user, Some(user), now_ms()).await?;
    if policy::decide(&ctx.cfg, ChatKind::Private, user, Some(user), level.as_deref().and_then(UserAccess::parse)) != Access::Allow {
        return answer(&json!({"error": "you may not use this bot yet"}), 403);
    }
    if let ["group", rest @ ..] = segments {
        return super::group::route(ctx, init, method, rest, body).await;
    }
    match (method, segments) {
        (Method::Get, ["me"]) => me(ctx, init).await,
        (Method::Put, ["memories", id]) => reword(ctx, user, id, body).await,
        (Method::Delete, ["memories", id]) => forget_one(ctx, user, id).await,
        (Method::Delete, ["memories"]) => forget_all(ctx, user).await,
        (Method::Get, ["export"]) => export(ctx, user).await,
        (Method::Delete, ["reminders", id]) => cancel(ctx, user, id).await,
        (Method::Put, ["reminders", id]) => change(ctx, user, id, body).await,
        (Method::Put, ["business"]) => super::business::change(ctx, init, body).await,
        _ => not_found(),
    }
}

/// What `/memory` in the person's private chat lists (`Scope::Own`).
fn own(user: i64) -> Scope {
    Scope::Own { chat_id: user, user_id: Some(user) }
}

/// Everything the page shows: the person, their memories, reminders and usage.
async fn me(ctx: &Ctx, init: &InitData) -> Result<Response> {
    let user = init.user.id;
    let db = ctx.db();
    let items = rows::items(&db, &own(user)).await?;
    let conv = ConvKey::chat(user);
    let listed = schedules::list_active(&db, &conv).await?;
    let reminders: Vec<Value> = listed
        .iter()
        .map(|s| {
            let tz = schedule::Zone::or_utc(&Intl, &s.timezone);
            json!({
                "id": s.id,
                "text": s.text,
                "timezone": s.timezone,
                "repeat": s.repeat.as_deref().map(schedule::repeat_label),
                "next_run_ms": s.next_run_ms,
                "next_run_local": s.next_run_ms.map(|ms| schedule::local_text(ms, &tz)),
            })
        })
        .collect();
    let usage_text = usage::chat_usage_text(ctx, user, Some(user)).await?;
    let operator = ctx.cfg.admin_user_ids.contains(&user);
    answer(
        &json!({
            "user": {"id": user, "first_name": init.user.first_name},
            "operator": operator,
            "memories": items,
            "reminders": reminders,
            "usage": usage_text,
            "business": super::business::state(ctx, user).await?,
        }),
        200,
    )
}

async fn reword(ctx: &Ctx, user: i64, id: &str, body: &Value) -> Result<Response> {
    let Some(item) = item_id(id) else { return bad("memory ids look like m7 or n12") };
    let text = body.get("text").and_then(Value::as_str).map(str::trim).unwrap_or("");
    if text.is_empty() || text.chars().count() > MAX_WORDING_CHARS {
        return bad("the wording is 1 to 500 characters");
    }
    // Only what was learnt in the person's private chat: a fact a group learnt from their words
    // is the group's copy too, and its admins could not see a change (forget it instead).
    let db = ctx.db();
    match rows::items(&db, &own(user)).await?.iter().find(|i| i.id == id) {
        None => return not_found(),
        Some(found) if found.chat_id != Some(user) => {
            return answer(&json!({"error": "learnt in a group: it can be forgotten here, not reworded"}), 409);
        }
        Some(_) => {}
    }
    if !rows::reword(&db, item, &own(user), text, now_ms()).await? {
        return not_found();
    }
    answer(&json!({"id": id, "text": text}), 200)
}

async fn forget_one(ctx: &Ctx, user: i64, id: &str) -> Result<Response> {
    let Some(item) = item_id(id) else { return bad("memory ids look like m7 or n12") };
    // `/forget <id>` in the private chat: only what `/memory` there lists.
    if !memory_rows::erase_one(&ctx.db(), item, Some(&own(user))).await? {
        return not_found();
    }
    answer(&json!({"deleted": id}), 200)
}

async fn forget_all(ctx: &Ctx, user: i64) -> Result<Response> {
    // `/forget all` in the private chat, the same function.
    let text = memory::forget_for_user(ctx, &ConvKey::chat(user), ChatKind::Private, Some(user), &ForgetTarget::All).await?;
    answer(&json!({"done": text}), 200)
}

async fn export(ctx: &Ctx, user: i64) -> Result<Response> {
    let mut data = rows::export(&ctx.db(), user).await?;
    data["user_id"] = json!(user);
    data["exported_at_ms"] = json!(now_ms());
    let mut resp = answer(&data, 200)?;
    resp.headers_mut().set("content-disposition", "attachment; filename=\"my-data.json\"")?;
    Ok(resp)
}

/// Tells the private chat's object to re-read its next run (as the admin API does).
async fn reread(ctx: &Ctx, user: i64) {
    if let Err(e) = objects::notify(ctx, &ConvKey::chat(user), &ChatRequest::Schedules).await {
        worker::console_warn!("mini app: a reminder changed; the chat object was not told ({e})");
    }
}

async fn cancel(ctx: &Ctx, user: i64, id: &str) -> Result<Response> {
    let Ok(id) = id.parse::<i64>() else { return bad("the reminder id is a number") };
    // `/cancel <id>` in the private chat (anyone's there is the person's own).
    if !schedules::cancel(&ctx.db(), &ConvKey::chat(user), id, None, now_ms()).await? {
        return not_found();
    }
    reread(ctx, user).await;
    answer(&json!({"id": id, "status": "cancelled"}), 200)
}

/// A new time (`at`, local in the reminder's zone) and repeat rule, by `schedule::change`
/// (the same rules as `schedule_message`).
async fn change(ctx: &Ctx, user: i64, id: &str, body: &Value) -> Result<Response> {
    let Ok(id) = id.parse::<i64>() else { return bad("the reminder id is a number") };
    let conv = ConvKey::chat(user);
    let db = ctx.db();
    let Some(found) = schedules::list_active(&db, &conv).await?.into_iter().find(|s| s.id == id) else { return not_found() };
    let at = body.get("at").and_then(Value::as_str).unwrap_or("");
    // No `repeat`: the current rule stays (`daily` and the like anchored at the new time);
    // `""`, `none` or `once`: it runs once.
    let repeat = match body.get("repeat").and_then(Value::as_str).map(str::trim) {
        None => found.repeat.as_deref().map(|c| schedule::rule_word(c).unwrap_or(c)),
        Some("" | "none" | "once") => None,
        Some(rule) => Some(rule),
    };
    let now = chrono::DateTime::from_timestamp_millis(now_ms()).unwrap_or_default();
    let planned = match schedule::change(&Intl, &found.text, &found.timezone, at, repeat, now, &ctx.cfg.schedule_limits) {
        Ok(p) => p,
        Err(e) => return bad(&e.to_string()),
    };
    if !rows::reschedule(&db, &conv.to_string(), id, planned.repeat.as_deref(), planned.first_run_ms, now_ms()).await? {
        return not_found();
    }
    reread(ctx, user).await;
    let tz = schedule::Zone::or_utc(&Intl, &planned.timezone);
    answer(&json!({"id": id, "next_run_local": schedule::local_text(planned.first_run_ms, &tz), "repeat": planned.repeat}), 200)
}
