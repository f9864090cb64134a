//! What consolidation asks for and what is stored: the extraction the model returns (facts,
//! episodes, commitments, aliases) and its JSON schemas, the memory kinds (the `CHECK` of
//! migration 0005), and a stored memory.
//!
//! Invariants (INVARIANTS.md): "Only people seen in the conversation"
//! (`Extraction::only_seen_subjects`).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// What the model returns from a consolidation call (`responseSchema` below).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Extraction {
    pub facts: Vec<ExtractedFact>,
    pub episodes: Vec<ExtractedEpisode>,
    pub commitments: Vec<ExtractedCommitment>,
    pub commitment_updates: Vec<CommitmentUpdate>,
    pub aliases: Vec<ExtractedAlias>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ExtractedFact {
    pub about_user_id: Option<i64>,
    pub entity: String,
    pub attribute: String,
    pub value: String,
    pub confidence: Option<f64>,
    pub source_message_ids: Vec<i64>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ExtractedEpisode {
    pub summary: String,
    pub topics: Vec<String>,
    /// `YYYY-MM-DD`.
    pub date: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ExtractedCommitment {
    /// `bot` (the bot promised) or `user`.
    pub by: String,
    pub user_id: Option<i64>,
    pub text: String,
    /// `YYYY-MM-DD`.
    pub due: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CommitmentUpdate {
    pub memory_id: i64,
    /// `done`, `cancelled` or `expired`.
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ExtractedAlias {
    pub alias: String,
    pub user_id: Option<i64>,
    pub name: String,
}

impl Extraction {
    /// The people the extraction names as subjects (facts, commitments, aliases), sorted.
    pub fn subject_ids(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self
            .facts
            .iter()
            .filter_map(|f| f.about_user_id)
            .chain(self.commitments.iter().filter_map(|c| c.user_id))
            .chain(self.aliases.iter().filter_map(|a| a.user_id))
            .collect();
        crate::order::sort(&mut ids);
        ids.dedup();
        ids
    }

    /// Only people seen in the conversation (`seen`: users with messages in it) may be the
    /// subject of a memory learned there: items naming anyone else are dropped (a model told
    /// "remember about user 42 …" must not plant text in user 42's private chat). Returns the
    /// extraction kept and how many items were dropped.
    pub fn only_seen_subjects(mut self, seen: &[i64]) -> (Extraction, usize) {
        let ok = |u: Option<i64>| u.is_none_or(|u| seen.contains(&u));
        let before = self.facts.len() + self.commitments.len() + self.aliases.len();
        self.facts.retain(|f| ok(f.about_user_id));
        self.commitments.retain(|c| ok(c.user_id));
        self.aliases.retain(|a| ok(a.user_id));
        let dropped = before - (self.facts.len() + self.commitments.len() + self.aliases.len());
        (self, dropped)
    }
}

/// The `responseSchema` (OpenAPI subset) of a consolidation call: JSON text in the wasm, far
/// smaller than the code `json!` builds it with.
pub fn extraction_schema() -> Value {
    serde_json::from_str(include_str!("extraction-schema.json")).expect("extraction-schema.json is valid JSON (tested)")
}

/// The `responseSchema` of a summary call.
pub fn summary_schema() -> Value {
    json!({"type": "OBJECT", "properties": {"summary": {"type": "STRING"}}, "required": ["summary"]})
}

/// The kinds of memory; `memories.kind` holds `as_str()` and the table's `CHECK` constraint
/// (migration 0005) allows exactly these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Fact,
    Episode,
    Commitment,
    Alias,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Fact, Kind::Episode, Kind::Commitment, Kind::Alias];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Fact => "fact",
            Kind::Episode => "episode",
            Kind::Commitment => "commitment",
            Kind::Alias => "alias",
        }
    }
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "fact" => Some(Kind::Fact),
            "episode" => Some(Kind::Episode),
            "commitment" => Some(Kind::Commitment),
            "alias" => Some(Kind::Alias),
            _ => None,
        }
    }
}

/// A stored memory (a row of `memories`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub id: i64,
    pub kind: Kind,
    pub chat_id: Option<i64>,
    pub about_user_id: Option<i64>,
    pub entity: Option<String>,
    pub attribute: Option<String>,
    pub value: String,
    pub topics: Option<String>,
    pub status: Option<String>,
    pub due: Option<String>,
    pub confidence: f64,
    pub happened_on: Option<String>,
    pub superseded_by: Option<i64>,
    pub updated_at: i64,
    /// JSON array of the message ids it came from.
    #[serde(default)]
    pub source_ids: Option<String>,
    /// Who supplied it, for a memory about a person (migration 0022; `core::access::authority`).
    #[serde(default)]
    pub supplied_by: Option<i64>,
}

impl Memory {
    pub(crate) fn sources(&self) -> Vec<i64> {
        self.source_ids.as_deref().and_then(|s| serde_json::from_str(s).ok()).unwrap_or_default()
    }
}

/// A new memory to insert.

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extraction_schema_text_is_whole() {
        let s = extraction_schema();
        let required: Vec<&str> = s["required"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
        assert_eq!(required, ["facts", "episodes", "commitments", "commitment_updates", "aliases"]);
        for r in required {
            assert_eq!(s["properties"][r]["type"], "ARRAY", "{r}");
            assert_eq!(s["properties"][r]["items"]["type"], "OBJECT", "{r}");
        }
        // What consolidation reads back is what the schema asks for.
        let e: Extraction = serde_json::from_value(serde_json::json!({"facts": [{"entity": "Alice", "attribute": "city", "value": "Oslo"}]})).unwrap();
        assert_eq!(e.facts.len(), 1);
    }

    #[test]
    fn the_kinds_match_the_sql_check_constraint() {
        let migration = include_str!("../../../../migrations/0005_memory_scope.sql");
        let list = Kind::ALL.iter().map(|k| format!("'{}'", k.as_str())).collect::<Vec<_>>().join(", ");
        assert!(migration.contains(&format!("CHECK (kind IN ({list}))")), "0005 must check kind IN ({list})");
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.as_str()), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), serde_json::Value::String(k.as_str().into()));
        }
        assert_eq!(Kind::parse("note"), None);
    }
}
