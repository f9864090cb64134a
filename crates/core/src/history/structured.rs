//! The `structured` history format: Gemini `contents`, role `user` for everyone else and
//! `model` for the bot, each user message opened by its `[meta]` part, the bot's turns replayed
//! exactly as Gemini returned them with function responses synthesised from what became of
//! each action, consecutive turns of one role merged.
use super::message::{BotTurn, HistoryMessage, Role};
use super::quote::{escape_meta_lookalikes, username_char, write_quoted};
use crate::conversation::Part as MsgPart;
use crate::gemini::{Content, Part};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The `[meta]` line of a message in the structured format.
pub fn meta_line(m: &HistoryMessage) -> String {
    let mut out = String::with_capacity(96);
    let _ = write_meta(m, &mut out);
    out
}

pub(crate) fn write_meta(m: &HistoryMessage, out: &mut impl std::fmt::Write) -> std::fmt::Result {
    out.write_str("[meta]")?;
    if let Some(id) = m.message_id {
        write!(out, " message_id={id}")?;
    }
    if m.role == Role::Event {
        out.write_str(" event=true")?;
    }
    if let Some(u) = m.user_id {
        write!(out, " user_id={u}")?;
    }
    out.write_str(" name=")?;
    write_quoted(out, &m.name)?;
    if let Some(u) = m.username.as_deref().filter(|u| u.chars().any(username_char)) {
        out.write_str(" username=")?;
        for c in u.chars().filter(|c| username_char(*c)) {
            out.write_char(c)?;
        }
    }
    if let Some(r) = m.reply_to {
        write!(out, " reply_to_message_id={r}")?;
        if let Some(info) = &m.reply_info {
            if let Some(u) = info.user_id {
                write!(out, " reply_to_user_id={u}")?;
            }
            if let Some(n) = &info.name {
                out.write_str(" reply_to_name=")?;
                write_quoted(out, n)?;
            }
            if let Some(e) = &info.excerpt {
                out.write_str(" reply_excerpt=")?;
                write_quoted(out, e)?;
            }
        }
    }
    if let Some(f) = &m.forwarded_from {
        out.write_str(" forwarded_from=")?;
        write_quoted(out, f)?;
    }
    if m.edited {
        out.write_str(" edited=true")?;
    }
    Ok(())
}

pub(crate) fn message_parts(m: &HistoryMessage) -> Vec<Part> {
    m.parts
        .iter()
        .map(|p| match p {
            MsgPart::Text { text, .. } if !text.trim().is_empty() => Part::text(escape_meta_lookalikes(text)),
            other => Part::text(escape_meta_lookalikes(&other.render_compact())),
        })
        .filter(|p| p.text.as_deref().is_some_and(|t| !t.is_empty()))
        .collect()
}

/// Merges consecutive contents of the same role and makes sure the history starts with a
/// user turn and has no empty turn (shapes Gemini rejects otherwise).
pub fn normalize_contents(contents: Vec<Content>) -> Vec<Content> {
    let mut out: Vec<Content> = Vec::with_capacity(contents.len());
    for c in contents {
        if c.parts.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.role == c.role => last.parts.extend(c.parts),
            _ => out.push(c),
        }
    }
    if out.first().is_some_and(Content::is_model) {
        out.insert(0, Content::user(vec![Part::text("[earlier conversation omitted]")]));
    }
    out
}

/// Puts the turn context (`core::turn::prompt::turn_context`) last: as the final part of the last
/// user turn, or as a user turn of its own when the history ends otherwise (or is empty).
/// The history before it is unchanged, so the next turn's request repeats this one's prefix.
pub fn append_turn_context(contents: &mut Vec<Content>, turn_context: String) {
    let part = Part::text(turn_context);
    match contents.last_mut() {
        Some(last) if !last.is_model() => last.parts.push(part),
        _ => contents.push(Content::user(vec![part])),
    }
}

/// Synthesised function responses for a model content's calls that got none when the turn
/// ran (actions): what became of each, by call index.
pub(crate) fn responses_for(content: &Content, first_index: usize, outcomes: &BTreeMap<usize, Value>) -> Vec<Part> {
    content
        .function_calls()
        .enumerate()
        .map(|(i, call)| {
            let outcome = outcomes.get(&(first_index + i)).cloned().unwrap_or_else(|| json!({"ok": true}));
            Part::function_response(&call.name, call.id.clone(), outcome)
        })
        .collect()
}

/// The contents of a stored bot turn, ready to replay: every function call followed by its
/// responses.
pub fn replay_turn(turn: &BotTurn) -> Vec<Content> {
    let mut out = Vec::new();
    let mut call_index = 0;
    for (i, c) in turn.contents.iter().enumerate() {
        out.push(c.clone());
        if !c.is_model() {
            continue;
        }
        let calls = c.function_calls().count();
        let answered = turn
            .contents
            .get(i + 1)
            .is_some_and(|next| !next.is_model() && next.parts.iter().any(|p| p.function_response.is_some()));
        if calls > 0 && !answered {
            out.push(Content::user(responses_for(c, call_index, &turn.outcomes)));
        }
        call_index += calls;
    }
    out
}

/// Renders the structured history.
pub fn render_structured(msgs: &[HistoryMessage], turns: &BTreeMap<String, BotTurn>) -> Vec<Content> {
    render_structured_with_media(msgs, turns, &BTreeMap::new())
}

/// [`render_structured`], with the media a turn looks at (`media`, by message seq: see
/// `core::turn::media`) in their messages' own user content, after the `[meta]` part and the text.
pub fn render_structured_with_media(msgs: &[HistoryMessage], turns: &BTreeMap<String, BotTurn>, media: &BTreeMap<i64, Vec<Part>>) -> Vec<Content> {
    let mut contents = Vec::new();
    let mut replayed: BTreeSet<&str> = BTreeSet::new();
    for m in msgs {
        match m.role {
            Role::User | Role::Event => {
                let mut parts = vec![Part::text(meta_line(m))];
                parts.extend(message_parts(m));
                parts.extend(media.get(&m.seq).into_iter().flatten().cloned());
                contents.push(Content::user(parts));
            }
            Role::Bot => match m.turn_id.as_deref() {
                Some(id) if replayed.contains(id) => {}
                Some(id) if turns.get(id).is_some_and(|t| !t.contents.is_empty()) => {
                    replayed.insert(id);
                    contents.extend(replay_turn(&turns[id]));
                }
                _ => {
                    let text = m.compact_text();
                    if !text.trim().is_empty() {
                        contents.push(Content::model(vec![Part::text(text)]));
                    }
                }
            },
        }
    }
    normalize_contents(contents)
}
