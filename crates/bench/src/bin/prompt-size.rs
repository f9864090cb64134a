//! Prompt size of the recorded 500-message group conversation in both history formats, whole
//! and cut to the default budget, in the bot's own token estimate, as JSON on stdout (read by
//! bench/report.mjs). With a path argument, also writes there what bench/tokens.mjs counts in
//! Gemini's own tokens: the rendered histories (compact also with an id on every line, as it
//! was before), the floors (the words alone; "name: words"), and every request of the cache replay in the request layouts before and after issue 17
//! (`agent_bench::cache`).

use agent_bench::cache::{self, Layout};
use agent_bench::group_500;
use agent_core::config::HistoryFormat;
use agent_core::gemini::{Content, Part};
use agent_core::history::{self, HistoryMessage};
use serde_json::json;

/// The words alone, one line each, with no id, name, reply or turn around them: the floor of
/// any format that carries every message's words.
fn words_only(m: &[HistoryMessage]) -> Vec<Content> {
    let words: Vec<String> = m.iter().map(|x| x.compact_text()).collect();
    vec![Content::user(vec![Part::text(words.join("\n"))])]
}

/// The same with the speaker's name before each message ("Name: words", "bot: words"), still
/// with no id, reply or turn: what a format that says who said each message cannot go under.
fn names_and_words(m: &[HistoryMessage]) -> Vec<Content> {
    let named: Vec<String> = m
        .iter()
        .map(|x| match x.role {
            history::Role::Bot => format!("bot: {}", x.compact_text()),
            _ => format!("{}: {}", x.name, x.compact_text()),
        })
        .collect();
    vec![Content::user(vec![Part::text(named.join("\n"))])]
}

fn main() {
    let (mut msgs, turns) = group_500();
    history::chronological(&mut msgs);
    let structured = history::render_structured(&msgs, &turns);
    let compact = history::render_compact(&msgs, msgs.last().and_then(|x| x.message_id));
    let every_id = cache::every_id(&msgs, msgs.last().and_then(|x| x.message_id));
    let (words, named) = (words_only(&msgs), names_and_words(&msgs));
    let (st, ct) = (history::estimate_contents_tokens(&structured), history::estimate_contents_tokens(&compact));
    let whole = json!({
        "words_only": {"tokens": history::estimate_contents_tokens(&words)},
        "names_and_words": {"tokens": history::estimate_contents_tokens(&named)},
        "messages": msgs.len(),
        "structured": {"chars": history::contents_json_chars(&structured), "tokens": st},
        "compact": {"chars": history::contents_json_chars(&compact), "tokens": ct},
        "compact_every_id": {"chars": history::contents_json_chars(&every_id), "tokens": history::estimate_contents_tokens(&every_id)},
        "ratio_tokens": ct as f64 / st as f64,
    });
    let s_first = history::fit_budget(&msgs, 12_000, true);
    let c_first = history::fit_budget(&msgs, 12_000, false);
    println!(
        "{}",
        json!({
            "whole": whole,
            "compact_recent_ids": history::COMPACT_RECENT_IDS,
            "budget_12000": {
                "structured_messages_kept": msgs.len() - s_first,
                "compact_messages_kept": msgs.len() - c_first,
            }
        })
    );
    if let Some(path) = std::env::args().nth(1) {
        let mut replay = serde_json::Map::new();
        for (name, format) in [("structured", HistoryFormat::Structured), ("compact", HistoryFormat::Compact)] {
            let mut layouts = json!({
                "before": cache::requests(Layout::Before, format, &msgs, &turns),
                "after": cache::requests(Layout::After, format, &msgs, &turns),
            });
            if format == HistoryFormat::Compact {
                layouts["every_id"] = json!(cache::requests(Layout::EveryId, format, &msgs, &turns));
            }
            replay.insert(name.into(), layouts);
        }
        let out = json!({
            "every": cache::EVERY,
            "whole": {"structured": structured, "compact": compact, "compact_every_id": every_id, "words_only": words, "names_and_words": named},
            "estimated": {"structured": st, "compact": ct},
            "replay": replay,
        });
        std::fs::write(&path, out.to_string()).unwrap_or_else(|e| panic!("writing {path}: {e}"));
    }
}
