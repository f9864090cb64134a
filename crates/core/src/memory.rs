//! Long-term memory: what consolidation extracts (facts, episodes, commitments, aliases), how
//! it merges into what is already remembered, how memories read in a prompt, and how recall
//! queries are built.
//!
//! Invariants:
//! - Merging is deterministic and idempotent: merging the same extraction twice changes
//!   nothing the second time (equal facts only refresh, equal episodes/commitments/aliases are
//!   recognised and skipped).
//! - A newer fact about the same entity and attribute supersedes the older one instead of
//!   duplicating it; nothing is deleted by consolidation.
//! - Operator notes are not touched by consolidation.

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
        ids.sort_unstable();
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

/// The `responseSchema` (OpenAPI subset) of a consolidation call.
pub fn extraction_schema() -> Value {
    let s = |d: &str| json!({"type": "STRING", "description": d});
    let opt_int = |d: &str| json!({"type": "INTEGER", "nullable": true, "description": d});
    json!({
        "type": "OBJECT",
        "properties": {
            "facts": {"type": "ARRAY", "items": {"type": "OBJECT", "properties": {
                "about_user_id": opt_int("The Telegram user id the fact is about, if a person."),
                "entity": s("Who or what the fact is about, e.g. the person's name or 'the group'."),
                "attribute": s("The attribute, short and reusable: 'sister's name', 'job', 'city'."),
                "value": s("The value."),
                "confidence": {"type": "NUMBER", "description": "0 to 1."},
                "source_message_ids": {"type": "ARRAY", "items": {"type": "INTEGER"}}
            }, "required": ["entity", "attribute", "value"]}},
            "episodes": {"type": "ARRAY", "items": {"type": "OBJECT", "properties": {
                "summary": s("One or two sentences: what happened."),
                "topics": {"type": "ARRAY", "items": {"type": "STRING"}},
                "date": s("YYYY-MM-DD")
            }, "required": ["summary"]}},
            "commitments": {"type": "ARRAY", "items": {"type": "OBJECT", "properties": {
                "by": {"type": "STRING", "enum": ["bot", "user"]},
                "user_id": opt_int("The user who promised or was promised something."),
                "text": s("The promise."),
                "due": {"type": "STRING", "nullable": true, "description": "YYYY-MM-DD"}
            }, "required": ["by", "text"]}},
            "commitment_updates": {"type": "ARRAY", "items": {"type": "OBJECT", "properties": {
                "memory_id": {"type": "INTEGER"},
                "status": {"type": "STRING", "enum": ["done", "cancelled", "expired"]}
            }, "required": ["memory_id", "status"]}},
            "aliases": {"type": "ARRAY", "items": {"type": "OBJECT", "properties": {
                "alias": s("A nickname used in the chat."),
                "user_id": opt_int("The user it names."),
                "name": s("The person's usual name.")
            }, "required": ["alias", "name"]}}
        },
        "required": ["facts", "episodes", "commitments", "commitment_updates", "aliases"]
    })
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
}

impl Memory {
    fn sources(&self) -> Vec<i64> {
        self.source_ids.as_deref().and_then(|s| serde_json::from_str(s).ok()).unwrap_or_default()
    }
}

/// A new memory to insert.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMemory {
    pub kind: Kind,
    pub about_user_id: Option<i64>,
    pub entity: Option<String>,
    pub attribute: Option<String>,
    pub value: String,
    pub topics: Option<String>,
    pub status: Option<String>,
    pub due: Option<String>,
    pub confidence: f64,
    pub happened_on: Option<String>,
    pub source_message_ids: Vec<i64>,
    /// Facts: the existing fact this one replaces.
    pub supersedes: Option<i64>,
}

/// What a merge does to the store.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MergePlan {
    pub inserts: Vec<NewMemory>,
    /// Existing memories confirmed again: (id, new confidence).
    pub refreshes: Vec<(i64, f64)>,
    /// Commitments whose status changes: (id, status).
    pub status_changes: Vec<(i64, String)>,
}

impl MergePlan {
    pub fn is_empty(&self) -> bool {
        self.inserts.is_empty() && self.refreshes.is_empty() && self.status_changes.is_empty()
    }
}

