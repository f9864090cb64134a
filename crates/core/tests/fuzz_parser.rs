//! Fuzzing the webhook's parser: mutated real updates and random bytes never panic, and what
//! parses always normalises. (The end-to-end suite sends a sample of these to the worker.)

use agent_core::conversation::Inbound;
use agent_core::telegram::normalize::normalize;
use agent_core::telegram::parse_update;
use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::OnceLock;

fn fixtures() -> &'static Vec<Vec<u8>> {
    static F: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    F.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/telegram");
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .map(|p| std::fs::read(p).unwrap())
            .collect();
        v.sort();
        v
    })
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), prop::collection::vec(prop::sample::select(b"{}[]\",:0123456789-.etrufalsn\\ ".to_vec()), 1..8))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<usize>(), 1usize..40).prop_map(|(i, n)| Mutation::Delete(i, n)),
    ]
}

fn apply(mut bytes: Vec<u8>, m: &Mutation) -> Vec<u8> {
    let len = bytes.len().max(1);
    match m {
        Mutation::Flip(i, b) => {
            let i = i % len;
            if i < bytes.len() {
                bytes[i] = *b;
            }
        }
        Mutation::Truncate(i) => bytes.truncate(i % len),
        Mutation::Insert(i, b) => {
            let i = i % (bytes.len() + 1);
            bytes.splice(i..i, b.iter().copied());
        }
        Mutation::Delete(i, n) => {
            let i = i % len;
            let end = (i + n).min(bytes.len());
            if i < end {
                bytes.drain(i..end);
            }
        }
    }
    bytes
}

fn check(bytes: &[u8]) {
    if let Ok(update) = parse_update(bytes) {
        match normalize(&update) {
            Inbound::Message(m) | Inbound::Edited(m) => {
                assert!(!m.parts.is_empty());
                let _ = m.render_compact();
            }
            Inbound::Reaction(_) | Inbound::Ignored { .. } => {}
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn mutated_updates_never_panic(which in any::<usize>(), ms in prop::collection::vec(mutation(), 1..4)) {
        let f = fixtures();
        let mut bytes = f[which % f.len()].clone();
        for m in &ms {
            bytes = apply(bytes, m);
        }
        check(&bytes);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        check(&bytes);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// Model output is untrusted too: whatever the model writes, turning it into plan steps
    /// and messages never panics.
    #[test]
    fn model_text_never_panics(text in "\\PC{0,40}", prefix in prop::sample::select(vec!["", "bot:", "#12 bot: ", "[meta] x\n", "#", "🤖"])) {
        let text = format!("{prefix}{text}");
        let _ = agent_core::history::sanitize_reply(&text);
        let call = agent_core::gemini::FunctionCall { id: None, name: "send_message".into(), args: serde_json::json!({"text": text}) };
        let _ = agent_core::turn::tools::parse_call(&call, &[]);
        let _ = agent_core::format::render_reply(&text, 4096);
        let _ = agent_core::telegram::gating::contains_word(&text, "edge");
        let _ = agent_core::memory::fts_query(&text, 8);
        let _ = agent_core::fetch::html_to_text(&text, 100);
    }
}
