//! What a turn leaves: its result ([`TurnResult`]: the plan's steps and the turn as stored), the
//! record of each model call ([`CallRecord`]), a failure ([`TurnFailure`]), and the texts made
//! from them (the sources line, an action's recorded outcome).
use crate::chat::plan::Step;
use crate::gemini::{Content, GenerateContentResponse, ModelError, UsageMetadata};
use crate::history::BotTurn;
use serde_json::{json, Value};

/// Characters of a tool response kept in the stored turn (the full text is sent once).
pub(crate) const STORED_RESPONSE_CHARS: usize = 600;


/// One model call, for usage and cost accounting.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    pub model: String,
    pub usage: UsageMetadata,
    pub duration_ms: i64,
    pub finish_reason: Option<String>,
    /// HTTP status, 200 on success.
    pub status: u16,
    /// Google Search queries the call ran (grounding), billed per query.
    pub search_queries: u32,
    pub error: Option<String>,
}

impl CallRecord {
    /// The record of one call to `model` that took `duration_ms` (the one place a call record
    /// is made: turns and consolidation alike). A response names the model version that
    /// answered; an error keeps its HTTP status (0 when there was none) and text.
    pub fn of(model: &str, result: &Result<GenerateContentResponse, ModelError>, duration_ms: i64) -> CallRecord {
        match result {
            Ok(response) => CallRecord {
                model: response.model_version.clone().unwrap_or_else(|| model.to_string()),
                usage: response.usage_metadata.clone().unwrap_or_default(),
                duration_ms,
                finish_reason: response.finish_reason().map(str::to_string),
                status: 200,
                search_queries: response.search_queries(),
                error: None,
            },
            Err(error) => CallRecord {
                model: model.to_string(),
                // An abandoned early start cost what it streamed (or the estimate): charged.
                usage: match error {
                    ModelError::Abandoned { usage } => usage.clone(),
                    _ => UsageMetadata::default(),
                },
                duration_ms,
                finish_reason: None,
                search_queries: 0,
                status: match error {
                    ModelError::Http { status, .. } => *status,
                    _ => 0,
                },
                error: Some(error.to_string()),
            },
        }
    }
}

/// What a call stopped part-way cost (an abandoned early start, `ModelError::Abandoned`): the
/// stream's own last count when it sent one (its prompt count, and at least the text seen so
/// far as output), else an estimate (`history::budget`): the whole request as prompt (system
/// instruction, tools, contents) and the text seen so far as output. Never zero for a request
/// sent: a stopped request still counts against the budgets.
pub fn abandoned_usage(request: &crate::gemini::GenerateContentRequest, so_far: &[GenerateContentResponse]) -> UsageMetadata {
    use crate::history::budget::{estimate_contents_tokens, estimate_tokens};
    let (text, _) = crate::gemini::stream::visible_so_far(so_far);
    let output = estimate_tokens(&text) as u64;
    let counted = so_far.iter().rev().find_map(|c| c.usage_metadata.clone()).filter(|u| u.prompt_token_count > 0);
    let mut usage = counted.unwrap_or_else(|| {
        let system = request.system_instruction.as_ref().map_or(0, |c| estimate_contents_tokens(std::slice::from_ref(c)));
        let tools = if request.tools.is_empty() { 0 } else { estimate_tokens(&serde_json::to_string(&request.tools).unwrap_or_default()) };
        UsageMetadata { prompt_token_count: (system + tools + estimate_contents_tokens(&request.contents)) as u64, ..UsageMetadata::default() }
    });
    usage.candidates_token_count = usage.candidates_token_count.max(output);
    usage.total_token_count = usage.total_token_count.max(usage.prompt_token_count + usage.candidates_token_count + usage.thoughts_token_count);
    usage
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct TurnResult {
    /// The turn as stored: model contents and (trimmed) tool responses.
    pub turn: BotTurn,
    pub steps: Vec<Step>,
    /// For each step, the index of the function call it came from (`None`: plain text).
    pub step_calls: Vec<Option<usize>>,
    pub calls: Vec<CallRecord>,
    /// Why the model gave nothing usable, when it did not.
    pub empty_reason: Option<String>,
    pub finish_reason: Option<String>,
    /// The model chose to say nothing (`no_reply`, or an empty answer where that is allowed).
    pub silent: bool,
    /// A schedule was created or cancelled (the chat object re-reads its next run).
    pub schedules_changed: bool,
    /// Web pages Google Search grounded the answer on (title, URL), as Gemini listed them.
    pub sources: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TurnFailure {
    pub error: ModelError,
    pub calls: Vec<CallRecord>,
}

pub(crate) fn trimmed_for_storage(content: &Content) -> Content {
    let mut c = content.clone();
    for p in &mut c.parts {
        if let Some(fr) = &mut p.function_response {
            let text = fr.response.to_string();
            if text.chars().count() > STORED_RESPONSE_CHARS {
                let head: String = text.chars().take(STORED_RESPONSE_CHARS).collect();
                fr.response = json!({"note": "trimmed in history", "head": head});
            }
        }
    }
    c
}

pub(crate) fn without_thoughts(mut c: Content) -> Content {
    c.parts.retain(|p| !p.is_thought());
    c
}

/// Sources listed under a grounded answer at most.
pub const MAX_SOURCES: usize = 5;

/// The sources line appended to a grounded answer (Markdown; titles escaped, only http(s)
/// links), or nothing.
pub fn sources_line(sources: &[(String, String)]) -> String {
    let links: Vec<String> = sources
        .iter()
        .filter(|(_, uri)| uri.starts_with("https://") || uri.starts_with("http://"))
        .filter(|(_, uri)| !uri.contains(|c: char| c.is_whitespace() || c == ')' || c == '<' || c == '>'))
        .map(|(title, uri)| {
            let title: String = title.chars().take(60).collect();
            let title = if title.trim().is_empty() { "source".to_string() } else { title };
            format!("[{}]({uri})", crate::format::escape_markdown(&title))
        })
        .collect();
    if links.is_empty() {
        String::new()
    } else {
        format!("\n\nSources: {}", links.join(" · "))
    }
}

/// The function response recorded for an action step once it ran.
pub fn step_outcome_value(outcome: &crate::chat::plan::StepOutcome) -> Value {
    use crate::chat::plan::StepOutcome::*;
    match outcome {
        Sent { message_ids } => json!({"ok": true, "message_ids": message_ids}),
        Done => json!({"ok": true}),
        Cancelled => json!({"ok": false, "status": "cancelled: new messages arrived first"}),
        Failed { error } => json!({"ok": false, "error": error}),
    }
}
