//! Notes: what the operator and the agent wrote down (`remember`), read by a turn in the
//! scope `agent_core::memory::scope::Scope::Chat` allows.
use crate::args;
use crate::storage::Db;
use serde::Deserialize;
use worker::Result;

/// A note as a turn reads it.
pub type NoteRow = agent_core::turn::window::Note;


/// Notes for a turn: what `agent_core::memory::scope::Scope::Chat` lets the conversation see (notes
/// written in this chat; operator notes for everyone, or about the people present; in a private
/// chat, agent notes about that person from anywhere). Operator notes first.
pub fn notes_stmt(db: &Db, chat_id: i64, people: &[i64]) -> Result<worker::D1PreparedStatement> {
    let scope = agent_core::memory::scope::Scope::Chat { chat_id, people: people.to_vec() };
    let on = scope.notes("", 1);
    let sql = format!(
        "SELECT id, about_user_id, content, source, supplied_by FROM notes WHERE {}
         ORDER BY CASE source WHEN 'operator' THEN 0 ELSE 1 END, id DESC LIMIT 60",
        on.sql
    );
    db.stmt(&sql, crate::storage::scope_args(&on))
}


/// Inserts an agent's note. A note about a person is written only if that person has written
/// in this chat (only people seen in the conversation may be the subject of what is learned
/// there: `chat_members`, migration 0034); otherwise nothing is written and `None` comes back. `supplied_by`: who asked for it
/// (only a person's own words about themself cross into their private chat).
pub async fn insert_note(db: &Db, chat_id: i64, about_user_id: Option<i64>, content: &str, source: &str, supplied_by: Option<i64>, now: i64) -> Result<Option<i64>> {
    #[derive(Deserialize)]
    struct Id {
        id: i64,
    }
    let row: Option<Id> = db
        .first(
            "INSERT INTO notes (chat_id, about_user_id, content, source, created_at, supplied_by)
             SELECT ?1, ?2, ?3, ?4, ?5, ?6
             WHERE ?2 IS NULL OR EXISTS (SELECT 1 FROM chat_members WHERE chat_id = ?1 AND user_id = ?2)
             RETURNING id",
            args![chat_id, about_user_id, content, source, now, supplied_by],
        )
        .await?;
    Ok(row.map(|r| r.id))
}

/// Inserts an operator's note (for everyone, a chat, or a person); its id.
pub async fn insert_operator_note(db: &Db, chat_id: Option<i64>, about_user_id: Option<i64>, content: &str, now: i64) -> Result<Option<serde_json::Value>> {
    db.first(
        "INSERT INTO notes (chat_id, about_user_id, content, source, created_at) VALUES (?1, ?2, ?3, 'operator', ?4) RETURNING id",
        args![chat_id, about_user_id, content, now],
    )
    .await
}
