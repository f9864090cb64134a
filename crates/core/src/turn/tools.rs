//! What the agent can do: the Gemini function declarations, and the parsing of the model's
//! function calls into plan steps (actions) and tool requests (which return results).
//!
//! Invariants (INVARIANTS.md): "What is in view decides" ([`WRITE_TOOLS`]: stored notes, the
//! plan, schedules; [`PRIVATE_READS`]; the offer per round is [`for_round`]).
//!
//! Also: a malformed call never fails the turn; it becomes [`ToolCall::Invalid`], whose error
//! goes back to the model as the function's response.

use crate::gemini::{FunctionCall, FunctionDeclaration, Tool};
use crate::chat::plan::{Step, MAX_WAIT_SECS};
use crate::telegram::api::{allowed_reaction, REACTION_EMOJI};
use serde_json::{json, Value};

/// URLs per fetch_url call.
pub const MAX_FETCH_URLS: usize = 3;

/// Functions that change what later turns see or do. A new function that stores anything
/// or acts later (scheduling) belongs here.
/// `generate_image` is one: it spends the owner's money on what the prompt says and puts it
/// in front of people, so outside text in view must not steer it. `business_digest` spends a
/// model call and moves the owner's digest on.
pub const WRITE_TOOLS: [&str; 6] = ["remember", "set_plan", "schedule_message", "cancel_schedule", "generate_image", "business_digest"];

/// Whether a function writes (see [`WRITE_TOOLS`]).
pub fn writes(name: &str) -> bool {
    WRITE_TOOLS.contains(&name)
}

/// Functions that read what the chat keeps private (memories, notes, schedules). With a
/// fetched page in view they are not offered: the page's links are fetchable, and a hostile
/// page could have the model encode what it read in which link it fetches next. A new
/// function that reads stored data belongs here.
pub const PRIVATE_READS: [&str; 2] = ["search_memory", "list_schedules"];

/// Whether a function reads private data (see [`PRIVATE_READS`]).
pub fn reads_private(name: &str) -> bool {
    PRIVATE_READS.contains(&name)
}

/// The declarations offered in one round: all of them, or without the tools that write when
/// untrusted text is in view, and without the private reads when a fetched page is.
pub fn for_round(tools: &[Tool], untrusted_in_view: bool, page_in_view: bool) -> Vec<Tool> {
    if !untrusted_in_view && !page_in_view {
        return tools.to_vec();
    }
    let offered = |name: &str| !(untrusted_in_view && writes(name)) && !(page_in_view && reads_private(name));
    tools
        .iter()
        .map(|t| Tool {
            function_declarations: t.function_declarations.iter().filter(|d| offered(&d.name)).cloned().collect(),
            google_search: t.google_search.clone(),
        })
        .filter(|t| !t.function_declarations.is_empty() || t.google_search.is_some())
        .collect()
}

/// A parsed function call.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolCall {
    /// An action for the plan (send, react, sticker, wait).
    Action(Step),
    Remember { content: String, about_user_id: Option<i64> },
    SetPlan { content: String },
    FetchUrl { urls: Vec<String> },
    SearchMemory { query: String },
    /// Stay silent on purpose (a reaction or a passing mention that needs no answer).
    NoReply,
    /// `schedule_message`, its arguments checked for shape (the time math needs the clock).
    Schedule(crate::chat::schedule::Request),
    ListSchedules,
    CancelSchedule { id: i64 },
    /// The owner's Telegram Business digest, sent as its own message.
    BusinessDigest,
    Invalid { name: String, error: String },
}

impl ToolCall {
    /// Tools whose results the model needs before it can go on.
    pub fn needs_result(&self) -> bool {
        matches!(
            self,
            ToolCall::FetchUrl { .. }
                | ToolCall::SearchMemory { .. }
                | ToolCall::Invalid { .. }
                | ToolCall::Schedule(_)
                | ToolCall::ListSchedules
                | ToolCall::CancelSchedule { .. }
                | ToolCall::BusinessDigest
        )
    }
}

fn int_arg(args: &Value, name: &str) -> Option<i64> {
    match args.get(name)? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) => s.trim().trim_start_matches('#').parse().ok(),
        _ => None,
    }
}

fn str_arg(args: &Value, name: &str) -> Option<String> {
    args.get(name).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty()).map(str::to_string)
}

