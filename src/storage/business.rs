//! Telegram Business connections and owners' modes (migration 0039; `bot::business`).

use crate::args;
use crate::storage::{rows, Db};
use agent_core::telegram::{BusinessBotRights, BusinessConnection};
use serde::Deserialize;
use worker::Result;

/// A stored connection, with its owner's stored access level (`users.access`).
#[derive(Debug, Clone, Deserialize)]
pub struct ConnRow {
    pub id: String,
    pub owner_id: i64,
    pub user_chat_id: i64,
    rights: String,
    is_enabled: i64,
    pub refused_told_at: Option<i64>,
    pub owner_access: Option<String>,
}

impl ConnRow {
    pub fn enabled(&self) -> bool {
        self.is_enabled != 0
    }

    pub fn rights(&self) -> BusinessBotRights {
        serde_json::from_str(&self.rights).unwrap_or_default()
    }
}

const SELECT: &str = "SELECT c.id, c.owner_id, c.user_chat_id, c.rights, c.is_enabled, c.refused_told_at,
       (SELECT access FROM users WHERE user_id = c.owner_id) AS owner_access
     FROM business_connections c";

/// Keeps a connection as Telegram last said it: a redelivered or late older update (by its
/// `date`) changes nothing. Returns the row as stored.
pub async fn record(db: &Db, c: &BusinessConnection, now: i64) -> Result<Option<ConnRow>> {
    let rights = serde_json::to_string(&c.rights()).unwrap_or_else(|_| "{}".into());
    let r = db
        .batch(vec![
            db.stmt(
                "INSERT INTO business_connections (id, owner_id, user_chat_id, rights, is_enabled, date, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (id) DO UPDATE SET owner_id = excluded.owner_id, user_chat_id = excluded.user_chat_id,
                   rights = excluded.rights, is_enabled = excluded.is_enabled, date = excluded.date, updated_at = excluded.updated_at
                 WHERE excluded.date >= business_connections.date
                   AND (business_connections.rights IS NOT excluded.rights OR business_connections.is_enabled IS NOT excluded.is_enabled
                     OR business_connections.user_chat_id IS NOT excluded.user_chat_id OR business_connections.owner_id IS NOT excluded.owner_id)",
                args![c.id.as_str(), c.user.id, c.user_chat_id, rights, c.is_enabled as i64, c.date, now],
            )?,
            db.stmt(&format!("{SELECT} WHERE c.id = ?1"), args![c.id.as_str()])?,
        ])
        .await?;
    Ok(r.get(1).map(rows::<ConnRow>).transpose()?.and_then(|v| v.into_iter().next()))
}

/// A connection by its id, if the bot has heard of it.
pub async fn get(db: &Db, id: &str) -> Result<Option<ConnRow>> {
    db.first(&format!("{SELECT} WHERE c.id = ?1"), args![id]).await
}

/// An owner's newest connection.
pub async fn of_owner(db: &Db, owner_id: i64) -> Result<Option<ConnRow>> {
    db.first(&format!("{SELECT} WHERE c.owner_id = ?1 ORDER BY c.date DESC LIMIT 1"), args![owner_id]).await
}

/// Claims telling the refused owner why: `refused_told_at` becomes `-now` (in flight) when
/// nobody told them and no claim newer than `stale` is in flight. Whether this call claimed it.
pub async fn claim_tell(db: &Db, id: &str, now: i64, stale: i64) -> Result<bool> {
    let n = db
        .run(
            "UPDATE business_connections SET refused_told_at = -?2
             WHERE id = ?1 AND (refused_told_at IS NULL OR (refused_told_at < 0 AND -refused_told_at < ?3))",
            args![id, now, stale],
        )
        .await?;
    Ok(n == 1)
}

/// The owner was told (the claim made at `now` is kept, as the time they were told).
pub async fn told_refused(db: &Db, id: &str, now: i64) -> Result<()> {
    db.run("UPDATE business_connections SET refused_told_at = ?2 WHERE id = ?1 AND refused_told_at = -?2", args![id, now]).await?;
    Ok(())
}

/// The send failed: the claim made at `now` is given up, so the next update tries again.
pub async fn release_tell(db: &Db, id: &str, now: i64) -> Result<()> {
    db.run("UPDATE business_connections SET refused_told_at = NULL WHERE id = ?1 AND refused_told_at = -?2", args![id, now]).await?;
    Ok(())
}

#[derive(Deserialize)]
struct ModeRow {
    business_mode: Option<String>,
}

/// The owner's mode as stored (`None`: never set).
pub async fn mode(db: &Db, user_id: i64) -> Result<Option<String>> {
    let row: Option<ModeRow> = db.first("SELECT business_mode FROM users WHERE user_id = ?1", args![user_id]).await?;
    Ok(row.and_then(|r| r.business_mode))
}

/// Records `/business <mode>` (a person not known yet gets a row named as given).
pub async fn set_mode(db: &Db, user_id: i64, name: &str, mode: &str, now: i64) -> Result<()> {
    db.run(
        "INSERT INTO users (user_id, name, business_mode, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (user_id) DO UPDATE SET business_mode = excluded.business_mode, updated_at = excluded.updated_at",
        args![user_id, name, mode, now],
    )
    .await?;
    Ok(())
}
