//! Long-term memory: what consolidation extracts (facts, episodes, commitments, aliases), how
//! it merges into what is already remembered, how memories read in a prompt, and how recall
//! queries are built, and who may see which memories. Split by job: [`input`] (what extraction
//! reads), [`schema`], [`merge`](mod@merge), [`render`](mod@render), [`search`], [`scope`] (the
//! privacy scope every query over `memories` and `notes` takes its `WHERE` from).
//!
//! Invariants (INVARIANTS.md): "Memory privacy is one rule" ([`scope`]), "Outside words never
//! become memories" ([`input`]), "Only people seen in the conversation" ([`schema`]). Merging's
//! own rules are [`merge`](mod@merge)'s. Also: operator notes are not touched by consolidation.

pub mod input;
pub mod merge;
pub mod render;
pub mod scope;
pub mod schema;
pub mod search;
pub mod vector;

pub use input::*;
pub use merge::*;
pub use render::*;
pub use schema::*;
pub use search::*;
