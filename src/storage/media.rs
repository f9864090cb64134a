//! Media descriptions (`media`, migration 0010): what is known of each media item, keyed by
//! `file_unique_id`. Never bytes.

use crate::args;
use crate::storage::Db;
use agent_core::turn::media::Unviewable;
use worker::{D1PreparedStatement, Result};

/// The statement reading what is known of these items (`agent_core::turn::media::Described` rows).
pub fn known_stmt(db: &Db, unique_ids: &[String]) -> Result<D1PreparedStatement> {
    db.stmt(
        "SELECT file_unique_id, status, description, transcript FROM media
         WHERE file_unique_id IN (SELECT value FROM json_each(?1))",
        args![serde_json::to_string(unique_ids).unwrap_or_else(|_| "[]".into())],
    )
}

/// The statement reading the described stickers of these sets, newest first
/// (`agent_core::turn::media::KnownSticker` rows, for `send_sticker`).
pub fn stickers_stmt(db: &Db, sets: &[String]) -> Result<D1PreparedStatement> {
    db.stmt(
        "SELECT set_name, emoji, description FROM media
         WHERE set_name IS NOT NULL AND lower(set_name) IN (SELECT lower(value) FROM json_each(?1))
           AND kind = 'sticker' AND status = 'ok' AND emoji IS NOT NULL AND description IS NOT NULL
         ORDER BY updated_at DESC LIMIT ?2",
        args![serde_json::to_string(sets).unwrap_or_else(|_| "[]".into()), 4 * agent_core::turn::media::MAX_LISTED_STICKERS],
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
    /// A sticker's set and emoji (for the stickers offered to `send_sticker`).
    pub set_name: Option<String>,
    pub emoji: Option<String>,
}

/// The statement storing a description (or a failed attempt: status `failed`, counted, so it
/// is not asked for again by every turn).
pub fn record_stmt(db: &Db, m: &Made<'_>, now: i64) -> Result<D1PreparedStatement> {
    let (status, description, transcript, reason) = match &m.described {
        Some((d, t)) => ("ok", Some(d.clone()), t.clone(), None),
        None => ("failed", None, None, Some("the description call failed")),
    };
    db.stmt(
        "INSERT INTO media (file_unique_id, kind, mime, size, status, attempts, description, transcript, model, reason, set_name, emoji, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12)
         ON CONFLICT (file_unique_id) DO UPDATE SET status = excluded.status, attempts = media.attempts + 1,
           description = COALESCE(excluded.description, media.description),
           transcript = COALESCE(excluded.transcript, media.transcript),
           model = excluded.model, reason = excluded.reason,
           set_name = COALESCE(excluded.set_name, media.set_name), emoji = COALESCE(excluded.emoji, media.emoji),
           updated_at = excluded.updated_at",
        args![m.unique_id, m.kind, m.mime, m.size, status, description, transcript, m.model, reason, m.set_name.clone(), m.emoji.clone(), now],
    )
}

/// The statement keeping an item that can never be viewed (`unsupported`, `too_large`) or
/// whose file is gone (`failed`, one attempt) with the reason; an item already known
/// (described, curated, kept) is left as it is.
pub fn unviewable_stmt(db: &Db, u: &Unviewable, now: i64) -> Result<D1PreparedStatement> {
    db.stmt(
        "INSERT INTO media (file_unique_id, kind, mime, size, status, attempts, reason, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, CASE WHEN ?5 = 'failed' THEN 1 ELSE 0 END, ?6, ?7, ?7)
         ON CONFLICT (file_unique_id) DO NOTHING",
        args![u.unique_id.as_str(), u.kind.as_str(), u.mime.clone(), u.size, u.status, u.reason.as_str(), now],
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
    /// Why it was not viewed or described (status `unsupported`, `too_large`, `failed`).
    pub reason: Option<String>,
    /// A sticker's set and emoji.
    pub set_name: Option<String>,
    pub emoji: Option<String>,
    pub updated_at: i64,
}

/// Descriptions, newest first.
pub async fn list(db: &Db, limit: i64) -> Result<Vec<MediaLine>> {
    db.all(
        "SELECT file_unique_id, kind, mime, size, status, attempts, description, transcript, model, reason, set_name, emoji, updated_at
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
           transcript = COALESCE(excluded.transcript, media.transcript), model = 'operator', reason = NULL,
           updated_at = excluded.updated_at",
        args![unique_id, kind, description, transcript, now],
    )
    .await?;
    Ok(())
}

/// What is known of these items (one round trip; none when there are no items).
pub async fn known(db: &Db, unique_ids: &[String]) -> Result<Vec<agent_core::turn::media::Described>> {
    if unique_ids.is_empty() {
        return Ok(Vec::new());
    }
    let stmt = known_stmt(db, unique_ids)?;
    let results = db.batch(vec![stmt]).await?;
    results.first().map(crate::storage::rows).transpose().map(Option::unwrap_or_default)
}
