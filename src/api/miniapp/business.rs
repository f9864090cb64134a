//! The owner's Telegram Business settings in the Mini App: the mode and the business notes,
//! read and changed through the same storage and rules as `/business` and `/business notes`
//! (`agent_core::business::change_of`), for the person of the signed init data only.

use super::answer;
use crate::config::{now_ms, Ctx};
use crate::storage::business as rows;
use agent_core::access::webapp::InitData;
use agent_core::business::{change_of, Mode};
use serde_json::{json, Value};
use worker::{Response, Result};

/// What the page shows of the person's Business settings (`null` while `BUSINESS` is off).
pub async fn state(ctx: &Ctx, user: i64) -> Result<Value> {
    if !ctx.cfg.business {
        return Ok(Value::Null);
    }
    let db = ctx.db();
    let (mode, notes) = rows::settings(&db, user).await?;
    let c = rows::of_owner(&db, user).await?;
    Ok(json!({
        "mode": Mode::stored(mode.as_deref()).as_str(),
        "notes": notes.unwrap_or_default(),
        "connected": c.is_some(),
        "enabled": c.as_ref().is_some_and(|c| c.enabled()),
        "can_reply": c.as_ref().is_some_and(|c| c.rights().can_reply),
    }))
}

/// `PUT business`: `{mode?, notes?}`; the settings as they now are.
pub async fn change(ctx: &Ctx, init: &InitData, body: &Value) -> Result<Response> {
    if !ctx.cfg.business {
        return answer(&json!({"error": "Telegram Business is turned off for this bot"}), 404);
    }
    let change = match change_of(body) {
        Ok(c) => c,
        Err(e) => return answer(&json!({"error": e}), 400),
    };
    let (db, user, name) = (ctx.db(), init.user.id, init.user.first_name.as_str());
    if let Some(mode) = change.mode {
        rows::set_mode(&db, user, name, mode.as_str(), now_ms()).await?;
    }
    if let Some(notes) = change.notes {
        rows::set_notes(&db, user, name, notes.as_deref(), now_ms()).await?;
    }
    answer(&state(ctx, user).await?, 200)
}
