//! How memories read: in a turn's prompt and in `/memory`, and in the instructions of the
//! consolidation and summary calls (their text is in `prompts/memory/`, passed in).

use super::schema::{Kind, Memory};

/// The system instruction of a consolidation call: the prompt `prompts/memory/consolidate.md`
/// (`template`), today's date, and the existing memories with their ids so the model can
/// confirm, update or close them instead of repeating them.
pub fn consolidation_instruction(template: &str, existing: &[Memory], today: &str) -> String {
    let mut s = template.trim_end().to_string();
    s.push('\n');
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

/// The system instruction of a summary call: the prompt `prompts/memory/summary.md`
/// (`template`), and the running summary the older messages are folded into.
pub fn summary_instruction(template: &str, previous: Option<&str>) -> String {
    let mut s = template.trim_end().to_string();
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
        Kind::Fact => {
            let fact = format!("{}: {} = {}", who(m), m.attribute.as_deref().unwrap_or("?"), m.value);
            // What someone else said about the person reads as theirs, not the person's.
            match (m.about_user_id, m.supplied_by) {
                (Some(u), Some(by)) if by != u => format!("{fact} (said by user {by})"),
                _ => fact,
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    const CONSOLIDATE: &str = include_str!("../../../../prompts/memory/consolidate.md");
    const SUMMARY: &str = include_str!("../../../../prompts/memory/summary.md");

    #[test]
    fn the_consolidation_instruction_is_the_prompt_then_the_date_and_what_is_remembered() {
        let empty = consolidation_instruction(CONSOLIDATE, &[], "2026-11-23");
        assert_eq!(empty, format!("{}\nToday is 2026-11-23.\nAlready remembered: nothing yet.", CONSOLIDATE.trim_end()));
        let m = Memory {
            id: 4,
            kind: super::super::schema::Kind::Fact,
            chat_id: Some(1),
            about_user_id: Some(7),
            entity: Some("Alice".into()),
            attribute: Some("drink".into()),
            value: "tea".into(),
            topics: None,
            status: None,
            due: None,
            confidence: 0.8,
            happened_on: None,
            superseded_by: None,
            updated_at: 0,
            source_ids: None,
            supplied_by: Some(9),
        };
        assert_eq!(render(&m), "Alice (user 7): drink = tea (said by user 9)", "someone else's words about Alice are marked");
        assert_eq!(render(&Memory { supplied_by: Some(7), ..m.clone() }), "Alice (user 7): drink = tea");
        let some = consolidation_instruction(CONSOLIDATE, &[m.clone()], "2026-11-23");
        assert!(some.ends_with(&format!("Already remembered (id: memory):\n4: {}", render(&m))), "{some}");
        assert!(some.starts_with("You maintain the long-term memory"));
    }

    #[test]
    fn the_summary_instruction_extends_the_running_summary() {
        assert_eq!(summary_instruction(SUMMARY, None), SUMMARY.trim_end());
        assert_eq!(summary_instruction(SUMMARY, Some("  ")), SUMMARY.trim_end());
        let s = summary_instruction(SUMMARY, Some(" Bo moved. "));
        assert!(s.ends_with("\nThe summary so far, which the new summary must include and extend:\nBo moved."), "{s}");
    }
}