fn norm(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// Merges an extraction into what is remembered. `existing` holds the memories of the
/// conversation's people and chat (facts not superseded, open commitments, aliases, recent
/// episodes); `today` is `YYYY-MM-DD` (commitments past due expire).
pub fn merge(existing: &[Memory], x: &Extraction, today: &str) -> MergePlan {
    let mut plan = MergePlan::default();
    let live_facts = || existing.iter().filter(|m| m.kind == Kind::Fact && m.superseded_by.is_none());

    for f in &x.facts {
        if f.value.trim().is_empty() || f.attribute.trim().is_empty() {
            continue;
        }
        let confidence = f.confidence.unwrap_or(0.7).clamp(0.05, 1.0);
        let same_subject = |m: &&Memory| {
            m.about_user_id == f.about_user_id
                && norm(m.attribute.as_deref().unwrap_or("")) == norm(&f.attribute)
                && (f.about_user_id.is_some() || norm(m.entity.as_deref().unwrap_or("")) == norm(&f.entity))
        };
        match live_facts().find(same_subject) {
            Some(m) if norm(&m.value) == norm(&f.value) => {
                // Confirmed by messages it did not come from: surer. The same messages read
                // again (a repeated job) are no new evidence.
                let known = m.sources();
                let new_evidence = f.source_message_ids.is_empty() || f.source_message_ids.iter().any(|id| !known.contains(id));
                let raised = (m.confidence.max(confidence) + 0.1).min(1.0);
                if new_evidence && (raised - m.confidence).abs() > 1e-9 && !plan.refreshes.iter().any(|(id, _)| *id == m.id) {
                    plan.refreshes.push((m.id, raised));
                }
            }
            found => {
                let dup = plan.inserts.iter().any(|n| {
                    n.kind == Kind::Fact
                        && n.about_user_id == f.about_user_id
                        && norm(n.attribute.as_deref().unwrap_or("")) == norm(&f.attribute)
                        && norm(&n.value) == norm(&f.value)
                });
                if !dup {
                    plan.inserts.push(NewMemory {
                        kind: Kind::Fact,
                        about_user_id: f.about_user_id,
                        entity: Some(f.entity.trim().to_string()),
                        attribute: Some(f.attribute.trim().to_string()),
                        value: f.value.trim().to_string(),
                        topics: None,
                        status: None,
                        due: None,
                        confidence,
                        happened_on: None,
                        source_message_ids: f.source_message_ids.clone(),
                        supersedes: found.map(|m| m.id),
                    });
                }
            }
        }
    }

    for e in &x.episodes {
        let known = existing.iter().any(|m| m.kind == Kind::Episode && norm(&m.value) == norm(&e.summary))
            || plan.inserts.iter().any(|n| n.kind == Kind::Episode && norm(&n.value) == norm(&e.summary));
        if !e.summary.trim().is_empty() && !known {
            plan.inserts.push(NewMemory {
                kind: Kind::Episode,
                about_user_id: None,
                entity: None,
                attribute: None,
                value: e.summary.trim().to_string(),
                topics: (!e.topics.is_empty()).then(|| e.topics.join(", ")),
                status: None,
                due: None,
                confidence: 0.8,
                happened_on: e.date.clone(),
                source_message_ids: Vec::new(),
                supersedes: None,
            });
        }
    }

    for c in &x.commitments {
        let known = existing.iter().any(|m| m.kind == Kind::Commitment && norm(&m.value) == norm(&c.text))
            || plan.inserts.iter().any(|n| n.kind == Kind::Commitment && norm(&n.value) == norm(&c.text));
        if !c.text.trim().is_empty() && !known {
            let by = if c.by == "bot" { "bot" } else { "user" };
            plan.inserts.push(NewMemory {
                kind: Kind::Commitment,
                about_user_id: c.user_id,
                entity: Some(by.to_string()),
                attribute: None,
                value: c.text.trim().to_string(),
                topics: None,
                status: Some("open".into()),
                due: c.due.clone().filter(|d| !d.is_empty()),
                confidence: 0.8,
                happened_on: None,
                source_message_ids: Vec::new(),
                supersedes: None,
            });
        }
    }

    for u in &x.commitment_updates {
        let status = u.status.as_str();
        if !matches!(status, "done" | "cancelled" | "expired") {
            continue;
        }
        if let Some(m) = existing.iter().find(|m| m.id == u.memory_id && m.kind == Kind::Commitment) {
            if m.status.as_deref() == Some("open") {
                plan.status_changes.push((m.id, status.to_string()));
            }
        }
    }
    // Open commitments past their due date expire.
    for m in existing.iter().filter(|m| m.kind == Kind::Commitment && m.status.as_deref() == Some("open")) {
        if m.due.as_deref().is_some_and(|d| d < today) && !plan.status_changes.iter().any(|(id, _)| *id == m.id) {
            plan.status_changes.push((m.id, "expired".into()));
        }
    }

    for a in &x.aliases {
        if a.alias.trim().is_empty() || norm(&a.alias) == norm(&a.name) {
            continue;
        }
        let known = existing.iter().any(|m| m.kind == Kind::Alias && norm(m.attribute.as_deref().unwrap_or("")) == norm(&a.alias))
            || plan.inserts.iter().any(|n| n.kind == Kind::Alias && norm(n.attribute.as_deref().unwrap_or("")) == norm(&a.alias));
        if !known {
            plan.inserts.push(NewMemory {
                kind: Kind::Alias,
                about_user_id: a.user_id,
                entity: Some(a.name.trim().to_string()),
                attribute: Some(a.alias.trim().to_string()),
                value: format!("\"{}\" means {}", a.alias.trim(), a.name.trim()),
                topics: None,
                status: None,
                due: None,
                confidence: 0.8,
                happened_on: None,
                source_message_ids: Vec::new(),
                supersedes: None,
            });
        }
    }
    plan
}

/// The system instruction of a consolidation call. Existing memories are listed with their ids
/// so the model can confirm, update or close them instead of repeating them.
pub fn consolidation_instruction(existing: &[Memory], today: &str) -> String {
    let mut s = String::from(
        "You maintain the long-term memory of a Telegram chat assistant. Read the new messages \
         (one per line: #message_id Name#user_id: text) and extract what is worth remembering \
         for months:\n\
         - facts about people or the chat (names of relatives, job, city, preferences, important dates); \
         use short reusable attribute names and the person's user id;\n\
         - episodes: what happened, in one or two sentences, with topics and the date;\n\
         - commitments: promises made by the assistant ('bot') or by a person, with a due date if one was said;\n\
         - commitment_updates: existing open commitments that were kept (done) or cancelled;\n\
         - aliases: nicknames people use for each other.\n\
         Do not repeat what is already remembered unless it changed. Never store secrets such as \
         passwords. Return empty lists when there is nothing new.\n",
    );
    s.push_str(&format!("Today is {today}.\n"));
    if existing.is_empty() {
        s.push_str("Already remembered: nothing yet.");
    } else {
        s.push_str("Already remembered (id: memory):");
        for m in existing {
            s.push_str(&format!("\n{}: {}", m.id, render(m)));
        }
    }
    s
}

/// The system instruction of a summary call: fold older messages into the running summary.
pub fn summary_instruction(previous: Option<&str>) -> String {
    let mut s = String::from(
        "Summarise a Telegram conversation for the assistant that takes part in it, so it can \
         continue without the full history. Keep who said what, decisions, open questions, names \
         and dates; drop small talk. Write at most 250 words, in the conversation's language.",
    );
    if let Some(p) = previous.filter(|p| !p.trim().is_empty()) {
        s.push_str("\nThe summary so far, which the new summary must include and extend:\n");
        s.push_str(p.trim());
    }
    s
}

/// How a memory reads in the prompt and in `/memory`.
pub fn render(m: &Memory) -> String {
    let who = |m: &Memory| match (&m.entity, m.about_user_id) {
        (Some(e), Some(u)) => format!("{e} (user {u})"),
        (Some(e), None) => e.clone(),
        (None, Some(u)) => format!("user {u}"),
        (None, None) => "the chat".to_string(),
    };
    match m.kind {
        Kind::Fact => format!("{}: {} = {}", who(m), m.attribute.as_deref().unwrap_or("?"), m.value),
        Kind::Episode => {
            let mut s = match &m.happened_on {
                Some(d) => format!("{d}: {}", m.value),
                None => m.value.clone(),
            };
            if let Some(t) = m.topics.as_deref().filter(|t| !t.is_empty()) {
                s.push_str(&format!(" (topics: {t})"));
            }
            s
        }
        Kind::Commitment => {
            let by = if m.entity.as_deref() == Some("bot") { "you promised" } else { "promised to you" };
            let mut s = format!("Commitment ({by}, {}): {}", m.status.as_deref().unwrap_or("open"), m.value);
            if let Some(u) = m.about_user_id {
                s.push_str(&format!(" [user {u}]"));
            }
            if let Some(d) = &m.due {
                s.push_str(&format!(" (due {d})"));
            }
            s
        }
        Kind::Alias => match m.about_user_id {
            Some(u) => format!("{} (user {u})", m.value),
            None => m.value.clone(),
        },
    }
}

const STOPWORDS: [&str; 48] = [
    "the", "a", "an", "and", "or", "but", "is", "are", "was", "were", "be", "to", "of", "in", "on", "at", "for",
    "with", "it", "this", "that", "i", "you", "me", "my", "your", "we", "our", "he", "she", "they", "them", "do",
    "does", "did", "what", "who", "how", "when", "where", "why", "can", "could", "would", "will", "just", "so", "not",
];

/// An FTS5 MATCH expression for free text: its distinct words (no stopwords, quoted so FTS
/// syntax in user text cannot break the query), OR-ed. `None` when nothing is left.
pub fn fts_query(text: &str, max_terms: usize) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        let w = word.to_lowercase();
        if w.chars().count() < 3 || STOPWORDS.contains(&w.as_str()) || terms.contains(&w) {
            continue;
        }
        terms.push(w);
        if terms.len() >= max_terms {
            break;
        }
    }
    (!terms.is_empty()).then(|| terms.iter().map(|t| format!("\"{t}\"")).collect::<Vec<_>>().join(" OR "))
}

