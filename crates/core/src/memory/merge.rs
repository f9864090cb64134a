//! Merging an extraction into what is already remembered.
//!
//! Invariants:
//! - Merging is deterministic and idempotent: merging the same extraction twice changes
//!   nothing the second time (equal facts only refresh, equal episodes/commitments/aliases are
//!   recognised and skipped).
//! - A newer fact about the same entity and attribute supersedes the older one instead of
//!   duplicating it; nothing is deleted by consolidation.
//! - Ids the model names from outside the existing memories change nothing.

use super::schema::{Extraction, Kind, Memory};

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
    /// Who supplied it, when it is about a person (`authority::supplier`, set by the caller,
    /// which knows who wrote the messages it cites); `None`: unknown.
    pub supplied_by: Option<i64>,
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
    merge_facts(existing, x, &mut plan);
    merge_episodes(existing, x, &mut plan);
    merge_commitments(existing, x, &mut plan);
    update_commitments(existing, x, today, &mut plan);
    merge_aliases(existing, x, &mut plan);
    plan
}

/// Facts: a fact already remembered (same subject, same value) is refreshed when new messages
/// confirm it; a new value supersedes the live fact about the same subject.
fn merge_facts(existing: &[Memory], x: &Extraction, plan: &mut MergePlan) {
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
                        supplied_by: None,
                    });
                }
            }
        }
    }
}

/// Episodes not remembered yet (by their summary).
fn merge_episodes(existing: &[Memory], x: &Extraction, plan: &mut MergePlan) {
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
                supplied_by: None,
            });
        }
    }
}

/// Commitments not remembered yet (by their text), open.
fn merge_commitments(existing: &[Memory], x: &Extraction, plan: &mut MergePlan) {
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
                supplied_by: None,
            });
        }
    }
}

/// Status changes of open commitments the extraction names, and open commitments past their
/// due date (`today`, `YYYY-MM-DD`) expire.
fn update_commitments(existing: &[Memory], x: &Extraction, today: &str, plan: &mut MergePlan) {
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
}

/// Aliases not remembered yet (by the alias).
fn merge_aliases(existing: &[Memory], x: &Extraction, plan: &mut MergePlan) {
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
                supplied_by: None,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::render::render;
    use crate::memory::schema::*;

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
            supplied_by: Some(user),
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
                supplied_by: n.supplied_by,
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
}