/// Parses one function call.
pub fn parse_call(call: &FunctionCall, sticker_sets: &[String]) -> ToolCall {
    let a = &call.args;
    let invalid = |error: &str| ToolCall::Invalid { name: call.name.clone(), error: error.to_string() };
    match call.name.as_str() {
        "send_message" => match str_arg(a, "text").map(|t| crate::history::sanitize_reply(&t)) {
            Some(text) if !text.trim().is_empty() => {
                ToolCall::Action(Step::Send { text, reply_to: int_arg(a, "reply_to_message_id"), no_link_preview: false })
            }
            _ => invalid("text is required"),
        },
        "react" => {
            let Some(message_id) = int_arg(a, "message_id") else { return invalid("message_id is required") };
            match str_arg(a, "emoji").as_deref().and_then(allowed_reaction) {
                Some(e) => ToolCall::Action(Step::React { message_id, emoji: e.to_string() }),
                None => invalid("emoji must be one of Telegram's reaction emoji"),
            }
        }
        "send_sticker" => {
            let set = str_arg(a, "set_name").unwrap_or_default();
            if !sticker_sets.iter().any(|s| s.eq_ignore_ascii_case(&set)) {
                return invalid("set_name must be one of the configured sticker sets");
            }
            match str_arg(a, "emoji") {
                Some(emoji) => ToolCall::Action(Step::Sticker { set_name: set, emoji, reply_to: int_arg(a, "reply_to_message_id") }),
                None => invalid("emoji is required"),
            }
        }
        "wait" => {
            let secs = int_arg(a, "seconds").unwrap_or(1).clamp(1, MAX_WAIT_SECS as i64) as u32;
            ToolCall::Action(Step::Wait { seconds: secs })
        }
        "remember" => match str_arg(a, "content") {
            Some(content) => ToolCall::Remember { content, about_user_id: int_arg(a, "about_user_id") },
            None => invalid("content is required"),
        },
        "set_plan" => ToolCall::SetPlan { content: str_arg(a, "content").unwrap_or_default() },
        "fetch_url" => {
            let urls: Vec<String> = match a.get("urls").or_else(|| a.get("url")) {
                Some(Value::Array(v)) => v.iter().filter_map(Value::as_str).map(str::to_string).collect(),
                Some(Value::String(s)) => vec![s.clone()],
                _ => Vec::new(),
            };
            if urls.is_empty() {
                invalid("urls is required")
            } else if urls.len() > MAX_FETCH_URLS {
                invalid("at most 3 URLs per call")
            } else {
                ToolCall::FetchUrl { urls }
            }
        }
        "search_memory" => match str_arg(a, "query") {
            Some(query) => ToolCall::SearchMemory { query },
            None => invalid("query is required"),
        },
        // `pass` is a crew persona's silence (`core::crew`).
        "no_reply" | "pass" => ToolCall::NoReply,
        "schedule_message" => match crate::chat::schedule::parse_request(a) {
            Ok(r) => ToolCall::Schedule(r),
            Err(e) => invalid(&e.to_string()),
        },
        "generate_image" => match crate::image::parse_ask(a) {
            Ok(ask) => ToolCall::Action(Step::Image {
                prompt: ask.prompt,
                photos: ask.photos,
                aspect_ratio: ask.aspect_ratio,
                reply_to: int_arg(a, "reply_to_message_id"),
                for_user: None,
            }),
            Err(e) => invalid(e),
        },
        "list_schedules" => ToolCall::ListSchedules,
        "business_digest" => ToolCall::BusinessDigest,
        "cancel_schedule" => match int_arg(a, "id") {
            Some(id) => ToolCall::CancelSchedule { id },
            None => invalid("id is required (as list_schedules gives it)"),
        },
        other => ToolCall::Invalid { name: other.to_string(), error: "unknown function".into() },
    }
}

/// The function declarations sent with every turn; with `web_search`, Gemini's Google Search
/// grounding rides in the same tool (Gemini 3 combines built-in tools with function calling).
pub fn declarations_with_search(sticker_sets: &[String], web_search: bool) -> Vec<Tool> {
    let mut tools = declarations(sticker_sets);
    if web_search {
        if let Some(t) = tools.first_mut() {
            t.google_search = Some(json!({}));
        }
    }
    tools
}

/// The declarations' names, descriptions and parameter schemas, as data: JSON text in the
/// wasm is far smaller than the code `json!` builds it with. The lists that come from elsewhere
/// (reaction emoji, sticker sets, aspect ratios) are filled in by the functions below.
const DECLARED: &str = include_str!("tools.json");

#[derive(serde::Deserialize)]
struct Declared {
    /// Every turn's functions, in the order they are offered.
    functions: Vec<FunctionDeclaration>,
    /// Offered when sticker sets are configured, third in the list.
    send_sticker: FunctionDeclaration,
    /// Offered when `IMAGE_MODEL` is set, last.
    generate_image: FunctionDeclaration,
    /// Offered in a Telegram Business owner's private chat.
    business_digest: FunctionDeclaration,
}

