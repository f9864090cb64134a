//! Pictures the bot makes (migration 0027): the daily picture charges (`image_charges`, beside
//! the budget charges) and a made picture kept until it is sent (`image_parts`), and the
//! photos of messages a picture edits.
//!
//! Invariants (INVARIANTS.md): "A picture is made and sent once" (here: a picture stored
//! under its step's key is read back instead of being made again).

use crate::args;
use crate::storage::Db;
use serde::Deserialize;
use worker::Result;

/// Characters of base64 per stored piece (a D1 value holds at most 2 MB).
pub const PIECE_CHARS: usize = 1_000_000;

/// Checks the daily picture limits and charges the step in one statement (D1 runs a batch as
/// one transaction, so two chat objects drawing for one person at once cannot both pass the
/// last picture): the charge is written only while the person's and the chat's pictures of
/// the day (from `day_start`, other than the step's own) are under `limits` (0: none), or for
/// an operator; a retried step's charge is the same row. Then the charges two days old are
/// dropped. Whether the step is charged, and the day's counts besides its own.
pub async fn charge_within(db: &Db, step_key: &str, chat_id: i64, user_id: Option<i64>, limits: (u64, u64), operator: bool, now: i64, day_start: i64) -> Result<(bool, u64, u64)> {
    let (per_person, per_chat) = limits;
    // ?1 step, ?2 chat, ?3 person, then `day`: the day's start.
    let person = |day: &str| format!("(SELECT COUNT(*) FROM image_charges WHERE user_id = ?3 AND created_at >= {day} AND step_key <> ?1)");
    let chat = |day: &str| format!("(SELECT COUNT(*) FROM image_charges WHERE chat_id = ?2 AND created_at >= {day} AND step_key <> ?1)");
    let insert = format!(
        "INSERT INTO image_charges (step_key, chat_id, user_id, created_at)
         SELECT ?1, ?2, ?3, ?4 WHERE ?8 OR ((?6 = 0 OR {} < ?6) AND (?7 = 0 OR {} < ?7))
         ON CONFLICT (step_key) DO NOTHING",
        person("?5"),
        chat("?5")
    );
    let read = format!("SELECT EXISTS (SELECT 1 FROM image_charges WHERE step_key = ?1) AS charged, {} AS person, {} AS chat", person("?4"), chat("?4"));
    let results = db
        .batch(vec![
            db.stmt(&insert, args![step_key, chat_id, user_id, now, day_start, per_person as i64, per_chat as i64, operator])?,
            db.stmt(&read, args![step_key, chat_id, user_id, day_start])?,
            db.stmt("DELETE FROM image_charges WHERE created_at < ?1", args![now - 2 * 86_400_000])?,
        ])
        .await?;
    // Read as JSON values (no row type of its own: less wasm).
    let c = super::rows::<serde_json::Value>(&results[1])?.into_iter().next().unwrap_or_default();
    let n = |k: &str| c.get(k).and_then(serde_json::Value::as_i64).unwrap_or(0).max(0) as u64;
    Ok((n("charged") == 1, n("person"), n("chat")))
}

/// A stored picture: its MIME type, caption and base64.
pub struct Stored {
    pub mime_type: String,
    pub caption: Option<String>,
    pub base64: String,
}

/// Stores a made picture under its step's key, in pieces, in one batch (and drops pieces a
/// day old that no step sent).
pub async fn store(db: &Db, step_key: &str, picture: &Stored, now: i64) -> Result<()> {
    let mut statements = vec![db.stmt("DELETE FROM image_parts WHERE step_key = ?1 OR created_at < ?2", args![step_key, now - 86_400_000])?];
    let b = picture.base64.as_bytes();
    for (i, piece) in b.chunks(PIECE_CHARS).enumerate() {
        // Base64 is ASCII: every piece is valid UTF-8.
        let piece = std::str::from_utf8(piece).unwrap_or_default();
        statements.push(db.stmt(
            "INSERT INTO image_parts (step_key, idx, mime_type, caption, data, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            args![step_key, i, picture.mime_type.as_str(), picture.caption.clone(), piece, now],
        )?);
    }
    db.batch(statements).await?;
    Ok(())
}

#[derive(Deserialize)]
struct Piece {
    mime_type: String,
    caption: Option<String>,
    data: String,
}

/// The picture stored under the step's key, if any.
pub async fn stored(db: &Db, step_key: &str) -> Result<Option<Stored>> {
    let pieces: Vec<Piece> = db
        .all("SELECT mime_type, caption, data FROM image_parts WHERE step_key = ?1 ORDER BY idx", args![step_key])
        .await?;
    let Some(first) = pieces.first() else { return Ok(None) };
    let (mime_type, caption) = (first.mime_type.clone(), first.caption.clone());
    let base64 = pieces.into_iter().map(|p| p.data).collect::<String>();
    Ok(Some(Stored { mime_type, caption, base64 }))
}

/// Drops the picture stored under the step's key (it was sent).
pub async fn forget(db: &Db, step_key: &str) -> Result<()> {
    db.run("DELETE FROM image_parts WHERE step_key = ?1", args![step_key]).await?;
    Ok(())
}

/// A message's parts (JSON), for the photos a picture edits.
#[derive(Deserialize)]
pub struct MessageParts {
    pub message_id: i64,
    pub parts: String,
}

/// The parts of these messages of the chat (people's and the bot's, not refused ones).
pub async fn message_parts(db: &Db, chat_id: i64, message_ids: &[i64]) -> Result<Vec<MessageParts>> {
    db.all(
        "SELECT message_id, parts FROM messages
         WHERE chat_id = ?1 AND excluded = 0 AND message_id IN (SELECT value FROM json_each(?2))",
        args![chat_id, serde_json::to_string(message_ids).unwrap_or_else(|_| "[]".into())],
    )
    .await
}
