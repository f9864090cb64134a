//! Long-term memory at the edge: what a turn recalls and what `search_memory` finds.
//! (Notes written with `remember` are found by a plain text search for now.)

use crate::args;
use crate::env::Ctx;
use agent_core::conversation::ConvKey;
use agent_core::history::HistoryMessage;
use serde::Deserialize;

/// What a turn recalls beyond the notes: learned memories and the summary of older history.
#[derive(Debug, Clone, Default)]
pub struct Memories {
    pub items: Vec<String>,
    pub summary: Option<String>,
}

pub async fn recall(_ctx: &Ctx, _conv: &ConvKey, _people: &[i64], _messages: &[HistoryMessage]) -> worker::Result<Memories> {
    Ok(Memories::default())
}

/// Searches notes for `query` (every word must appear).
pub async fn search(ctx: &Ctx, chat_id: i64, query: &str, limit: i64) -> worker::Result<Vec<String>> {
    #[derive(Deserialize)]
    struct Row {
        content: String,
    }
    let words: Vec<String> = query.split_whitespace().take(6).map(|w| format!("%{}%", w.replace(['%', '_'], ""))).collect();
    if words.is_empty() {
        return Ok(Vec::new());
    }
    let mut sql = String::from("SELECT content FROM notes WHERE (chat_id = ?1 OR chat_id IS NULL)");
    let mut a = args![chat_id];
    for (i, w) in words.iter().enumerate() {
        sql.push_str(&format!(" AND content LIKE ?{}", i + 2));
        a.push(w.clone().into());
    }
    sql.push_str(&format!(" ORDER BY id DESC LIMIT {}", limit.clamp(1, 50)));
    Ok(ctx.db().all::<Row>(&sql, a).await?.into_iter().map(|r| r.content).collect())
}

#[derive(Deserialize)]
struct NoteLine {
    id: i64,
    content: String,
}

/// `/memory`: what the bot remembers about the user (and, in a group, about the group).
pub async fn list_for_user(ctx: &Ctx, conv: &ConvKey, user_id: Option<i64>) -> worker::Result<String> {
    let rows: Vec<NoteLine> = ctx
        .db()
        .all(
            "SELECT id, content FROM notes WHERE about_user_id = ?1 OR (chat_id = ?2 AND about_user_id IS NULL)
             ORDER BY id LIMIT 100",
            args![user_id, conv.chat_id],
        )
        .await?;
    if rows.is_empty() {
        return Ok("I don't remember anything about you yet.".to_string());
    }
    let mut out = String::from("What I remember (forget one with /forget <id>, or everything with /forget all):\n");
    for r in rows {
        out.push_str(&format!("\n#{} {}", r.id, r.content));
    }
    Ok(out)
}

/// `/forget <id>` or `/forget all`: deletes memories about the user.
pub async fn forget_for_user(ctx: &Ctx, conv: &ConvKey, user_id: Option<i64>, what: &str) -> worker::Result<String> {
    let db = ctx.db();
    let what = what.trim().trim_start_matches('#');
    if what.eq_ignore_ascii_case("all") {
        let n = db
            .run(
                "DELETE FROM notes WHERE source = 'agent' AND (about_user_id = ?1 OR (chat_id = ?2 AND about_user_id IS NULL AND ?3))",
                args![user_id, conv.chat_id, conv.chat_id > 0],
            )
            .await?;
        return Ok(format!("Done: I forgot {n} memories about you."));
    }
    let Ok(id) = what.parse::<i64>() else {
        return Ok("Tell me which one: /forget <id> (see /memory) or /forget all.".to_string());
    };
    let n = db
        .run(
            "DELETE FROM notes WHERE id = ?1 AND (about_user_id = ?2 OR (chat_id = ?3 AND about_user_id IS NULL))",
            args![id, user_id, conv.chat_id],
        )
        .await?;
    Ok(if n > 0 { format!("Forgotten: #{id}.") } else { format!("I have no memory #{id} about you.") })
}
