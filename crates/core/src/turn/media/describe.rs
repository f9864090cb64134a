//! Media described once per `file_unique_id` within a budget: which items to describe
//! ([`to_describe`], [`undescribed`]), the description request and its answer, and the
//! descriptions and transcripts put into history ([`annotate`]).
use super::inline::{Seen, Treatment, Wanted};
use crate::conversation::Part as MsgPart;
use crate::gemini::{Content, GenerateContentRequest, GenerationConfig, Part};
use crate::history::{HistoryMessage, Role};
use serde::Deserialize;
use serde_json::json;

/// A stored description (a row of `media`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Described {
    pub file_unique_id: String,
    pub status: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub transcript: Option<String>,
}

/// The description keys of the media in `messages` (for reading what is known of them).
pub fn unique_ids(messages: &[HistoryMessage]) -> Vec<String> {
    let mut ids: Vec<String> = messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            MsgPart::Media { file_unique_id: Some(u), .. } => Some(u.clone()),
            _ => None,
        })
        .collect();
    crate::order::sort(&mut ids);
    ids.dedup();
    ids
}

/// Puts what is known of each media item into its part's detail, so both history formats show
/// it instead of a bare placeholder: `photo: 720x1280 — a tabby cat on a windowsill`, and for
/// speech `… — said: "…"`.
pub fn annotate(messages: &mut [HistoryMessage], known: &[Described]) {
    for m in messages.iter_mut() {
        for p in m.parts.iter_mut() {
            let MsgPart::Media { detail, file_unique_id: Some(u), .. } = p else { continue };
            let Some(d) = known.iter().find(|d| &d.file_unique_id == u && d.status == "ok") else { continue };
            let mut said = d.description.clone().unwrap_or_default().trim().to_string();
            if let Some(t) = d.transcript.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
                if !said.is_empty() {
                    said.push_str("; ");
                }
                said.push_str(&format!("said: \"{t}\""));
            }
            if said.is_empty() {
                continue;
            }
            *detail = if detail.is_empty() { said } else { format!("{detail} — {said}") };
        }
    }
}

/// The items a turn has described: viewed ones (their bytes are here; for a sticker, its
/// thumbnail stands for it) whose key has no description yet, each key once, at most `budget`.
pub fn to_describe(items: &[(Wanted, Seen)], known: &[Described], budget: usize) -> Vec<usize> {
    let mut keys: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for (i, (w, seen)) in items.iter().enumerate() {
        let Some(key) = w.unique_id.as_deref() else { continue };
        let viewed = matches!(seen, Seen::Inline { .. }) || (w.kind == "sticker" && matches!(seen, Seen::Thumbnail { .. }));
        if !viewed || known.iter().any(|d| d.file_unique_id == key) || keys.contains(&key) {
            continue;
        }
        if out.len() >= budget {
            break;
        }
        keys.push(key);
        out.push(i);
    }
    out
}

/// Media of the window that no turn has described and this turn does not look at (chatter
/// nobody asked about, or items over an earlier turn's budget), newest first, at most `budget`,
/// each key once: a turn fills them in alongside its own call, so a later question about them
/// finds a description. Only kinds that can be viewed; people's messages only.
pub fn undescribed(messages: &[HistoryMessage], known: &[Described], looked_at: &[Wanted], budget: usize) -> Vec<Wanted> {
    let mut out: Vec<Wanted> = Vec::new();
    for m in messages.iter().rev().filter(|m| m.role == Role::User) {
        for w in m.parts.iter().filter_map(|p| Wanted::of(m, p)) {
            let Some(key) = w.unique_id.as_ref() else { continue };
            let seen = known.iter().any(|d| &d.file_unique_id == key)
                || looked_at.iter().any(|l| l.unique_id.as_ref() == Some(key))
                || out.iter().any(|o| o.unique_id.as_ref() == Some(key));
            if seen || !matches!(w.treatment, Treatment::Inline { .. }) {
                continue;
            }
            if out.len() >= budget {
                return out;
            }
            out.push(w);
        }
    }
    out
}

/// The JSON a description call answers with.
pub fn describe_schema() -> serde_json::Value {
    json!({
        "type": "OBJECT",
        "properties": {
            "description": {"type": "STRING"},
            "transcript": {"type": "STRING"}
        },
        "required": ["description"]
    })
}

/// The request of a description call: the prompt (`prompts/media/describe.md`), the item's
/// kind, and its bytes.
pub fn describe_request(template: &str, w: &Wanted, mime: &str, base64: &str) -> GenerateContentRequest {
    let mut inline = Part::default();
    inline.extra.insert("inlineData".into(), json!({"mimeType": mime, "data": base64}));
    GenerateContentRequest {
        system_instruction: Some(Content { role: None, parts: vec![Part::text(template.trim_end())] }),
        contents: vec![Content::user(vec![Part::text(format!("A {} sent in a Telegram chat.", w.kind)), inline])],
        tools: Vec::new(),
        tool_config: None,
        generation_config: Some(GenerationConfig {
            response_mime_type: Some("application/json".into()),
            response_schema: Some(describe_schema()),
            max_output_tokens: Some(1024),
            thinking_config: None,
        }),
    }
}

/// The description and transcript in a description call's JSON, trimmed and capped (model
/// output is untrusted: at most 600 and 4,000 characters).
pub fn parse_description(value: &serde_json::Value) -> Option<(String, Option<String>)> {
    let cap = |s: &str, n: usize| s.trim().chars().take(n).collect::<String>();
    let description = cap(value.get("description")?.as_str()?, 600);
    if description.is_empty() {
        return None;
    }
    let transcript = value.get("transcript").and_then(|t| t.as_str()).map(|t| cap(t, 4000)).filter(|t| !t.is_empty());
    Some((description, transcript))
}
