//! Long-term memory at the edge: what a turn recalls, what `search_memory` finds, and what
//! people see and erase with `/memory` and `/forget`.
//!
//! Invariants (INVARIANTS.md): "Memory privacy is one rule" (every query, in
//! `storage::memory`, takes its `WHERE` fragment from `agent_core::memory::scope::Scope`).

use crate::config::Ctx;
use crate::storage::memory::{self as rows, ItemId};
use crate::storage::Db;
use agent_core::telegram::commands::ForgetTarget;
use agent_core::conversation::{ChatKind, ConvKey};
use agent_core::history::{HistoryMessage, Role};
use agent_core::memory::{fts_query, render, search_terms, Memory};
use agent_core::memory::scope::Scope;

/// What a turn recalls beyond the notes: learned memories and the summary of older history.
#[derive(Debug, Clone, Default)]
pub struct Memories {
    /// Best first; the prompt cuts them to the memory budget.
    pub items: Vec<String>,
    pub summary: Option<String>,
    /// The last message seq the summary covers.
    pub summary_until: Option<i64>,
}

/// The scope of a conversation's reads.
pub fn chat_scope(conv: &ConvKey, people: &[i64]) -> Scope {
    Scope::Chat { chat_id: conv.chat_id, people: people.to_vec() }
}

