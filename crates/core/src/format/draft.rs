//! A draft of an answer still being written: the Markdown so far, completed so that what is
//! open closes (a code block, inline code, bold), rendered like a reply, as the one chunk
//! being written. Telegram shows it with `sendMessageDraft` until the final message arrives.
//!
//! Invariants (tested on every prefix of real answers):
//! - a draft is valid Telegram HTML (`super::html::validate`) and never empty;
//! - it has at most `limit` visible characters: a long answer shows its last chunk (the
//!   earlier ones are complete and wait for the final messages).

use super::{html, render_reply};

/// Closes what a cut-off Markdown text leaves open: a fenced code block, then (outside code)
/// an inline code span and bold on the last paragraph.
pub fn complete(partial: &str) -> String {
    let mut text = partial.to_string();
    let fences = text.lines().filter(|l| l.trim_start().starts_with("```")).count();
    if fences % 2 == 1 {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("```");
        return text;
    }
    let last_paragraph = text.rsplit("\n\n").next().unwrap_or_default().to_string();
    let ticks = last_paragraph.matches('`').count();
    if ticks % 2 == 1 {
        text.push('`');
        return text;
    }
    // Inline code is literal: only count bold markers outside it.
    let outside: String = last_paragraph.split('`').step_by(2).collect();
    if outside.matches("**").count() % 2 == 1 {
        // "**wor" → "**wor**" (a trailing "**" alone would close nothing: drop it).
        if text.trim_end().ends_with("**") {
            text.truncate(text.trim_end().len() - 2);
        } else {
            text = text.trim_end().to_string();
            text.push_str("**");
        }
    }
    text
}

/// The draft to show for the answer so far, if there is anything to show.
pub fn render_draft(partial: &str, limit: usize) -> Option<String> {
    let chunks = render_reply(&complete(partial), limit);
    let last = chunks.into_iter().last()?;
    match html::validate(&last.html) {
        Ok(_) => Some(last.html),
        Err(_) => Some(super::markdown::escape(&last.plain)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_code_blocks_and_bold_are_closed() {
        assert_eq!(render_draft("Here:\n```rust\nfn main() {", 4096).unwrap(), "Here:\n\n<pre><code class=\"language-rust\">fn main() {</code></pre>");
        assert_eq!(render_draft("Hello **wor", 4096).unwrap(), "Hello <b>wor</b>");
        assert_eq!(render_draft("Run `ls -", 4096).unwrap(), "Run <code>ls -</code>");
        assert_eq!(render_draft("Hello **", 4096).unwrap(), "Hello");
    }

    #[test]
    fn nothing_visible_is_no_draft() {
        assert_eq!(render_draft("", 4096), None);
        assert_eq!(render_draft("  \n", 4096), None);
    }

    #[test]
    fn every_prefix_of_an_answer_is_a_valid_draft_within_the_limit() {
        let answer = "# Title\n\nSome **bold** and _it_ text with `code` and a [link](https://example.com).\n\n```python\nprint('<hi>' & 1)\n```\n\n> quoted **stuff**\n\n- one\n- two ~~gone~~\n\n".repeat(3);
        let chars: Vec<char> = answer.chars().collect();
        for end in 1..=chars.len() {
            let prefix: String = chars[..end].iter().collect();
            if let Some(d) = render_draft(&prefix, 200) {
                let visible = html::validate(&d).unwrap_or_else(|e| panic!("prefix {end}: {e}: {d}"));
                assert!(!visible.trim().is_empty(), "prefix {end}");
                assert!(visible.encode_utf16().count() <= 200, "prefix {end}");
            }
        }
    }
}
