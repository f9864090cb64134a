//! A group's shared memories in the Mini App (what was learnt in the group about nobody in
//! particular: `Scope::LearnedIn` narrowed to rows about no one). The group is the one the
//! signed init data's `start_param` names through the bot's own table (`miniapp_links`); a
//! parameter the bot did not issue shows nothing. Before anything is shown the person must be
//! a member (`getChatMember`), and an administrator before an edit or a forget. An operator's
//! note about the group is not among them: only operators see or change it.

use super::{answer, item_id, MAX_WORDING_CHARS};
use crate::config::{now_ms, Ctx};
use crate::storage::memory as memory_rows;
use crate::storage::miniapp as rows;
use agent_core::access::webapp::{self, InitData};
use agent_core::memory::scope::Scope;
use serde_json::{json, Value};
use worker::{Method, Response, Result};

/// Where the person stands in the group.
#[derive(PartialEq)]
enum Standing {
    Outside,
    Member,
    Admin,
}

/// The group the init data's start parameter stands for, if the bot issued it.
async fn group_of(ctx: &Ctx, init: &InitData) -> Result<Option<i64>> {
    match init.start_param.as_deref().filter(|p| webapp::is_group_link(p)) {
        Some(token) => rows::group_of_link(&ctx.db(), token).await,
        None => Ok(None),
    }
}

/// `getChatMember`: a member (or restricted but still in), an administrator, or neither (any
/// refusal from Telegram counts as outside).
async fn standing(ctx: &Ctx, chat_id: i64, user_id: i64) -> Standing {
    let answer = ctx.telegram().call("getChatMember", &json!({"chat_id": chat_id, "user_id": user_id})).await;
    let Ok(member) = answer else { return Standing::Outside };
    match member.get("status").and_then(Value::as_str) {
        Some("creator" | "administrator") => Standing::Admin,
        Some("member") => Standing::Member,
        Some("restricted") if member.get("is_member").and_then(Value::as_bool) == Some(true) => Standing::Member,
        _ => Standing::Outside,
    }
}

fn nothing() -> Result<Response> {
    answer(&json!({"error": "not found"}), 404)
}

pub async fn route(ctx: &Ctx, init: &InitData, method: Method, segments: &[&str], body: &Value) -> Result<Response> {
    let Some(chat_id) = group_of(ctx, init).await? else { return nothing() };
    let standing = standing(ctx, chat_id, init.user.id).await;
    if standing == Standing::Outside {
        return nothing();
    }
    // About nobody, and not an operator's note: those are the operator's words, which only
    // operators see and change (the admin API); the model reads them as the operator's.
    let shared = |items: Vec<rows::Item>| {
        items.into_iter().filter(|i| i.about_user_id.is_none() && i.source.as_deref() != Some("operator")).collect::<Vec<_>>()
    };
    let scope = Scope::LearnedIn { chat_id };
    let items = shared(rows::items(&ctx.db(), &scope).await?);
    match (method.clone(), segments) {
        (Method::Get, []) => {
            let title = items.iter().find_map(|i| i.chat_title.clone());
            answer(&json!({"chat_id": chat_id, "title": title, "admin": standing == Standing::Admin, "memories": items}), 200)
        }
        (Method::Put | Method::Delete, ["memories", id]) => {
            if standing != Standing::Admin {
                return answer(&json!({"error": "only the group's administrators change its shared memories"}), 403);
            }
            let Some(item) = items.iter().find(|i| i.id == *id).and_then(|i| item_id(&i.id)) else { return nothing() };
            let done = if method == Method::Delete {
                memory_rows::erase_one(&ctx.db(), item, Some(&scope)).await?
            } else {
                let text = body.get("text").and_then(Value::as_str).map(str::trim).unwrap_or("");
                if text.is_empty() || text.chars().count() > MAX_WORDING_CHARS {
                    return answer(&json!({"error": "the wording is 1 to 500 characters"}), 400);
                }
                rows::reword(&ctx.db(), item, &scope, text, now_ms()).await?
            };
            if done { answer(&json!({"id": id}), 200) } else { nothing() }
        }
        _ => nothing(),
    }
}
