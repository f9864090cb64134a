//! Escaping outside text (a person's name, a stored note, a title) for the Markdown the bot
//! composes itself (command replies), so that [`super::render_reply`] shows it as exactly its
//! characters: no link, no `tg://user` mention, no bold, no spoiler, no code block, no raw HTML.
//!
//! Invariants (INVARIANTS.md): "The bot's own Markdown never links outside text". The
//! property tested below: for any text without NUL, rendering `escape_markdown(text)` gives
//! back `text` as plain text, with no tag at all, apart from trailing whitespace, which the
//! renderer trims from the whole reply.
//!
//! How: every ASCII punctuation character is backslash-escaped (CommonMark allows it for all
//! of them); the characters the renderer or CommonMark treat specially even when escaped are
//! written as numeric character references: `|` (the renderer's `||` spoilers), spaces and
//! tabs at the start or end of a line (trimmed or read as indentation), `\r` (a line ending).
//! A line break becomes a hard break (`\` at the end of the line), so blank lines never start
//! a new paragraph.
//!
//! Telegram itself still detects a bare `@username` or URL in plain text as an entity
//! (server-side); that is not a link the bot's Markdown made and carries no hidden target.

/// Escapes `text` so that the Markdown renderer shows it literally.
pub fn escape_markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    // The renderer trims the reply's end; escaping what it would trim would leave a stray
    // backslash (a hard break cannot end a paragraph).
    let mut lines = text.trim_end().split('\n').peekable();
    while let Some(line) = lines.next() {
        escape_line(&mut out, line);
        if lines.peek().is_some() {
            // A hard break. An empty line becomes a line holding only `\`: not blank, so the
            // paragraph goes on, and itself a hard break.
            out.push_str("\\\n");
        }
    }
    out
}

fn escape_line(out: &mut String, line: &str) {
    let chars: Vec<char> = line.chars().collect();
    let lead = chars.iter().take_while(|c| matches!(c, ' ' | '\t')).count();
    let trail = chars.iter().rev().take_while(|c| matches!(c, ' ' | '\t')).count();
    let trail_from = chars.len().saturating_sub(trail).max(lead);
    for (i, &c) in chars.iter().enumerate() {
        let edge = i < lead || i >= trail_from;
        match c {
            ' ' if edge => out.push_str("&#32;"),
            '\t' if edge => out.push_str("&#9;"),
            '\t' => out.push_str("&#9;"),
            '|' => out.push_str("&#124;"),
            '\r' => out.push_str("&#13;"),
            '\0' => out.push('\u{FFFD}'),
            c if c.is_ascii_punctuation() => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{html, markdown, render_reply};
    use proptest::prelude::*;

    /// What a person sees: the rendered HTML must hold no tag, and its text must be `text`.
    fn shown(text: &str) -> (String, String) {
        let rendered = markdown::to_telegram_html(&escape_markdown(text));
        (rendered.clone(), html::to_plain(&rendered))
    }

    #[test]
    fn links_mentions_and_formatting_stay_literal() {
        for text in [
            "[click](https://evil.example)",
            "[hi](tg://user?id=123) @someone",
            "**bold** _it_ ~~s~~ ||spoiler|| `code`",
            "<a href=\"https://evil.example\">x</a> &amp; &lt;",
            "# heading\n- item\n1. one\n> quote\n    indented\n```\nfence\n```",
            "a\n\n\nb\r\nc\t d  ",
            "  lead\n\n",
            "| a | b |\n|---|---|\n| 1 | 2 |",
            "https://evil.example <https://evil.example> www.evil.example",
            "Name\\ with \\* backslashes\\",
        ] {
            let (rendered, plain) = shown(text);
            assert!(!rendered.contains('<'), "{text:?} rendered as {rendered:?}");
            assert_eq!(plain, text.trim_end(), "{text:?} rendered as {rendered:?}");
        }
    }

    #[test]
    fn render_reply_of_escaped_text_has_no_link() {
        let chunks = render_reply(&format!("Note: {}", escape_markdown("[click](https://evil.example) @someone")), 4096);
        assert_eq!(chunks.len(), 1);
        assert!(!chunks[0].html.contains("<a"));
        assert_eq!(chunks[0].plain, "Note: [click](https://evil.example) @someone");
    }

    fn outside_text() -> impl Strategy<Value = String> {
        let pieces = prop::sample::select(vec![
            "[", "]", "(", ")", "*", "_", "~", "`", "|", "||", "#", ">", "<", "&", "!", "-", "+", "=", ".", ":", "\\",
            "@", "/", "\"", "'", "{", "}", "%", ";", "$", "^", "?", ",", " ", "  ", "    ", "\t", "\n", "\n\n", "\r",
            "\r\n", "\u{a0}", "a", "Bob", "1.", "http://x.y", "tg://user?id=1", "&amp;", "&#32;", "é", "🤖", "<b>",
        ]);
        prop::collection::vec(pieces, 0..24).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn escaped_text_renders_to_exactly_its_characters(text in outside_text()) {
            let (rendered, plain) = shown(&text);
            prop_assert!(!rendered.contains('<'), "{:?} rendered as {:?}", text, rendered);
            prop_assert_eq!(plain, text.trim_end());
        }

        #[test]
        fn any_text_renders_literally(text in "\\PC{0,40}") {
            let text = text.replace('\0', "");
            let (rendered, plain) = shown(&text);
            prop_assert!(!rendered.contains('<'), "{:?} rendered as {:?}", text, rendered);
            prop_assert_eq!(plain, text.trim_end());
        }
    }
}
