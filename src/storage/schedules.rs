//! `schedules` (migration 0011): reminders and follow-ups. The chat object reads what is due
//! and claims a run by moving `next_run_ms` away from the due time in a conditional update, so
//! a run is claimed once, by one turn, whatever is retried; the cron finds conversations whose
//! next run has passed without firing (a lost alarm). Invariants (INVARIANTS.md):
//! "Schedules fire once, never lost", "A retried turn creates its schedule once".

use super::{rows, Db};
use crate::args;
use agent_core::conversation::ConvKey;
use agent_core::chat::schedule::{Listed, NewSchedule};
use serde::Deserialize;
use worker::Result;

const SELECT_ZONE: &str = "SELECT timezone FROM chats WHERE chat_id = ?1";
const COUNT_ACTIVE: &str = "SELECT COUNT(*) AS n FROM schedules WHERE chat_id = ?1 AND status = 'active'";
/// Inserted only while the chat is under its limit (checked in the same statement).
/// A turn retried after its model call failed asks again: the same turn and text is the same
/// schedule (the conflict keeps the first).
const INSERT: &str = "INSERT INTO schedules (chat_id, conv, creator_user_id, text, timezone, repeat, next_run_ms, status,
       created_at, updated_at, origin_turn_id)
     SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, 'active', ?8, ?8, ?10
     WHERE (SELECT COUNT(*) FROM schedules WHERE chat_id = ?1 AND status = 'active') < ?9
     ON CONFLICT (origin_turn_id, text) DO NOTHING";
const SELECT_ORIGIN: &str = "SELECT id FROM schedules WHERE origin_turn_id = ?1 AND text = ?2";
const SET_ZONE: &str = "UPDATE chats SET timezone = ?2 WHERE chat_id = ?1";
const LIST_ACTIVE: &str = "SELECT id, text, timezone, repeat, next_run_ms FROM schedules
     WHERE conv = ?1 AND status = 'active' ORDER BY next_run_ms, id LIMIT 100";
/// A person may cancel in their chat; `?4` (who) limits it to what they created, when given.
const CANCEL: &str = "UPDATE schedules SET status = 'cancelled', next_run_ms = NULL, updated_at = ?3
     WHERE id = ?1 AND conv = ?2 AND status = 'active' AND (?4 IS NULL OR creator_user_id = ?4)
     RETURNING id";
const DUE: &str = "SELECT id, text, timezone, repeat, next_run_ms, creator_user_id FROM schedules
     WHERE conv = ?1 AND status = 'active' AND next_run_ms <= ?2 ORDER BY next_run_ms LIMIT 5";
const NEXT: &str = "SELECT MIN(next_run_ms) AS next FROM schedules WHERE conv = ?1 AND status = 'active'";
/// Claims the run due at `?2` for turn `?6` (runs + 1), or skips it (runs unchanged).
const ADVANCE: &str = "UPDATE schedules SET next_run_ms = ?3, status = ?4, runs = runs + ?5, last_run_ms = ?7,
       last_turn_id = COALESCE(?6, last_turn_id), updated_at = ?7
     WHERE id = ?1 AND status = 'active' AND next_run_ms = ?2
     RETURNING id";
const CLAIMED_BY: &str = "SELECT last_turn_id FROM schedules WHERE id = ?1";
const OVERDUE: &str = "SELECT DISTINCT conv FROM schedules WHERE status = 'active' AND next_run_ms <= ?1 LIMIT ?2";
const ADMIN_LIST: &str = "SELECT id, chat_id, conv, creator_user_id, text, timezone, repeat, next_run_ms, status, runs,
       last_run_ms, created_at
     FROM schedules WHERE (?1 IS NULL OR chat_id = ?1) AND (?2 IS NULL OR status = ?2)
     ORDER BY id DESC LIMIT ?3";
/// Every active schedule a person set, in any chat (they were blocked).
const CANCEL_BY_CREATOR: &str = "UPDATE schedules SET status = 'cancelled', next_run_ms = NULL, updated_at = ?2
     WHERE creator_user_id = ?1 AND status = 'active' RETURNING conv";
const ADMIN_CANCEL: &str = "UPDATE schedules SET status = 'cancelled', next_run_ms = NULL, updated_at = ?2
     WHERE id = ?1 AND status = 'active' RETURNING conv";

#[derive(Deserialize)]
struct ZoneRow {
    timezone: Option<String>,
}

#[derive(Deserialize)]
struct CountRow {
    n: i64,
}

#[derive(Deserialize)]
struct IdRow {
    #[allow(dead_code)]
    id: i64,
}

#[derive(Deserialize)]
struct NextRow {
    next: Option<i64>,
}

#[derive(Deserialize)]
struct ClaimRow {
    last_turn_id: Option<String>,
}

#[derive(Deserialize)]
struct ConvRow {
    conv: String,
}

/// A due run as the chat object reads it (the core's type: its loop decides what it does).
pub use agent_core::chat_state::schedule_due::DueSchedule;

/// The chat's own time zone (the last one a schedule named) and its active schedules, in one
/// round trip.
pub async fn zone_and_count(db: &Db, chat_id: i64) -> Result<(Option<String>, usize)> {
    let r = db.batch(vec![db.stmt(SELECT_ZONE, args![chat_id])?, db.stmt(COUNT_ACTIVE, args![chat_id])?]).await?;
    let zone = rows::<ZoneRow>(&r[0])?.into_iter().next().and_then(|z| z.timezone);
    let n = rows::<CountRow>(&r[1])?.into_iter().next().map_or(0, |c| c.n.max(0) as usize);
    Ok((zone, n))
}

