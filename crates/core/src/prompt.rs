//! The system instruction, assembled fresh for every turn, in this order:
//!
//! 1. the situation: which message to answer, new conversation or not, reaction or not;
//! 2. the prompts bundled from `prompts/`: shared instructions, the persona, role prompts,
//!    with `{{name}}` template values filled in;
//! 3. the chat's current plan, if the agent set one;
//! 4. memory: curated notes first, then learned memories, cut to the memory budget;
//! 5. the current time in the configured time zone, and the chat's details;
//! 6. the summary of older conversation, if there is one;
//! 7. the situation again, so it is fresh in the model's attention.
//!
//! Gemini receives this as `systemInstruction`, never as a `system` role in `contents`.

use crate::config::HistoryFormat;
use crate::conversation::ChatKind;
use crate::gating::Trigger;
use crate::history::estimate_tokens;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

/// The prompt files, bundled at build time.
#[derive(Debug, Clone, Default)]
pub struct PromptLibrary {
    pub instructions: String,
    pub personas: BTreeMap<String, String>,
    pub roles: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Reaction {
    pub emoji: String,
    pub message_id: i64,
    pub by: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Situation {
    pub target_message_id: Option<i64>,
    pub new_session: bool,
    pub trigger: Trigger,
    pub reaction: Option<Reaction>,
    pub format: HistoryFormat,
    /// Older history was cut by the budget and no summary covers it yet.
    pub history_cut_without_summary: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatDetails {
    pub kind: ChatKind,
    pub title: Option<String>,
    pub member_count: Option<u32>,
    pub topic_id: Option<i64>,
}

pub struct PromptInput<'a> {
    pub situation: &'a Situation,
    pub library: &'a PromptLibrary,
    pub persona: &'a str,
    pub roles: &'a [String],
    pub values: &'a BTreeMap<String, String>,
    pub plan: Option<&'a str>,
    /// Operator-written notes: always shown, before learned memories.
    pub curated: &'a [String],
    /// Learned memories, best first.
    pub memories: &'a [String],
    pub memory_budget: usize,
    pub now: DateTime<Utc>,
    pub timezone: &'a str,
    pub chat: &'a ChatDetails,
    pub summary: Option<&'a str>,
}

/// Replaces `{{name}}` with values; unknown names are left as they are.
pub fn fill_template(text: &str, values: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                let key = after[..end].trim();
                match values.get(key) {
                    Some(v) => out.push_str(v),
                    None => out.push_str(&rest[start..start + 2 + end + 2]),
                }
                rest = &after[end + 2..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The local time line, with a real time-zone database (DST included).
pub fn local_time(now: DateTime<Utc>, timezone: &str) -> String {
    match timezone.parse::<chrono_tz::Tz>() {
        Ok(tz) => now.with_timezone(&tz).format("%A, %Y-%m-%d %H:%M (%Z, UTC%:z)").to_string(),
        Err(_) => format!("{} (UTC; unknown time zone {timezone:?})", now.format("%A, %Y-%m-%d %H:%M")),
    }
}

fn situation_text(s: &Situation) -> String {
    let mut lines = Vec::new();
    match (&s.reaction, s.target_message_id) {
        (Some(r), _) => lines.push(format!(
            "{} reacted {} to your message #{}. Respond if it calls for it (a short reply or a reaction), or do nothing.",
            r.by, r.emoji, r.message_id
        )),
        (None, Some(id)) => lines.push(format!("Answer message #{id}. Newer context may be in the history too.")),
        (None, None) => lines.push("Answer the latest messages.".to_string()),
    }
    if s.new_session {
        lines.push("This is the start of a new conversation.".to_string());
    }
    if s.history_cut_without_summary {
        lines.push("Older messages of this conversation are not shown (over the history budget).".to_string());
    }
    lines.push(match s.format {
        HistoryFormat::Structured => {
            "Each user message starts with a [meta] line; never repeat [meta] lines in your answers.".to_string()
        }
        HistoryFormat::Compact => {
            "The history is one line per message: #id Name#user_id → #reply_to: text. Never copy that prefix into answers."
                .to_string()
        }
    });
    lines.join("\n")
}

/// Assembles the system instruction.
pub fn system_instruction(p: &PromptInput<'_>) -> String {
    let mut sections: Vec<String> = Vec::new();
    let situation = situation_text(p.situation);
    sections.push(format!("## Situation\n{situation}"));

    let mut prompt = fill_template(p.library.instructions.trim(), p.values);
    let persona = p
        .library
        .personas
        .get(p.persona)
        .or_else(|| p.library.personas.get("default"))
        .map(|t| fill_template(t.trim(), p.values));
    if let Some(persona) = persona {
        prompt.push_str("\n\n");
        prompt.push_str(&persona);
    }
    for role in p.roles {
        if let Some(text) = p.library.roles.get(role) {
            prompt.push_str("\n\n");
            prompt.push_str(&fill_template(text.trim(), p.values));
        }
    }
    sections.push(prompt);

    if let Some(plan) = p.plan.filter(|t| !t.trim().is_empty()) {
        sections.push(format!("## Your current plan for this chat\n{}", plan.trim()));
    }

    let mut memory = Vec::new();
    let mut used = 0;
    for note in p.curated {
        used += estimate_tokens(note);
        memory.push(format!("- {note}"));
    }
    let mut dropped = 0;
    for m in p.memories {
        let cost = estimate_tokens(m) + 1;
        if used + cost > p.memory_budget {
            dropped += 1;
            continue;
        }
        used += cost;
        memory.push(format!("- {m}"));
    }
    if !memory.is_empty() {
        let mut text = format!("## What you remember\n{}", memory.join("\n"));
        if dropped > 0 {
            text.push_str(&format!("\n({dropped} more memories not shown; use search_memory to look them up.)"));
        }
        sections.push(text);
    }

    let mut chat = format!("## Now\nCurrent time: {}\n", local_time(p.now, p.timezone));
    match p.chat.kind {
        ChatKind::Private => chat.push_str("Chat: a private chat"),
        kind => {
            chat.push_str(&format!("Chat: a {} chat", kind.as_str()));
            if let Some(t) = &p.chat.title {
                chat.push_str(&format!(" titled \"{t}\""));
            }
            if let Some(n) = p.chat.member_count {
                chat.push_str(&format!(" with {n} members"));
            }
            if let Some(topic) = p.chat.topic_id {
                chat.push_str(&format!(", forum topic {topic}"));
            }
        }
    }
    sections.push(chat);

    if let Some(summary) = p.summary.filter(|s| !s.trim().is_empty()) {
        sections.push(format!("## Summary of the earlier conversation\n{}", summary.trim()));
    }
    sections.push(format!("## Situation (again)\n{situation}"));
    sections.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn templates_fill_known_values_only() {
        let v: BTreeMap<String, String> = [("bot_name".to_string(), "Edge".to_string())].into();
        assert_eq!(fill_template("I am {{bot_name}} ({{ bot_name }}) {{other}} {{", &v), "I am Edge (Edge) {{other}} {{");
    }

    #[test]
    fn time_zone_uses_dst() {
        let summer = Utc.with_ymd_and_hms(2026, 7, 1, 12, 0, 0).unwrap();
        let winter = Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0).unwrap();
        assert!(local_time(summer, "Europe/Berlin").contains("14:00 (CEST, UTC+02:00)"));
        assert!(local_time(winter, "Europe/Berlin").contains("13:00 (CET, UTC+01:00)"));
        assert!(local_time(winter, "Mars/Olympus").contains("unknown time zone"));
    }

    #[test]
    fn memory_respects_the_budget_and_curated_notes_come_first() {
        let lib = PromptLibrary { instructions: "Be {{bot_name}}.".into(), ..Default::default() };
        let values = [("bot_name".to_string(), "Edge".to_string())].into();
        let situation = Situation {
            target_message_id: Some(5),
            new_session: false,
            trigger: Trigger::Private,
            reaction: None,
            format: HistoryFormat::Structured,
            history_cut_without_summary: false,
        };
        let chat = ChatDetails { kind: ChatKind::Private, title: None, member_count: None, topic_id: None };
        let memories: Vec<String> = (0..50).map(|i| format!("memory number {i} with some words in it")).collect();
        let curated = vec!["Alice is the operator".to_string()];
        let text = system_instruction(&PromptInput {
            situation: &situation,
            library: &lib,
            persona: "default",
            roles: &[],
            values: &values,
            plan: None,
            curated: &curated,
            memories: &memories,
            memory_budget: 60,
            now: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
            timezone: "UTC",
            chat: &chat,
            summary: None,
        });
        assert!(text.starts_with("## Situation\nAnswer message #5."));
        assert!(text.contains("Be Edge."));
        let curated_at = text.find("Alice is the operator").unwrap();
        assert!(curated_at < text.find("memory number 0").unwrap());
        assert!(!text.contains("memory number 49"));
        assert!(text.contains("more memories not shown"));
        assert!(text.trim_end().ends_with("never repeat [meta] lines in your answers."));
    }
}