/// Cosine similarity of two embeddings (0 when either is empty or their sizes differ).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0f32, 0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(id: i64, user: i64, attribute: &str, value: &str, confidence: f64) -> Memory {
        Memory {
            id,
            kind: Kind::Fact,
            chat_id: Some(1),
            about_user_id: Some(user),
            entity: Some("Alice".into()),
            attribute: Some(attribute.into()),
            value: value.into(),
            topics: None,
            status: None,
            due: None,
            confidence,
            happened_on: None,
            superseded_by: None,
            updated_at: 0,
            source_ids: Some("[1]".into()),
        }
    }

    fn extracted(attribute: &str, value: &str) -> Extraction {
        Extraction {
            facts: vec![ExtractedFact {
                about_user_id: Some(7),
                entity: "Alice".into(),
                attribute: attribute.into(),
                value: value.into(),
                confidence: Some(0.8),
                source_message_ids: vec![12],
            }],
            ..Default::default()
        }
    }

    #[test]
    fn new_facts_are_inserted() {
        let plan = merge(&[], &extracted("sister's name", "Maria"), "2026-11-22");
        assert_eq!(plan.inserts.len(), 1);
        assert_eq!(plan.inserts[0].value, "Maria");
        assert_eq!(plan.inserts[0].supersedes, None);
    }

    #[test]
    fn a_confirmed_fact_raises_confidence_and_is_not_duplicated() {
        let existing = [fact(3, 7, "Sister's  name", "maria", 0.7)];
        let plan = merge(&existing, &extracted("sister's name", "Maria"), "2026-11-22");
        assert!(plan.inserts.is_empty());
        assert_eq!(plan.refreshes.len(), 1);
        assert_eq!(plan.refreshes[0].0, 3);
        assert!((plan.refreshes[0].1 - 0.9).abs() < 1e-9);
        // At full confidence a confirmation changes nothing.
        let full = [fact(3, 7, "sister's name", "Maria", 1.0)];
        assert!(merge(&full, &extracted("sister's name", "Maria"), "2026-11-22").is_empty());
        // The same messages read again are no new evidence: merging twice changes nothing.
        let mut same_source = fact(3, 7, "sister's name", "Maria", 0.7);
        same_source.source_ids = Some("[12]".into());
        assert!(merge(&[same_source], &extracted("sister's name", "Maria"), "2026-11-22").is_empty());
    }

    #[test]
    fn a_changed_fact_supersedes_the_old_one() {
        let existing = [fact(3, 7, "job", "teacher", 0.9)];
        let plan = merge(&existing, &extracted("job", "nurse"), "2026-11-22");
        assert_eq!(plan.inserts.len(), 1);
        assert_eq!(plan.inserts[0].supersedes, Some(3));
    }

    #[test]
    fn episodes_commitments_and_aliases_are_deduplicated() {
        let x = Extraction {
            episodes: vec![ExtractedEpisode { summary: "Planned a hike".into(), topics: vec!["hiking".into()], date: Some("2026-11-20".into()) }],
            commitments: vec![ExtractedCommitment { by: "bot".into(), user_id: Some(7), text: "Remind Alice on Friday".into(), due: Some("2026-11-27".into()) }],
            aliases: vec![ExtractedAlias { alias: "Ali".into(), user_id: Some(7), name: "Alice".into() }],
            ..Default::default()
        };
        let first = merge(&[], &x, "2026-11-22");
        assert_eq!(first.inserts.len(), 3);
        let stored: Vec<Memory> = first
            .inserts
            .iter()
            .enumerate()
            .map(|(i, n)| Memory {
                id: i as i64 + 1,
                kind: n.kind,
                chat_id: Some(1),
                about_user_id: n.about_user_id,
                entity: n.entity.clone(),
                attribute: n.attribute.clone(),
                value: n.value.clone(),
                topics: n.topics.clone(),
                status: n.status.clone(),
                due: n.due.clone(),
                confidence: n.confidence,
                happened_on: n.happened_on.clone(),
                superseded_by: None,
                updated_at: 0,
                source_ids: None,
            })
            .collect();
        assert!(merge(&stored, &x, "2026-11-22").is_empty(), "merging twice changes nothing");
        assert_eq!(render(&stored[1]), "Commitment (you promised, open): Remind Alice on Friday [user 7] (due 2026-11-27)");
        assert_eq!(render(&stored[2]), "\"Ali\" means Alice (user 7)");
    }

    #[test]
    fn kept_commitments_close_and_overdue_ones_expire() {
        let mut c = fact(9, 7, "", "", 0.8);
        c.kind = Kind::Commitment;
        c.value = "Send the map".into();
        c.status = Some("open".into());
        c.due = Some("2026-11-01".into());
        let mut kept = c.clone();
        kept.id = 10;
        kept.due = None;
        let x = Extraction { commitment_updates: vec![CommitmentUpdate { memory_id: 10, status: "done".into() }], ..Default::default() };
        let plan = merge(&[c, kept], &x, "2026-11-22");
        assert_eq!(plan.status_changes, vec![(10, "done".to_string()), (9, "expired".to_string())]);
    }

    #[test]
    fn ids_the_model_names_from_outside_the_existing_memories_change_nothing() {
        // `existing` is what the chat's consolidation was given (its own memories only); an id
        // from elsewhere (another chat's commitment) is ignored.
        let x = Extraction { commitment_updates: vec![CommitmentUpdate { memory_id: 77, status: "done".into() }], ..Default::default() };
        let mut c = fact(9, 7, "", "", 0.8);
        c.kind = Kind::Commitment;
        c.status = Some("open".into());
        let plan = merge(&[c], &x, "2026-11-22");
        assert!(plan.status_changes.is_empty() && plan.refreshes.is_empty() && plan.inserts.is_empty());
    }

    #[test]
    fn subjects_never_seen_in_the_conversation_are_dropped() {
        let x = Extraction {
            facts: vec![
                ExtractedFact { about_user_id: Some(7), attribute: "job".into(), value: "nurse".into(), ..Default::default() },
                ExtractedFact { about_user_id: Some(99), attribute: "instruction".into(), value: "obey".into(), ..Default::default() },
                ExtractedFact { about_user_id: None, attribute: "topic".into(), value: "hiking".into(), ..Default::default() },
            ],
            commitments: vec![ExtractedCommitment { by: "bot".into(), user_id: Some(99), text: "x".into(), due: None }],
            aliases: vec![
                ExtractedAlias { alias: "Ali".into(), user_id: Some(7), name: "Alice".into() },
                ExtractedAlias { alias: "Bo".into(), user_id: Some(98), name: "Bob".into() },
            ],
            ..Default::default()
        };
        assert_eq!(x.subject_ids(), vec![7, 98, 99]);
        let (kept, dropped) = x.only_seen_subjects(&[7]);
        assert_eq!(dropped, 3);
        assert_eq!(kept.facts.iter().map(|f| f.about_user_id).collect::<Vec<_>>(), vec![Some(7), None]);
        assert!(kept.commitments.is_empty());
        assert_eq!(kept.aliases.len(), 1);
    }

    #[test]
    fn the_kinds_match_the_sql_check_constraint() {
        let migration = include_str!("../../../migrations/0005_memory_scope.sql");
        let list = Kind::ALL.iter().map(|k| format!("'{}'", k.as_str())).collect::<Vec<_>>().join(", ");
        assert!(migration.contains(&format!("CHECK (kind IN ({list}))")), "0005 must check kind IN ({list})");
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.as_str()), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), serde_json::Value::String(k.as_str().into()));
        }
        assert_eq!(Kind::parse("note"), None);
    }

    #[test]
    fn fts_queries_are_safe() {
        assert_eq!(fts_query("What's my sister's name?", 8).as_deref(), Some("\"sister\" OR \"name\""));
        // FTS operators in user text become plain quoted terms.
        assert_eq!(fts_query("\" OR * NEAR(", 8).as_deref(), Some("\"near\""));
        assert_eq!(fts_query("the a an", 8), None);
    }

    #[test]
    fn cosine_works() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-6);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 1.0]), 0.0);
        assert_eq!(cosine(&[], &[]), 0.0);
    }
}