/// The chat's time zone, if it has one.
pub async fn zone(db: &Db, chat_id: i64) -> Result<Option<String>> {
    Ok(db.first::<ZoneRow>(SELECT_ZONE, args![chat_id]).await?.and_then(|z| z.timezone))
}

/// Stores a new schedule (and, when the call named one, the chat's zone) unless the chat is at
/// its limit; its id (the one this turn already created, for a retried turn), or `None` at
/// the limit.
pub async fn insert(db: &Db, conv: &ConvKey, creator: Option<i64>, turn_id: &str, s: &NewSchedule, max_active: usize, now: i64) -> Result<Option<i64>> {
    #[derive(Deserialize)]
    struct Inserted {
        id: i64,
    }
    let mut stmts = vec![db.stmt(
        INSERT,
        args![conv.chat_id, conv.to_string(), creator, s.text.as_str(), s.timezone.as_str(), s.repeat.clone(), s.first_run_ms, now, max_active, turn_id],
    )?];
    if s.explicit_zone {
        stmts.push(db.stmt(SET_ZONE, args![conv.chat_id, s.timezone.as_str()])?);
    }
    stmts.push(db.stmt(SELECT_ORIGIN, args![turn_id, s.text.as_str()])?);
    let r = db.batch(stmts).await?;
    let found = r.last().map(rows::<Inserted>).transpose()?.unwrap_or_default();
    Ok(found.into_iter().next().map(|i| i.id))
}

/// The conversation's active schedules, soonest first.
pub async fn list_active(db: &Db, conv: &ConvKey) -> Result<Vec<Listed>> {
    db.all(LIST_ACTIVE, args![conv.to_string()]).await
}

/// Cancels one of the conversation's schedules (only `who`'s own, when given); whether it did.
pub async fn cancel(db: &Db, conv: &ConvKey, id: i64, who: Option<i64>, now: i64) -> Result<bool> {
    Ok(!db.all::<IdRow>(CANCEL, args![id, conv.to_string(), now, who]).await?.is_empty())
}

/// What is due in the conversation at `now`, soonest first.
pub async fn due(db: &Db, conv: &ConvKey, now: i64) -> Result<Vec<DueSchedule>> {
    db.all(DUE, args![conv.to_string(), now]).await
}

/// The conversation's next run, if any.
pub async fn next_run(db: &Db, conv: &ConvKey) -> Result<Option<i64>> {
    Ok(db.first::<NextRow>(NEXT, args![conv.to_string()]).await?.and_then(|n| n.next))
}

/// Skips the run due at `due_ms` (too late): the next run, or `missed` for a one-off.
pub async fn skip(db: &Db, id: i64, due_ms: i64, next_ms: Option<i64>, now: i64) -> Result<()> {
    let status = if next_ms.is_some() { "active" } else { "missed" };
    db.all::<IdRow>(ADVANCE, args![id, due_ms, next_ms, status, 0i64, None::<String>, now]).await?;
    Ok(())
}

/// Claims the run due at `due_ms` for `turn_id`: moves the schedule to its next run (or
/// `done`). Idempotent: true when this turn holds the run (now or from an earlier attempt),
/// false when it is gone (cancelled meanwhile, or claimed by another turn).
pub async fn claim(db: &Db, id: i64, due_ms: i64, next_ms: Option<i64>, turn_id: &str, now: i64) -> Result<bool> {
    let status = if next_ms.is_some() { "active" } else { "done" };
    let r = db
        .batch(vec![
            db.stmt(ADVANCE, args![id, due_ms, next_ms, status, 1i64, turn_id, now])?,
            db.stmt(CLAIMED_BY, args![id])?,
        ])
        .await?;
    Ok(rows::<ClaimRow>(&r[1])?.into_iter().next().and_then(|c| c.last_turn_id).as_deref() == Some(turn_id))
}

/// Conversations with an active schedule whose next run is at or before `before` (their
/// alarm did not fire it).
pub async fn overdue(db: &Db, before: i64, limit: i64) -> Result<Vec<ConvKey>> {
    let found: Vec<ConvRow> = db.all(OVERDUE, args![before, limit]).await?;
    Ok(found.iter().filter_map(|r| ConvKey::parse(&r.conv)).collect())
}

/// Schedules for the admin API, newest first.
pub async fn admin_list(db: &Db, chat_id: Option<i64>, status: Option<&str>, limit: i64) -> Result<Vec<serde_json::Value>> {
    db.all(ADMIN_LIST, args![chat_id, status, limit]).await
}

/// Cancels a schedule by id (admin API); its conversation when it was active.
pub async fn admin_cancel(db: &Db, id: i64, now: i64) -> Result<Option<ConvKey>> {
    let found: Vec<ConvRow> = db.all(ADMIN_CANCEL, args![id, now]).await?;
    Ok(found.first().and_then(|r| ConvKey::parse(&r.conv)))
}

/// Cancels every active schedule `user_id` set (they were blocked); the conversations that had
/// one, each once.
pub async fn cancel_by_creator(db: &Db, user_id: i64, now: i64) -> Result<Vec<ConvKey>> {
    let found: Vec<ConvRow> = db.all(CANCEL_BY_CREATOR, args![user_id, now]).await?;
    let mut convs: Vec<ConvKey> = found.iter().filter_map(|r| ConvKey::parse(&r.conv)).collect();
    agent_core::order::sort_by_key(&mut convs, |c| c.to_string());
    convs.dedup();
    Ok(convs)
}
