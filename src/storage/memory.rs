//! Memories, summaries and the search index: what consolidation writes and what a turn,
//! `search_memory`, `/memory` and `/forget` read, always within an `agent_core::scope::Scope`.

/// Columns of `memories` as `agent_core::memory::Memory`.
pub const MEMORY_COLUMNS: &str = "id, kind, chat_id, about_user_id, entity, attribute, value, topics, status, due,
    confidence, happened_on, superseded_by, updated_at, source_ids";
