//! The turn's loop, as named steps: each round calls the model (`call_model`), reads its
//! answer (`read_answer`), carries out its function calls (`run_calls`: actions become plan
//! steps, tools run now, `fetch_url` checked and fenced), until the model answers; then
//! `finish_plan`. The invariants are the room's ([`super`]).
use super::ports::{Clock, ModelPort, ToolPort};
use super::record::{sources_line, trimmed_for_storage, without_thoughts, CallRecord, TurnFailure, TurnResult, MAX_SOURCES};
use super::request::{build_round, repair_history, untrusted_in_view, TurnRequest};
use super::tools::{self, parse_call, ToolCall};
use crate::chat::plan::Step;
use crate::fetch::{self, check_url, fence, LinkSet, Page, Refusal};
use crate::gemini::{Content, GenerateContentResponse, Outcome, Part};
use crate::history::{sanitize_reply, BotTurn};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use url::Url;


/// Tool rounds before the model is made to answer.
pub const MAX_TOOL_ROUNDS: usize = 4;

/// What the user sees when the model gives nothing usable.
pub const GRACEFUL_REPLY: &str = "Sorry, I can't help with that one. Could you put it another way?";

/// What a write tool answers in a round with untrusted text in view.
pub(crate) const WRITE_REFUSED: &str = "not available now: text from outside this chat (a web page, search results, a forwarded \
     message, a document or recording) is in view, so nothing is stored or scheduled; answer the person instead";

/// What a private read answers in a round with a fetched page in view.
pub(crate) const READ_REFUSED: &str = "not available now: a fetched web page is in view, so memories and schedules are not \
     read in this turn; answer with what you have";

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

/// Runs one turn: rounds of `call_model`, `read_answer` and `run_calls` until the model
/// answers without asking for results (or the last round made it answer), then `finish_plan`.
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
        ToolCall::BusinessDigest => recorded(&mut st.result, index, tools.business_digest().await.unwrap_or_else(|e| json!({"error": e}))),
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
