//! Long-term memory: what consolidation extracts (facts, episodes, commitments, aliases), how
//! it merges into what is already remembered, how memories read in a prompt, and how recall
//! queries are built, and who may see which memories. Split by job: [`input`] (what extraction
//! reads), [`schema`], [`merge`], [`render`], [`search`], [`scope`] (the privacy scope every
//! query over `memories` and `notes` takes its `WHERE` from).
//!
//! Invariants:
//! - Merging is deterministic and idempotent: merging the same extraction twice changes
//!   nothing the second time (equal facts only refresh, equal episodes/commitments/aliases are
//!   recognised and skipped).
//! - A newer fact about the same entity and attribute supersedes the older one instead of
//!   duplicating it; nothing is deleted by consolidation.
//! - Operator notes are not touched by consolidation.
//! - Forwarded text and documents' contents never reach the extraction call ([`input`]).

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