/// The text of the newest messages from people (what the turn answers), for matching.
fn recent_text(messages: &[HistoryMessage]) -> String {
    messages
        .iter()
        .rev()
        .filter(|m| m.role == Role::User)
        .take(6)
        .map(HistoryMessage::compact_text)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether a turn recalls by similarity too: with `EMBEDDINGS_MODEL` set and newest messages
/// to compare.
fn by_similarity(embeddings: bool, text: &str) -> bool {
    embeddings && !text.trim().is_empty()
}

/// The statements of a recall (summary, people's memories, memories matching the newest
/// messages, and with `embeddings` the ids of those that may be recalled by similarity), to
/// run in the turn's batch; `recall` reads their results.
pub fn recall_statements(db: &Db, conv: &ConvKey, people: &[i64], messages: &[HistoryMessage], embeddings: bool) -> worker::Result<Vec<worker::D1PreparedStatement>> {
    let text = recent_text(messages);
    let fts = fts_query(&text, 12);
    rows::recall_statements(db, &conv.to_string(), &chat_scope(conv, people), people, fts, by_similarity(embeddings, &text))
}

/// What a turn recalls, from the results of `recall_statements` (plus embedding matches
/// when EMBEDDINGS_MODEL is set).
pub async fn recall(ctx: &Ctx, conv: &ConvKey, people: &[i64], messages: &[HistoryMessage], results: &[crate::storage::D1Rows]) -> worker::Result<Memories> {
    let text = recent_text(messages);
    let rows::Recalled { summary, mut found, embedded } = rows::recall_rows(results, by_similarity(!ctx.cfg.embeddings_model.is_empty(), &text))?;
    if let Some(ids) = embedded {
        match similar(ctx, &chat_scope(conv, people), &text, &ids).await {
            Ok(more) => {
                for m in more {
                    if !found.iter().any(|f| f.id == m.id) {
                        found.push(m);
                    }
                }
            }
            Err(e) => worker::console_warn!("embedding recall failed (FTS results still used): {e}"),
        }
    }
    Ok(Memories {
        items: found.iter().map(render).collect(),
        summary: summary.as_ref().map(|s| s.summary.clone()),
        summary_until: summary.map(|s| s.until_seq),
    })
}

/// About how many bytes of decoded vectors an isolate keeps (`vector::Cache`): some 5,000
/// memories' worth.
const VECTOR_CACHE_BYTES: usize = 4 << 20;

thread_local! {
    /// Every chat object of this isolate shares it: it holds vectors by memory id and no
    /// text, and a turn scores only the ids its own scoped query listed.
    static VECTORS: std::cell::RefCell<agent_core::memory::vector::Cache> = std::cell::RefCell::new(agent_core::memory::vector::Cache::new(VECTOR_CACHE_BYTES));
}

/// Memories whose embeddings are close to `text`, among `ids` (listed by the recall's scoped
/// statement, in the turn's batch). Only vectors this isolate has not read yet are read, and
/// only the memories kept are.
async fn similar(ctx: &Ctx, scope: &Scope, text: &str, ids: &[i64]) -> Result<Vec<Memory>, String> {
    let query = ctx.gemini().embed(&ctx.cfg.embeddings_model, &[text.to_string()]).await?.into_iter().next().unwrap_or_default();
    let db = ctx.db();
    let missing = VECTORS.with(|c| c.borrow().missing(ids));
    if !missing.is_empty() {
        let read = rows::embeddings(&db, &missing).await.map_err(|e| e.to_string())?;
        VECTORS.with(|c| c.borrow_mut().fill(ids, read.iter().map(|(id, e)| (*id, e.as_str()))));
    }
    let query = agent_core::memory::vector::Query::new(query);
    let best = VECTORS.with(|c| c.borrow().best(&query, ids, 0.55, 6));
    rows::memories_by_id(&db, scope, &best).await.map_err(|e| e.to_string())
}

/// `search_memory`: full-text search over the memories and notes the conversation may see
/// (`people`: those present, for operator notes about a person), and over what the media sent
/// in this chat showed or said.
pub async fn search(ctx: &Ctx, conv: &ConvKey, people: &[i64], query: &str, limit: i64) -> worker::Result<Vec<String>> {
    let Some(q) = fts_query(query, 12) else { return Ok(Vec::new()) };
    let terms = search_terms(query, 4);
    rows::search(&ctx.db(), &chat_scope(conv, people), conv.chat_id, &q, &terms, limit).await
}

/// `/memory`: what this chat remembers about the user (and about the chat itself): the
/// `Scope::Own` view, so a group never lists what was learned in a private chat. Operator
/// notes are not listed (they are not the user's to erase).
pub async fn list_for_user(ctx: &Ctx, conv: &ConvKey, user_id: Option<i64>) -> worker::Result<String> {
    let scope = Scope::Own { chat_id: conv.chat_id, user_id };
    let (notes, memories) = rows::listed(&ctx.db(), &scope).await?;
    if notes.is_empty() && memories.is_empty() {
        return Ok("I don't remember anything about you yet.".to_string());
    }
    let mut out = String::from("What I remember (/forget <id> erases one, /forget all everything about you):\n");
    // Stored text is outside text: escaped, so it shows exactly as written (no links, no mentions).
    for n in &notes {
        out.push_str(&format!("\nn{} · {}", n.id, agent_core::format::escape_markdown(&n.content)));
    }
    for m in &memories {
        out.push_str(&format!("\nm{} · {}", m.id, agent_core::format::escape_markdown(&render(m))));
    }
    Ok(out)
}

/// `/forget <id>` or `/forget all`: deletes memories about the user, from every table that
/// holds them (notes, memories, and through triggers the search index). `<id>` is erased only
/// if `/memory` here would list it (`Scope::Own`): never an operator note, never what this
/// chat may not see. `all` erases `Scope::Erase`: in a group what the group sees about the
/// user; in a private chat everything about the user, what was learned in that chat and its
/// summary.
pub async fn forget_for_user(ctx: &Ctx, conv: &ConvKey, kind: ChatKind, user_id: Option<i64>, what: &ForgetTarget) -> worker::Result<String> {
    let db = ctx.db();
    let id = match what {
        ForgetTarget::All => {
            let scope = Scope::Erase { chat_id: conv.chat_id, user_id };
            let summary_of = (kind == ChatKind::Private).then(|| conv.to_string());
            let n = rows::erase(&db, &scope, summary_of.as_deref()).await?;
            return Ok(format!("Done: I forgot {n} things about you."));
        }
        ForgetTarget::Note(id) => ItemId::Note(*id),
        ForgetTarget::Memory(id) => ItemId::Memory(*id),
        ForgetTarget::Unclear => return Ok("Tell me which one: /forget <id> (see /memory) or /forget all.".to_string()),
    };
    let scope = Scope::Own { chat_id: conv.chat_id, user_id };
    let label = what.label();
    Ok(if rows::erase_one(&db, id, Some(&scope)).await? {
        format!("Forgotten: {label}.")
    } else {
        format!("I have no memory {label} about you.")
    })
}
