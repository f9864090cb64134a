//! Prompt size of the recorded 500-message group conversation in both history formats,
//! whole and cut to the default budget, and a simulation of Gemini's implicit cache over it
//! in the request layouts before and after issue 17 (`agent_bench::cache`), as JSON (read by
//! bench/report.mjs).

use agent_bench::cache::{self, Layout};
use agent_bench::group_500;
use agent_core::config::HistoryFormat;
use agent_core::history;
use serde_json::json;

fn main() {
    let (mut msgs, turns) = group_500();
    history::chronological(&mut msgs);
    let measure = |m: &[history::HistoryMessage]| {
        let s = history::render_structured(m, &turns);
        let c = history::render_compact(m, m.last().and_then(|x| x.message_id));
        let (st, ct) = (history::estimate_contents_tokens(&s), history::estimate_contents_tokens(&c));
        // The floor of any format that carries every message's words: the words alone, one
        // line each, with no id, name, reply or turn around them.
        let words: Vec<String> = m.iter().map(|x| x.compact_text()).collect();
        let tt = history::estimate_contents_tokens(&[agent_core::gemini::Content::user(vec![agent_core::gemini::Part::text(words.join("\n"))])]);
        // The same with the speaker's name before each message ("Name: words", "bot: words"),
        // still with no id, reply or turn: what a format that says who said each message
        // cannot go under.
        let named: Vec<String> = m
            .iter()
            .map(|x| match x.role {
                history::Role::Bot => format!("bot: {}", x.compact_text()),
                _ => format!("{}: {}", x.name, x.compact_text()),
            })
            .collect();
        let nt = history::estimate_contents_tokens(&[agent_core::gemini::Content::user(vec![agent_core::gemini::Part::text(named.join("\n"))])]);
        json!({
            "words_only": {"tokens": tt},
            "names_and_words": {"tokens": nt},
            "messages": m.len(),
            "structured": {"chars": history::contents_json_chars(&s), "tokens": st},
            "compact": {"chars": history::contents_json_chars(&c), "tokens": ct},
            "ratio_tokens": ct as f64 / st as f64,
        })
    };
    let whole = measure(&msgs);
    let s_first = history::fit_budget(&msgs, 12_000, true);
    let c_first = history::fit_budget(&msgs, 12_000, false);
    // Request layouts before and after issue 17, under the implicit cache's rule.
    let mut sim = serde_json::Map::new();
    for (name, format) in [("structured", HistoryFormat::Structured), ("compact", HistoryFormat::Compact)] {
        sim.insert(
            name.into(),
            json!({
                "before": cache::summary(&cache::replay(Layout::Before, format, &msgs, &turns)),
                "after": cache::summary(&cache::replay(Layout::After, format, &msgs, &turns)),
            }),
        );
    }
    println!(
        "{}",
        json!({
            "whole": whole,
            "cache_simulation": sim,
            "budget_12000": {
                "structured_messages_kept": msgs.len() - s_first,
                "compact_messages_kept": msgs.len() - c_first,
            }
        })
    );
}
