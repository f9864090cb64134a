//! The `compact` history format: one plain-text user turn, a line per message, ids only on
//! the lines the model may act on ([`COMPACT_RECENT_IDS`]), ending with the marker of the
//! message to answer.
use super::message::{HistoryMessage, Role};
use super::quote::{compact_name, escape_meta_lookalikes, is_line_break, quote};
use crate::gemini::{Content, Part};
use std::collections::{BTreeMap, BTreeSet};

/// In a turn's compact history, the lines that carry their message id are the messages since
/// the bot last spoke (what the turn answers), at most this many of the last, with the message
/// to answer and the messages whose media the turn attaches, wherever they are: the messages
/// the model may reply to or react to. Every other line names who wrote it and whom it
/// answers, and nothing else: ids are a token a digit in Gemini's tokenizer, and they were a
/// third of what compact history spent. (The ids move with the conversation, so a line that
/// loses its id ends the prefix a request shares with the one before: they are kept to the
/// end of the history, where the new lines are anyway.)
pub const COMPACT_RECENT_IDS: usize = 10;

/// Renders the compact history: one user turn, ending with the marker of the message to answer.
pub fn render_compact(msgs: &[HistoryMessage], target: Option<i64>) -> Vec<Content> {
    render_compact_with_media(msgs, target, &BTreeMap::new())
}

/// [`render_compact`], with the media a turn looks at (by message seq) after the text, in
/// message order (each item's parts name its message, whose line shows its id).
pub fn render_compact_with_media(msgs: &[HistoryMessage], target: Option<i64>, media: &BTreeMap<i64, Vec<Part>>) -> Vec<Content> {
    // The messages since the bot last spoke (what this turn answers), at most the last few.
    let answered = msgs.iter().rposition(|m| m.role == Role::Bot).map_or(0, |i| i + 1);
    let recent = msgs.len().saturating_sub(COMPACT_RECENT_IDS).max(answered);
    // A picture the bot sent keeps its id too: "make the second one brighter" edits it by id.
    let bot_photo = |m: &HistoryMessage| {
        m.role == Role::Bot && m.parts.iter().any(|p| matches!(p, crate::conversation::Part::Media { kind, .. } if kind == "photo"))
    };
    let show_id = |i: usize, m: &HistoryMessage| i >= recent || (target.is_some() && m.message_id == target) || media.contains_key(&m.seq) || bot_photo(m);
    let mut text = compact_lines_with(msgs, show_id);
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(&answer_marker(target));
    let mut parts = vec![Part::text(text)];
    parts.extend(media.values().flatten().cloned());
    vec![Content::user(parts)]
}

/// The last line of compact history: which message to answer.
pub fn answer_marker(target: Option<i64>) -> String {
    match target {
        Some(t) => format!("→ Answer #{t}"),
        None => "→ Answer the latest messages".to_string(),
    }
}

/// The compact lines of messages, one per message, every line with its message id (what
/// consolidation reads: the memories it extracts cite the ids).
pub fn compact_lines(msgs: &[HistoryMessage]) -> String {
    compact_lines_with(msgs, |_, _| true)
}

/// The compact lines of messages: `#id Name#user_id → Author: text`, the id only where
/// `show_id(index, message)` says, a person's user id at the first line of their name, the
/// arrow naming the author of the message replied to (described when it is not among the lines).
pub fn compact_lines_with(msgs: &[HistoryMessage], show_id: impl Fn(usize, &HistoryMessage) -> bool) -> String {
    let mut lines = Vec::with_capacity(msgs.len());
    let mut named: BTreeMap<&str, Option<i64>> = BTreeMap::new();
    let by_id: BTreeMap<i64, &HistoryMessage> = crate::order::map_of(msgs.iter().filter_map(|m| Some((m.message_id?, m))));
    // Names more than one person uses in view: an arrow to one of them adds the user id.
    let mut people: BTreeMap<&str, BTreeSet<Option<i64>>> = BTreeMap::new();
    for m in msgs.iter().filter(|m| m.role == Role::User) {
        people.entry(m.name.as_str()).or_default().insert(m.user_id);
    }
    for (i, m) in msgs.iter().enumerate() {
        let id = if show_id(i, m) { m.message_id.map_or_else(|| "#- ".to_string(), |id| format!("#{id} ")) } else { String::new() };
        // Every line break inside a message continues an indented line: only the renderer
        // starts a line. (\r\n counts as one break.)
        let raw = m.compact_text().replace("\r\n", "\n");
        let text = if m.role == Role::Bot { raw } else { escape_meta_lookalikes(&raw) };
        let text = text.split(is_line_break).collect::<Vec<_>>().join("\n  ");
        let line = match m.role {
            Role::Bot => format!("{id}bot: {text}"),
            Role::Event => format!("{id}{text}"),
            Role::User => {
                // A person's id is written the first time their name appears.
                let name = compact_name(&m.name);
                let who = match named.get(m.name.as_str()) {
                    Some(uid) if *uid == m.user_id => name,
                    _ => {
                        named.insert(&m.name, m.user_id);
                        match m.user_id {
                            Some(uid) => format!("{name}#{uid}"),
                            None => name,
                        }
                    }
                };
                let mut head = format!("{id}{who}");
                if let Some(r) = m.reply_to {
                    head.push_str(" → ");
                    match by_id.get(&r) {
                        Some(to) => head.push_str(&author(to, &people)),
                        // A message out of view is described: who wrote it and how it began.
                        None => {
                            let a = m.reply_info.as_ref().and_then(|info| info.name.as_deref()).map(compact_name);
                            let e = m.reply_info.as_ref().and_then(|info| info.excerpt.as_deref()).map(quote);
                            match (a, e) {
                                (Some(a), Some(e)) => head.push_str(&format!("{a} ({e})")),
                                (Some(a), None) => head.push_str(&a),
                                (None, Some(e)) => head.push_str(&format!("({e})")),
                                (None, None) => head.push_str(&format!("#{r}")),
                            }
                        }
                    }
                }
                if let Some(f) = &m.forwarded_from {
                    head.push_str(&format!(" (fwd {})", compact_name(f)));
                }
                if m.edited {
                    head.push_str(" (edited)");
                }
                format!("{head}: {text}")
            }
        };
        lines.push(line);
    }
    lines.join("\n")
}

/// Who wrote a message in view, as an arrow names them: `bot`, the person's name (with their
/// user id when another person in view has the same name), or the id of a service message.
pub(crate) fn author(m: &HistoryMessage, people: &BTreeMap<&str, BTreeSet<Option<i64>>>) -> String {
    match m.role {
        Role::Bot => "bot".to_string(),
        Role::Event => m.message_id.map_or_else(|| "#-".to_string(), |id| format!("#{id}")),
        Role::User => {
            let name = compact_name(&m.name);
            match m.user_id {
                Some(uid) if people.get(m.name.as_str()).is_some_and(|p| p.len() > 1) => format!("{name}#{uid}"),
                _ => name,
            }
        }
    }
}
