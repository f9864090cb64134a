//! Property tests: any Markdown the model may write renders to HTML that Telegram accepts, and
//! splitting keeps every chunk valid, within the limit, non-empty, and loses no text.

use agent_core::format::{html::validate, markdown::to_telegram_html, render_reply, split::split_html};
use agent_core::telegram::utf16_len;
use proptest::prelude::*;

const FRAGMENTS: &[&str] = &[
    "**", "*", "_", "__", "~~", "`", "```", "```rust\n", "\n```\n", "||", "[", "](", ")", "](https://x.y/a?b=1&c=\"2\")",
    "https://example.com/path_(x)", "<", ">", "&", "\"", "'", "# ", "## ", "> ", ">> ", "- ", "* ", "1. ", "2) ", "\n",
    "\n\n", "|", "| a | b |\n|---|---|\n| 1 | 2 |\n", "---\n", "😀", "中文字", "👨\u{200d}👩\u{200d}👧", "<u>", "</u>",
    "<b>", "</i>", "\\", "word", "another", " ", "  ", "\t", "&amp;", "&#x1F600;", "![img](https://i.png)", "- [ ] ",
    "    indented code\n", "[^1]", "<script>", "\u{202e}", "\r\n",
];

fn markdown() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(FRAGMENTS), 0..120).prop_map(|v| v.concat())
}

fn no_space(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn rendered_markdown_is_valid_telegram_html(md in markdown()) {
        let html = to_telegram_html(&md);
        prop_assert!(validate(&html).is_ok(), "{:?}\n→ {:?}\n{:?}", md, html, validate(&html));
    }

    #[test]
    fn split_chunks_are_valid_bounded_and_lossless(md in markdown(), limit in 24usize..300) {
        let html = to_telegram_html(&md);
        let whole = validate(&html).unwrap();
        let chunks = split_html(&html, limit);
        let mut joined = String::new();
        for c in &chunks {
            let text = validate(c).map_err(|e| TestCaseError::fail(format!("{e}: {c:?}")))?;
            prop_assert!(utf16_len(&text) <= limit, "{} > {limit}: {c:?}", utf16_len(&text));
            prop_assert!(!text.trim().is_empty());
            joined.push_str(&text);
        }
        prop_assert_eq!(no_space(&joined), no_space(&whole));
    }

    #[test]
    fn render_reply_fits_telegram(md in markdown()) {
        for chunk in render_reply(&md, 4096) {
            prop_assert!(validate(&chunk.html).is_ok());
            prop_assert!(utf16_len(&chunk.plain) <= 4096);
        }
    }
}

#[test]
fn ten_thousand_characters_with_code_split_cleanly() {
    let mut md = String::new();
    for i in 0..40 {
        md.push_str(&format!("## Part {i}\n\nSome **bold** text with `code` and a [link](https://e.com/{i}).\n\n"));
        md.push_str("```python\n");
        for j in 0..6 {
            md.push_str(&format!("print('line {j} of block {i} < & >')\n"));
        }
        md.push_str("```\n\n");
    }
    assert!(md.len() > 10_000);
    let chunks = render_reply(&md, 4096);
    assert!(chunks.len() >= 3);
    for c in &chunks {
        let text = validate(&c.html).unwrap();
        assert!(utf16_len(&text) <= 4096);
        // A cut inside a code block closes and reopens it.
        assert_eq!(c.html.matches("<pre>").count(), c.html.matches("</pre>").count());
    }
}
