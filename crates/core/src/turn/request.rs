//! What a turn is asked ([`TurnRequest`], with its [`TurnSafety`] limits) and the Gemini request
//! of each round: the tools offered, function calling off in the last round, the history's
//! shape repaired when Gemini refuses it.
use crate::fetch::{self, LinkSet};
use crate::gemini::{Content, GenerateContentRequest, GenerationConfig, Part, Tool};
use crate::history::normalize_contents;
use serde_json::{json, Value};


/// Everything a turn needs, assembled by the caller.
#[derive(Debug, Clone)]
pub struct TurnRequest {
    pub model: String,
    pub system_instruction: String,
    pub history: Vec<Content>,
    pub tools: Vec<Tool>,
    pub generation_config: Option<GenerationConfig>,
    pub sticker_sets: Vec<String>,
    /// `FETCH_ALLOW_PRIVATE`: loopback may be fetched (tests, local development).
    pub fetch_allow_private: bool,
    pub safety: TurnSafety,
    /// The model may stay silent (reaction and name triggers): an empty answer is intended.
    pub silence_allowed: bool,
    /// What to send when the model gives nothing usable, instead of [`GRACEFUL_REPLY`](super::run::GRACEFUL_REPLY) (a
    /// scheduled run sends its own text: a reminder is never lost).
    pub empty_reply: Option<String>,
}

/// What the turn needs to keep untrusted text from steering it (see the module invariants).
#[derive(Debug, Clone, PartialEq)]
pub struct TurnSafety {
    /// Links people posted in the history the model sees (`LinkSet::from_people`).
    pub people_links: LinkSet,
    /// Text from outside the chat is in the history: a forwarded message, a document, a
    /// recording (`fetch::outside_text_in_view`).
    pub outside_text_in_view: bool,
    /// Requests fetch_url makes at most per turn, redirect hops included (`MAX_FETCHES_PER_TURN`).
    pub max_fetches: usize,
    /// Visible plan steps at most per turn (`MAX_PLAN_STEPS`).
    pub max_steps: usize,
    /// Randomness from the edge for the fences' boundaries.
    pub fence_seed: u128,
}

impl Default for TurnSafety {
    fn default() -> Self {
        TurnSafety {
            people_links: LinkSet::default(),
            outside_text_in_view: false,
            max_fetches: fetch::DEFAULT_MAX_FETCHES_PER_TURN,
            max_steps: crate::chat::plan::DEFAULT_MAX_VISIBLE_STEPS,
            fence_seed: 0,
        }
    }
}

/// Whether untrusted text is in view in a round with these contents (computed from what is
/// sent, every round: see the module invariants).
pub fn untrusted_in_view(req: &TurnRequest, contents: &[Content]) -> bool {
    req.safety.outside_text_in_view
        || fetch::page_in_view(contents)
        || fetch::search_in_view(contents)
        || fetch::document_in_view(contents)
}

/// Drops what makes Gemini reject a history: function-call turns that are not answered and
/// empty turns; merges same-role neighbours.
pub fn repair_history(contents: Vec<Content>) -> Vec<Content> {
    let mut out: Vec<Content> = Vec::new();
    for (i, c) in contents.iter().enumerate() {
        let calls = c.function_calls().count();
        if c.is_model() && calls > 0 {
            let answered = contents.get(i + 1).map_or(0, |next| {
                next.parts.iter().filter(|p| p.function_response.is_some()).count()
            });
            if answered != calls {
                // Keep the visible text of a broken call turn, drop the calls.
                let text = c.visible_text();
                if !text.trim().is_empty() {
                    out.push(Content::model(vec![Part::text(text)]));
                }
                continue;
            }
        }
        if !c.is_model() && c.parts.iter().any(|p| p.function_response.is_some()) {
            let prev_calls = i.checked_sub(1).map_or(0, |p| contents[p].function_calls().count());
            let responses = c.parts.iter().filter(|p| p.function_response.is_some()).count();
            if prev_calls != responses {
                let kept: Vec<Part> = c.parts.iter().filter(|p| p.function_response.is_none()).cloned().collect();
                out.push(Content { role: c.role.clone(), parts: kept });
                continue;
            }
        }
        let mut c = c.clone();
        // An empty text part is rejected by Gemini ("empty text parameter").
        c.parts.retain(|p| p.text.as_deref() != Some("") || p.function_call.is_some() || !p.extra.is_empty());
        out.push(c);
    }
    normalize_contents(out)
}

/// The generateContent request of one round, exactly as sent. The last round disables
/// function calling so the model must answer in text.
pub fn build_request(req: &TurnRequest, contents: &[Content], last_round: bool) -> GenerateContentRequest {
    build_round(req, contents, last_round, false)
}

/// [`build_request`] for a round after a grounded web search (`searched`): what came from the
/// web is in view, so no tool that writes is offered.
pub(crate) fn build_round(req: &TurnRequest, contents: &[Content], last_round: bool, searched: bool) -> GenerateContentRequest {
    GenerateContentRequest {
        system_instruction: Some(Content { role: None, parts: vec![Part::text(req.system_instruction.clone())] }),
        contents: contents.to_vec(),
        tools: crate::turn::tools::for_round(&req.tools, searched || untrusted_in_view(req, contents), fetch::page_in_view(contents)),
        tool_config: tool_config(req, last_round),
        generation_config: req.generation_config.clone(),
    }
}

/// The request's `toolConfig`: the last round disables function calling; with Google Search
/// on, the server's own tool calls come back in the content (to be replayed, like thought
/// signatures).
pub(crate) fn tool_config(req: &TurnRequest, last_round: bool) -> Option<Value> {
    let search = req.tools.iter().any(|t| t.google_search.is_some());
    let mut config = serde_json::Map::new();
    if last_round {
        config.insert("functionCallingConfig".into(), json!({"mode": "NONE"}));
    }
    if search {
        config.insert("includeServerSideToolInvocations".into(), json!(true));
    }
    (!config.is_empty()).then_some(Value::Object(config))
}
