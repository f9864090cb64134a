//! A person's own settings: `/rich on|off` (`users.rich_off`, migration 0030).

use crate::args;
use crate::storage::Db;
use serde::Deserialize;
use worker::Result;

#[derive(Deserialize)]
struct RichRow {
    rich_off: Option<i64>,
}

/// Whether the person turned rich answers off (`/rich off`). Unknown person: no.
pub async fn rich_off(db: &Db, user_id: i64) -> Result<bool> {
    let row: Option<RichRow> = db.first("SELECT rich_off FROM users WHERE user_id = ?1", args![user_id]).await?;
    Ok(row.and_then(|r| r.rich_off).unwrap_or(0) != 0)
}

/// Records `/rich on|off` for a person (their row is written with their message; a person not
/// known yet gets a row named as given).
pub async fn set_rich_off(db: &Db, user_id: i64, name: &str, off: bool, now: i64) -> Result<()> {
    db.run(
        "INSERT INTO users (user_id, name, rich_off, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (user_id) DO UPDATE SET rich_off = excluded.rich_off, updated_at = excluded.updated_at",
        args![user_id, name, off as i64, now],
    )
    .await?;
    Ok(())
}
