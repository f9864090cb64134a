//! Inputs shared by the benchmarks: the recorded 500-message conversation and real updates,
//! loaded from `tests/fixtures`.

pub mod cache;

use agent_core::conversation::Part;
use agent_core::gemini::{Content, FunctionCall, Part as GPart};
use agent_core::history::{BotTurn, HistoryMessage, Role};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The 78 real Telegram updates.
pub fn updates() -> Vec<Vec<u8>> {
    let dir = root().join("tests/fixtures/telegram");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// The recorded 500-message group conversation as history, with the bot's turns.
pub fn group_500() -> (Vec<HistoryMessage>, BTreeMap<String, BotTurn>) {
    let raw = std::fs::read_to_string(root().join("tests/fixtures/conversations/group_500.json")).unwrap();
    let v: Value = serde_json::from_str(&raw).unwrap();
    let mut msgs = Vec::new();
    let mut turns = BTreeMap::new();
    for (i, m) in v["messages"].as_array().unwrap().iter().enumerate() {
        let seq = i as i64 + 1;
        let text = m["text"].as_str().unwrap_or_default().to_string();
        let mut parts = Vec::new();
        if let Some(media) = m.get("media") {
            parts.push(Part::Media {
                kind: media["kind"].as_str().unwrap().into(),
                detail: media["detail"].as_str().unwrap().into(),
                file_id: Some("file".into()),
                file_unique_id: None,
                mime_type: None,
                thumb_file_id: None,
                size: None,
            });
        }
        if !text.is_empty() {
            parts.push(Part::text(text.clone()));
        }
        let bot = m["bot"].as_bool().unwrap_or(false);
        let turn_id = m["turn"].as_str().map(String::from);
        if let Some(t) = &turn_id {
            let mut args = json!({"text": text});
            if let Some(r) = m["reply_to"].as_i64() {
                args["reply_to_message_id"] = json!(r);
            }
            turns.insert(
                t.clone(),
                BotTurn {
                    contents: vec![Content::model(vec![GPart {
                        function_call: Some(FunctionCall { id: Some(format!("call-{t}")), name: "send_message".into(), args }),
                        thought_signature: Some("c2lnbmF0dXJl".repeat(8)),
                        ..Default::default()
                    }])],
                    outcomes: [(0, json!({"ok": true, "message_ids": [m["message_id"]]}))].into(),
                },
            );
        }
        msgs.push(HistoryMessage {
            seq,
            message_id: m["message_id"].as_i64(),
            role: if bot { Role::Bot } else { Role::User },
            user_id: m["user_id"].as_i64(),
            name: m["name"].as_str().unwrap_or_default().into(),
            username: m["username"].as_str().map(String::from),
            reply_to: if bot { None } else { m["reply_to"].as_i64() },
            reply_info: None,
            forwarded_from: None,
            parts,
            date: m["date"].as_i64().unwrap_or_default(),
            edited: false,
            turn_id,
            answered_upto: bot.then_some(seq - 1),
            media_group_id: None,
            album_ids: Vec::new(),
        });
    }
    (msgs, turns)
}

/// A long Markdown answer of about `chars` characters: headings, lists, code, links, quotes.
pub fn long_markdown(chars: usize) -> String {
    let mut md = String::new();
    let mut i = 0;
    while md.len() < chars {
        md.push_str(&format!(
            "## Section {i}\n\nSome **bold** and *italic* text with `inline code`, a [link](https://example.com/{i}) & <angle> brackets.\n\n\
             - first point about {i}\n- second point, longer, with more words to wrap around\n  1. nested\n\n\
             > a quoted line number {i}\n\n```rust\nfn section_{i}() -> u32 {{\n    let x = {i} * 2;\n    x + 1\n}}\n```\n\n"
        ));
        i += 1;
    }
    md
}