fn declared() -> Declared {
    serde_json::from_str(DECLARED).expect("tools.json is valid JSON of declarations (tested)")
}

/// Sets the `enum` of parameter `name` of `d` to `values`.
fn set_enum<S: AsRef<str>>(d: &mut FunctionDeclaration, name: &str, values: &[S]) {
    d.parameters["properties"][name]["enum"] = values.iter().map(|v| Value::from(v.as_ref())).collect();
}

/// Adds `generate_image` (offered when `IMAGE_MODEL` is set).
pub fn add_generate_image(tools: &mut [Tool]) {
    let Some(t) = tools.first_mut() else { return };
    let mut d = declared().generate_image;
    set_enum(&mut d, "aspect_ratio", &crate::image::ASPECT_RATIOS);
    t.function_declarations.push(d);
}

/// Adds `business_digest` (offered in the private chat of an owner whose Telegram Business
/// connection is on: what they missed goes to them as its own message, never into this turn).
pub fn add_business_digest(tools: &mut [Tool]) {
    if let Some(t) = tools.first_mut() {
        t.function_declarations.push(declared().business_digest);
    }
}

/// The function declarations sent with every turn.
pub fn declarations(sticker_sets: &[String]) -> Vec<Tool> {
    let Declared { functions: mut fns, mut send_sticker, .. } = declared();
    if let Some(react) = fns.iter_mut().find(|d| d.name == "react") {
        set_enum(react, "emoji", &REACTION_EMOJI);
    }
    if !sticker_sets.is_empty() {
        set_enum(&mut send_sticker, "set_name", sticker_sets);
        fns.insert(2, send_sticker);
    }
    vec![Tool { function_declarations: fns, google_search: None }]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: Value) -> ToolCall {
        parse_call(&FunctionCall { id: None, name: name.into(), args }, &["Cats".into()])
    }

    #[test]
    fn actions_parse_into_steps() {
        assert_eq!(
            call("send_message", json!({"text": "hi", "reply_to_message_id": "456"})),
            ToolCall::Action(Step::Send { text: "hi".into(), reply_to: Some(456), no_link_preview: false })
        );
        assert_eq!(
            call("react", json!({"message_id": 5, "emoji": "❤️"})),
            ToolCall::Action(Step::React { message_id: 5, emoji: "❤".into() })
        );
        assert_eq!(call("wait", json!({"seconds": 600})), ToolCall::Action(Step::Wait { seconds: 60 }));
        assert_eq!(
            call("generate_image", json!({"prompt": "a fox", "photo_message_ids": [7], "aspect_ratio": "3:2", "reply_to_message_id": 9})),
            ToolCall::Action(Step::Image { prompt: "a fox".into(), photos: vec![7], aspect_ratio: Some("3:2".into()), reply_to: Some(9), for_user: None })
        );
        assert!(matches!(call("generate_image", json!({})), ToolCall::Invalid { .. }));
        assert!(writes("generate_image"), "a picture is a writing tool: withheld with outside text in view");
        assert!(matches!(call("send_sticker", json!({"set_name": "cats", "emoji": "😺"})), ToolCall::Action(_)));
    }

    #[test]
    fn bad_calls_become_errors_for_the_model() {
        assert!(matches!(call("react", json!({"message_id": 5, "emoji": "🦀"})), ToolCall::Invalid { .. }));
        assert!(matches!(call("send_message", json!({})), ToolCall::Invalid { .. }));
        assert!(matches!(call("send_sticker", json!({"set_name": "dogs", "emoji": "🐶"})), ToolCall::Invalid { .. }));
        assert!(matches!(call("fetch_url", json!({"urls": ["a", "b", "c", "d"]})), ToolCall::Invalid { .. }));
        assert!(matches!(call("launch_rockets", json!({})), ToolCall::Invalid { .. }));
        assert_eq!(call("no_reply", json!({})), ToolCall::NoReply);
        assert!(!ToolCall::NoReply.needs_result());
    }

    #[test]
    fn the_declarations_text_is_whole_and_the_lists_are_filled_in() {
        let mut tools = declarations(&["cats".to_string()]);
        add_generate_image(&mut tools);
        let fns = &tools[0].function_declarations;
        for f in fns {
            assert!(!f.description.is_empty(), "{} has a description", f.name);
            if f.parameters.is_null() {
                continue;
            }
            assert_eq!(f.parameters["type"], "OBJECT", "{}", f.name);
            let props = f.parameters["properties"].as_object().expect("properties");
            assert!(!props.is_empty(), "{}: Gemini refuses an OBJECT with no properties", f.name);
            for r in f.parameters["required"].as_array().into_iter().flatten() {
                assert!(props.contains_key(r.as_str().unwrap()), "{}: required {r} is a property", f.name);
            }
        }
        let find = |n: &str| fns.iter().find(|f| f.name == n).unwrap();
        assert_eq!(find("react").parameters["properties"]["emoji"]["enum"].as_array().unwrap().len(), REACTION_EMOJI.len());
        assert_eq!(find("send_sticker").parameters["properties"]["set_name"]["enum"], json!(["cats"]));
        assert_eq!(find("generate_image").parameters["properties"]["aspect_ratio"]["enum"], json!(crate::image::ASPECT_RATIOS));
        assert_eq!(fns[2].name, "send_sticker");
        assert_eq!(fns.last().unwrap().name, "generate_image");
    }

    #[test]
    fn declarations_include_stickers_only_when_configured() {
        let names = |sets: &[String]| -> Vec<String> {
            declarations(sets)[0].function_declarations.iter().map(|d| d.name.clone()).collect()
        };
        assert!(!names(&[]).contains(&"send_sticker".to_string()));
        assert!(names(&["Cats".into()]).contains(&"send_sticker".to_string()));
        assert_eq!(names(&[]).len(), 11);
    }

    #[test]
    fn the_business_digest_is_offered_only_when_added_and_never_with_outside_text_in_view() {
        let mut tools = declarations(&[]);
        let has = |tools: &[Tool]| tools.iter().flat_map(|t| &t.function_declarations).any(|d| d.name == "business_digest");
        assert!(!has(&tools), "not a function of every turn");
        add_business_digest(&mut tools);
        assert!(has(&tools));
        let d = tools[0].function_declarations.iter().find(|d| d.name == "business_digest").unwrap();
        assert!(d.parameters.is_null(), "no parameters: nothing a turn says reaches the digest");
        assert!(!has(&for_round(&tools, true, false)), "outside text in view: not offered");
        assert!(has(&for_round(&tools, false, false)));
        assert_eq!(parse_call(&FunctionCall { name: "business_digest".into(), args: Value::Null, id: None }, &[]), ToolCall::BusinessDigest);
        assert!(ToolCall::BusinessDigest.needs_result());
    }

    #[test]
    fn rounds_with_untrusted_text_offer_no_tool_that_writes() {
        let all = declarations(&[]);
        let names = |tools: &[Tool]| -> Vec<String> {
            tools.iter().flat_map(|t| &t.function_declarations).map(|d| d.name.clone()).collect()
        };
        assert_eq!(for_round(&all, false, false), all);
        let tainted = names(&for_round(&all, true, false));
        assert!(!tainted.iter().any(|n| writes(n)), "{tainted:?}");
        assert!(!tainted.contains(&"remember".to_string()) && !tainted.contains(&"set_plan".to_string()));
        for kept in ["send_message", "react", "wait", "fetch_url", "search_memory", "list_schedules"] {
            assert!(tainted.contains(&kept.to_string()), "{kept}");
        }
        assert!(!tainted.contains(&"schedule_message".to_string()) && !tainted.contains(&"cancel_schedule".to_string()));
        // Web search survives the filter; without it the tool carries no google_search.
        let searching = declarations_with_search(&[], true);
        assert_eq!(for_round(&searching, true, true)[0].google_search, Some(json!({})));
        assert_eq!(all[0].google_search, None);
        // A fetched page in view: no private read either (issue 35 item 9).
        let paged = names(&for_round(&all, true, true));
        assert!(!paged.iter().any(|n| writes(n) || reads_private(n)), "{paged:?}");
        for kept in ["send_message", "react", "fetch_url"] {
            assert!(paged.contains(&kept.to_string()), "{kept}");
        }
    }

    #[test]
    fn schedule_calls_parse_or_explain() {
        assert!(matches!(call("schedule_message", json!({"text": "tea", "in_minutes": 5})), ToolCall::Schedule(_)));
        match call("schedule_message", json!({"text": "tea"})) {
            ToolCall::Invalid { error, .. } => assert!(error.contains("exactly one of at"), "{error}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(call("cancel_schedule", json!({"id": "#4"})), ToolCall::CancelSchedule { id: 4 });
        assert!(matches!(call("cancel_schedule", json!({})), ToolCall::Invalid { .. }));
        assert_eq!(call("list_schedules", Value::Null), ToolCall::ListSchedules);
        assert!(ToolCall::ListSchedules.needs_result());
    }
}
