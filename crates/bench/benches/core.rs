//! Core speed (criterion): normalising 10,000 updates, building a prompt from 500 messages,
//! rendering and splitting a 20,000-character Markdown answer.

use agent_bench::{group_500, long_markdown, updates};
use agent_core::config::HistoryFormat;
use agent_core::conversation::ChatKind;
use agent_core::format::render_reply;
use agent_core::telegram::gating::Trigger;
use agent_core::history;
use agent_core::telegram::normalize::normalize;
use agent_core::turn::prompt::{system_instruction, turn_context, ChatDetails, PromptInput, PromptLibrary, Situation};
use agent_core::telegram::parse_update;
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use std::collections::BTreeMap;

fn normalize_10k(c: &mut Criterion) {
    let raw = updates();
    c.bench_function("normalize_10000_updates", |b| {
        b.iter(|| {
            let mut parts = 0;
            for i in 0..10_000 {
                if let Ok(u) = parse_update(black_box(&raw[i % raw.len()])) {
                    if let agent_core::conversation::Inbound::Message(m) = normalize(&u) {
                        parts += m.parts.len();
                    }
                }
            }
            parts
        })
    });
}

fn prompt_500(c: &mut Criterion) {
    let (msgs, turns) = group_500();
    let library = PromptLibrary { instructions: "You are {{bot_name}}.".repeat(20), ..Default::default() };
    let values: BTreeMap<String, String> = [("bot_name".to_string(), "Edge".to_string())].into();
    let chat = ChatDetails { kind: ChatKind::Supergroup, title: Some("Friends".into()), topic_id: None };
    let memories: Vec<String> = (0..40).map(|i| format!("memory {i}: someone likes something number {i}")).collect();
    let now = chrono::DateTime::from_timestamp(1_795_000_000, 0).unwrap();
    for (name, format) in [("build_prompt_500_messages_structured", HistoryFormat::Structured), ("build_prompt_500_messages_compact", HistoryFormat::Compact)] {
        c.bench_function(name, |b| {
            b.iter(|| {
                let mut m = msgs.clone();
                history::chronological(&mut m);
                let first = history::fit_budget(&m, 12_000, format == HistoryFormat::Structured);
                let m = &m[first..];
                let situation = Situation {
                    target_message_id: m.last().and_then(|x| x.message_id),
                    new_session: false,
                    trigger: Trigger::Mention,
                    reaction: None,
                    format,
                    history_cut_without_summary: first > 0,
                    scheduled: None,
                };
                let input = PromptInput {
                    situation: &situation,
                    library: &library,
                    persona: "default",
                    roles: &[],
                    values: &values,
                    plan: None,
                    curated: &[],
                    memories: &memories,
                    memory_budget: 1500,
                    now,
                    timezone: "Europe/Berlin",
                    zones: &agent_core::time_zone::TzDb,
                    chat: &chat,
                    summary: None,
                };
                let system = system_instruction(&input);
                let mut contents = match format {
                    HistoryFormat::Structured => history::render_structured(m, &turns),
                    HistoryFormat::Compact => history::render_compact(m, situation.target_message_id),
                };
                history::append_turn_context(&mut contents, turn_context(&input));
                black_box((system.len(), serde_json::to_string(&contents).unwrap().len()))
            })
        });
    }
}

fn render_split_20k(c: &mut Criterion) {
    let md = long_markdown(20_000);
    c.bench_function("render_and_split_20000_char_markdown", |b| b.iter(|| render_reply(black_box(&md), 4096).len()));
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(4));
    targets = normalize_10k, prompt_500, render_split_20k
}
criterion_main!(benches);
