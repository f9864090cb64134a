//! Media descriptions (`media`, migration 0010): what is known of each media item, keyed by
//! `file_unique_id`. Never bytes.

use crate::args;
use crate::storage::Db;
use worker::{D1PreparedStatement, Result};

/// The statement reading what is known of these items (`agent_core::media::Described` rows).
pub fn known_stmt(db: &Db, unique_ids: &[String]) -> Result<D1PreparedStatement> {
    db.stmt(
        "SELECT file_unique_id, status, description, transcript FROM media
         WHERE file_unique_id IN (SELECT value FROM json_each(?1))",
        args![serde_json::to_string(unique_ids).unwrap_or_else(|_| "[]".into())],
    )
}

/// A description call's result for one item.
pub struct Made<'a> {
    pub unique_id: &'a str,
    pub kind: &'a str,
    pub mime: &'a str,
    pub size: u64,
    /// The description and transcript, or `None` when the call failed.
    pub described: Option<(String, Option<String>)>,
    pub model: &'a str,
}

/// The statement storing a description (or a failed attempt: status `failed`, counted, so it
/// is not asked for again by every turn).
pub fn record_stmt(db: &Db, m: &Made<'_>, now: i64) -> Result<D1PreparedStatement> {
    let (status, description, transcript) = match &m.described {
        Some((d, t)) => ("ok", Some(d.clone()), t.clone()),
        None => ("failed", None, None),
    };
    db.stmt(
        "INSERT INTO media (file_unique_id, kind, mime, size, status, attempts, description, transcript, model, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6, ?7, ?8, ?9, ?9)
         ON CONFLICT (file_unique_id) DO UPDATE SET status = excluded.status, attempts = media.attempts + 1,
           description = COALESCE(excluded.description, media.description),
           transcript = COALESCE(excluded.transcript, media.transcript),
           model = excluded.model, updated_at = excluded.updated_at",
        args![m.unique_id, m.kind, m.mime, m.size, status, description, transcript, m.model, now],
    )
}

/// A row of `media` as the operator sees it.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct MediaLine {
    pub file_unique_id: String,
    pub kind: String,
    pub mime: Option<String>,
    pub size: Option<i64>,
    pub status: String,
    pub attempts: i64,
    pub description: Option<String>,
    pub transcript: Option<String>,
    /// `operator` for a curated description, else the model that made it.
    pub model: Option<String>,
    pub updated_at: i64,
}

/// Descriptions, newest first.
pub async fn list(db: &Db, limit: i64) -> Result<Vec<MediaLine>> {
    db.all(
        "SELECT file_unique_id, kind, mime, size, status, attempts, description, transcript, model, updated_at
         FROM media ORDER BY updated_at DESC LIMIT ?1",
        args![limit],
    )
    .await
}

/// Sets a curated description (model `operator`): it replaces any generated one, and no turn
/// describes an item that has a description.
pub async fn set_curated(db: &Db, unique_id: &str, kind: &str, description: &str, transcript: Option<&str>, now: i64) -> Result<()> {
    db.run(
        "INSERT INTO media (file_unique_id, kind, status, attempts, description, transcript, model, created_at, updated_at)
         VALUES (?1, ?2, 'ok', 0, ?3, ?4, 'operator', ?5, ?5)
         ON CONFLICT (file_unique_id) DO UPDATE SET status = 'ok', description = excluded.description,
           transcript = COALESCE(excluded.transcript, media.transcript), model = 'operator', updated_at = excluded.updated_at",
        args![unique_id, kind, description, transcript, now],
    )
    .await?;
    Ok(())
}

/// What is known of these items (one round trip; none when there are no items).
pub async fn known(db: &Db, unique_ids: &[String]) -> Result<Vec<agent_core::media::Described>> {
    if unique_ids.is_empty() {
        return Ok(Vec::new());
    }
    let stmt = known_stmt(db, unique_ids)?;
    let results = db.batch(vec![stmt]).await?;
    results.first().map(crate::storage::rows).transpose().map(Option::unwrap_or_default)
}
