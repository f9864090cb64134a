//! Property tests for streamed answers (model text and network bytes are untrusted): every
//! prefix of any Markdown the model may write renders as a valid draft within the limit; the
//! SSE decoder never panics and gives the same events however the bytes are split; merging
//! any chunks never panics and keeps all the visible text.

use agent_core::format::{draft::render_draft, html::validate};
use agent_core::gemini::{Candidate, Content, GenerateContentResponse, Part};
use agent_core::gemini::stream::{merge, visible_so_far, SseDecoder};
use proptest::prelude::*;

const FRAGMENTS: &[&str] = &[
    "**", "*", "_", "__", "~~", "`", "```", "```rust\n", "\n```\n", "||", "[", "](", ")", "](https://x.y/a?b=1&c=\"2\")",
    "<", ">", "&", "\"", "# ", "> ", "- ", "1. ", "\n", "\n\n", "| a | b |\n|---|---|\n| 1 | 2 |\n", "😀", "中文字",
    "\\", "word", "another", " ", "\t", "&amp;", "    indented code\n", "\u{202e}", "\r\n",
];

fn markdown() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(FRAGMENTS), 0..80).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn every_prefix_renders_as_a_valid_bounded_draft(md in markdown(), limit in 24usize..400) {
        let chars: Vec<char> = md.chars().collect();
        for end in (0..=chars.len()).step_by(3) {
            let prefix: String = chars[..end].iter().collect();
            if let Some(d) = render_draft(&prefix, limit) {
                let visible = validate(&d).map_err(|e| TestCaseError::fail(format!("{e}: {prefix:?} → {d:?}")))?;
                prop_assert!(!visible.trim().is_empty(), "{:?}", prefix);
                prop_assert!(visible.encode_utf16().count() <= limit, "{:?}", prefix);
            }
        }
    }

    #[test]
    fn sse_decoding_does_not_depend_on_how_bytes_are_split(bytes in prop::collection::vec(any::<u8>(), 0..300), cuts in prop::collection::vec(0usize..300, 0..6)) {
        let mut whole = SseDecoder::default();
        let mut expected = whole.push(&bytes);
        expected.extend(whole.finish());
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
        cuts.sort_unstable();
        let mut split = SseDecoder::default();
        let mut got = Vec::new();
        let mut at = 0;
        for c in cuts.into_iter().chain(std::iter::once(bytes.len())) {
            got.extend(split.push(&bytes[at..c]));
            at = c;
        }
        got.extend(split.finish());
        // A "\r\n\r\n" cut between its "\r\n" halves is still one separator only if the decoder
        // waits for it: both ways must agree.
        prop_assert_eq!(got, expected);
    }

    #[test]
    fn merged_chunks_keep_every_visible_piece(texts in prop::collection::vec("\\PC{0,12}", 0..10)) {
        let chunks: Vec<GenerateContentResponse> = texts.iter().map(|t| GenerateContentResponse {
            candidates: vec![Candidate { content: Some(Content::model(vec![Part::text(t.clone())])), ..Default::default() }],
            ..Default::default()
        }).collect();
        let (so_far, calls) = visible_so_far(&chunks);
        prop_assert!(!calls);
        prop_assert_eq!(&so_far, &texts.concat());
        let merged = merge(chunks);
        let text = merged.candidates.first().and_then(|c| c.content.as_ref()).map(|c| c.visible_text()).unwrap_or_default();
        prop_assert_eq!(text, texts.concat());
    }
}
