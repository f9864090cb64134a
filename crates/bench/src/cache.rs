//! The requests of a replay of the recorded 500-message group conversation, to compare
//! request layouts under Gemini's implicit cache in the same run: every fourth person's message
//! asks for a turn (about 110 turns), and each turn's request is built from the history up to
//! it. `npm run bench` (bench/tokens.mjs) counts them in Gemini's tokens and applies the cache's
//! rule: each request's cached tokens are the longest prefix it shares with an earlier one, from
//! the model's minimum cacheable size on (the rule `tests/support/fake-gemini-cache.js` applies
//! to the worker's real requests).
//!
//! - `before`: the layout this bot had until issue 17: the situation, the time and the turn's
//!   stored context at the start of the system instruction, the history cut anew to the budget
//!   every turn (the oldest messages dropped one by one).
//! - `after`: the layout it has now (`core::turn::prompt`): a system instruction that is the same
//!   every turn, the history from a start that stays put (`core::turn::window::stable_start`), the
//!   turn context last.
//! - `every_id` (compact only): `after` with a message id on every compact line, as compact
//!   history was until it showed ids only where the model may act (`history::COMPACT_RECENT_IDS`).

use agent_core::config::HistoryFormat;
use agent_core::turn::window::{self, Limits, Loaded};
use agent_core::conversation::ChatKind;
use agent_core::telegram::gating::Trigger;
use agent_core::gemini::Content;
use agent_core::history::{self, BotTurn, HistoryMessage, Role};
use agent_core::turn::prompt::{self, ChatDetails, PromptInput, PromptLibrary, Situation};
use agent_core::turn::{build_request, TurnRequest};
use serde_json::Value;
use std::collections::BTreeMap;

/// Turns are asked for by every this many person's messages.
pub const EVERY: usize = 4;
const BUDGET: usize = 12_000;
const ROWS: usize = 400;

#[derive(Clone, Copy, PartialEq)]
pub enum Layout {
    Before,
    After,
    EveryId,
}

fn library() -> PromptLibrary {
    let read = |p: &str| std::fs::read_to_string(crate::root().join("prompts").join(p)).unwrap_or_default();
    PromptLibrary {
        instructions: read("instructions.md"),
        personas: [("default".to_string(), read("personas/default.md"))].into(),
        roles: [("group_host".to_string(), read("roles/group_host.md"))].into(),
    }
}

/// One turn's request in a layout, and the cut it leaves for the next turn.
fn request(layout: Layout, format: HistoryFormat, upto: &[HistoryMessage], turns: &BTreeMap<String, BotTurn>, stored_cut: Option<i64>) -> (Value, Option<i64>) {
    let structured = format == HistoryFormat::Structured;
    let target = upto.last().unwrap();
    let from = upto.len().saturating_sub(ROWS + 1);
    let limits = Limits { row_limit: ROWS, session_idle_secs: i64::MAX / 4, token_budget: BUDGET, structured };
    let (shown, cut) = match layout {
        Layout::After | Layout::EveryId => {
            let loaded = Loaded { messages: upto[from..].to_vec(), answered_seq: 0, stored_start: 0, stored_started_at: Some(0), scheduled: false, stored_cut, summary_until: None, answers: Vec::new() };
            let w = window::window(loaded, limits, 0).unwrap();
            (w.messages, w.cut_seq)
        }
        Layout::Before => {
            let rows = &upto[upto.len().saturating_sub(ROWS)..];
            let first = history::fit_budget(rows, BUDGET, structured);
            (rows[first..].to_vec(), None)
        }
    };
    let library = library();
    let values: BTreeMap<String, String> = [("bot_name".to_string(), "Edge".to_string())].into();
    let situation = Situation {
        target_message_id: target.message_id,
        new_session: false,
        trigger: Trigger::Mention,
        reaction: None,
        format,
        history_cut_without_summary: false,
        scheduled: None,
    };
    let chat = ChatDetails { kind: ChatKind::Supergroup, title: Some("Friends".into()), topic_id: None };
    let memories = vec!["(about user 101) Alice organises the Friday dinners.".to_string()];
    let input = PromptInput {
        situation: &situation,
        library: &library,
        persona: "default",
        roles: &["group_host".to_string()],
        values: &values,
        plan: Some("Keep track of the ramen dinner and the board game order."),
        curated: &[],
        memories: &memories,
        memory_budget: 1500,
        now: chrono::DateTime::from_timestamp(target.date, 0).unwrap_or_default(),
        timezone: "Europe/Berlin",
        zones: &agent_core::time_zone::TzDb,
        chat: &chat,
        summary: cut.map(|_| "Earlier: the friends planned dinners, games and a book club."),
    };
    let mut contents: Vec<Content> = match (structured, layout) {
        (true, _) => history::render_structured(&shown, turns),
        (false, Layout::EveryId) => every_id(&shown, target.message_id),
        (false, _) => history::render_compact(&shown, target.message_id),
    };
    let system = match layout {
        // The turn's situation, stored context and time opened the system instruction.
        Layout::Before => format!("{}\n\n{}", prompt::turn_context(&input), prompt::system_instruction(&input)),
        Layout::After | Layout::EveryId => {
            history::append_turn_context(&mut contents, prompt::turn_context(&input));
            prompt::system_instruction(&input)
        }
    };
    let req = TurnRequest {
        model: "gemini-3.8-flash".into(),
        system_instruction: system,
        history: contents.clone(),
        tools: agent_core::turn::tools::declarations_with_search(&[], false),
        generation_config: None,
        sticker_sets: Vec::new(),
        fetch_allow_private: false,
        safety: Default::default(),
        silence_allowed: false,
        empty_reply: None,
    };
    (serde_json::to_value(build_request(&req, &contents, false)).unwrap(), cut)
}

/// Compact history with a message id on every line (what consolidation reads), ending with the
/// answer marker as `history::render_compact` does.
pub fn every_id(msgs: &[HistoryMessage], target: Option<i64>) -> Vec<Content> {
    let text = format!("{}\n{}", history::compact_lines(msgs), history::answer_marker(target));
    vec![Content::user(vec![agent_core::gemini::Part::text(text)])]
}

/// The request of every turn of the replay, in a layout and format, in order.
pub fn requests(layout: Layout, format: HistoryFormat, msgs: &[HistoryMessage], turns: &BTreeMap<String, BotTurn>) -> Vec<Value> {
    let mut out = Vec::new();
    let mut stored_cut = None;
    let mut people = 0;
    for (i, m) in msgs.iter().enumerate() {
        if m.role == Role::Bot {
            continue;
        }
        people += 1;
        if people % EVERY != 0 {
            continue;
        }
        let (body, cut) = request(layout, format, &msgs[..=i], turns, stored_cut);
        stored_cut = cut;
        out.push(body);
    }
    out
}
