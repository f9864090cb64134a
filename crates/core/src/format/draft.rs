//! A draft of an answer still being written: the Markdown so far, completed so that what is
//! open closes (a code block, inline code, bold), rendered like a reply, as the one chunk
//! being written. Telegram shows it with `sendMessageDraft` until the final message arrives.
//!
//! Invariants (INVARIANTS.md): "Drafts are never messages" (a draft's links show as their
//! words only: it is shown before the turn's link checks, in every round of a turn), "Early
//! chunks are the plan's chunks" ([`settled_chunks`]).
//!
//! Also (tested on every prefix of real answers):
//! - a draft is valid Telegram HTML ([`super::html::validate`]) and never empty;
//! - it has at most `limit` visible characters: a long answer shows its last chunk (the
//!   earlier ones are complete);
//! - [`settled_chunks`] are the leading chunks of the final reply that no continuation of the
//!   text can change (tested against the final reply of every prefix of long answers).

use super::{html, render_reply, Chunk};

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

/// The draft to show for the answer so far, if there is anything to show. Its links are plain
/// text (see [`without_links`]).
pub fn render_draft(partial: &str, limit: usize) -> Option<String> {
    let chunks = render_reply(&complete(partial), limit);
    let last = chunks.into_iter().last()?;
    let html = without_links(&last.html);
    match html::validate(&html) {
        Ok(_) => Some(html),
        Err(_) => Some(super::markdown::escape(&last.plain)),
    }
}

/// Rendered HTML with every link reduced to its text: `<a href="…">text</a>` → `text`. A draft
/// goes out before the turn's end-of-turn checks (previews off for links no person posted), in
/// any round, after a fetch or a search too; no destination hides behind a link's words. A URL
/// the model writes out stays visible as text (Telegram may still make it tappable), as it
/// would in the final message. (The renderer escapes text, so `<a` starts only its own tags.)
pub fn without_links(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(at) = rest.find("<a") {
        let after = &rest[at + 2..];
        if !after.starts_with([' ', '>']) {
            out.push_str(&rest[..at + 2]);
            rest = after;
            continue;
        }
        out.push_str(&rest[..at]);
        rest = after.find('>').map_or("", |end| &after[end + 1..]);
    }
    out.push_str(rest);
    out.replace("</a>", "")
}

/// The leading chunks of the final reply (`render_reply` of the sanitised answer) that are
/// fixed whatever text follows `partial`. Only text up to a safe point counts: a blank line
/// outside any code fence followed by a line that starts a new plain block (a letter or digit
/// at the start of the line, not an ordered list's number), so no block before it can still
/// change. Of that text's chunks the last is not settled (more text may still join it); the
/// others are, because each cut was chosen inside text that is complete. An answer that
/// defines reference links (`[x]: url`) settles nothing: a later definition could change an
/// earlier chunk.
pub fn settled_chunks(partial: &str, limit: usize) -> Vec<Chunk> {
    // Cheap first: text shorter than one chunk settles nothing.
    if partial.encode_utf16().count() <= limit {
        return Vec::new();
    }
    let Some(point) = safe_point(partial) else {
        return Vec::new();
    };
    let mut chunks = render_reply(&crate::history::sanitize_reply(&partial[..point]), limit);
    chunks.pop();
    chunks
}

/// The byte offset of the last safe point of `text` (see [`settled_chunks`]).
fn safe_point(text: &str) -> Option<usize> {
    let mut in_fence = false;
    let mut prev_blank = false;
    let mut best = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') && trimmed.contains("]:") {
            return None; // a reference definition: give up on settling
        }
        if !in_fence && prev_blank && starts_plain_block(line) {
            best = Some(offset);
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
        }
        prev_blank = !in_fence && line.ends_with('\n') && line.trim().is_empty();
        offset += line.len();
    }
    best
}

/// A line that starts a new plain block: a letter or digit in the first column, not the number
/// of an ordered list item.
fn starts_plain_block(line: &str) -> bool {
    let Some(first) = line.chars().next() else {
        return false;
    };
    if !first.is_alphanumeric() {
        return false;
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    !(digits > 0 && matches!(line[digits..].chars().next(), Some('.' | ')') | None))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Long answers of the shapes models write: paragraphs, lists, code, quotes, headings.
    fn long_answers() -> Vec<String> {
        let para = "Some **bold** words and _italics_ with `code` and a [link](https://example.com/a) & <tags>, then more text to make it long enough to matter for a split. ";
        let mut a = String::new();
        for i in 0..24 {
            a.push_str(&format!("## Part {i}\n\n{}\n\n", para.repeat(3)));
            a.push_str("- one item\n- two **items**\n\n- loose item\n\n");
            a.push_str(&format!("1. first\n2. second\n\n```rust\nfn main() {{ println!(\"{i} <x> & y\"); }}\n\n// blank line inside\n```\n\n> quoted {i}\n\n"));
        }
        let b = format!("{}\n\nEnd.", "word ".repeat(2500));
        let c = format!(
            "Intro.\n\n```\n{}```\n\nAfter the code.\n\n{}",
            "let x = 1;\n\n".repeat(700),
            "Tail text. ".repeat(300)
        );
        vec![a, b, c]
    }

    #[test]
    fn settled_chunks_are_the_final_replys_first_chunks_for_every_prefix() {
        for (n, answer) in long_answers().iter().enumerate() {
            let finals = render_reply(&crate::history::sanitize_reply(answer), 4096);
            let mut most = 0;
            let mut at = 0;
            while at <= answer.len() {
                while !answer.is_char_boundary(at) {
                    at += 1;
                }
                let settled = settled_chunks(&answer[..at], 4096);
                assert!(
                    settled.len() <= finals.len() && settled[..] == finals[..settled.len()],
                    "answer {n}, prefix {at}: a settled chunk differs from the final one"
                );
                assert!(
                    settled.len() >= most,
                    "answer {n}, prefix {at}: settled chunks never shrink"
                );
                most = settled.len();
                at += 37;
            }
            assert!(
                finals.len() >= 2,
                "answer {n} is long ({} chunks)",
                finals.len()
            );
            assert!(
                most >= 1,
                "answer {n}: something settled while it was written"
            );
        }
    }

    #[test]
    fn nothing_settles_before_the_text_is_past_a_chunk_and_a_safe_point() {
        assert!(settled_chunks(&"short ".repeat(10), 4096).is_empty());
        // Long, but one paragraph: its end (and so its cuts) may still change.
        assert!(settled_chunks(&"word ".repeat(2000), 4096).is_empty());
        // Inside an open code block nothing is settled either.
        let open_code = format!("Intro.\n\n```\n{}", "x = 1\n\nAnd more\n".repeat(800));
        assert!(settled_chunks(&open_code, 4096).is_empty());
        // A list that may still go on (the next line is an item) is not a safe point.
        let list = format!("{}\n\n- a\n\n- b\n\n1. c", "word ".repeat(2000));
        assert!(settled_chunks(&list, 4096).is_empty());
        // A reference definition anywhere: nothing settles.
        let refs = format!(
            "{}\n\nSee [x].\n\n[x]: https://e.com\n\nMore",
            "word ".repeat(2000)
        );
        assert!(settled_chunks(&refs, 4096).is_empty());
    }

    #[test]
    fn a_long_paragraph_then_a_new_one_settles_its_first_chunk() {
        let text = format!("{}\n\nNext paragraph st", "word ".repeat(1000));
        let settled = settled_chunks(&text, 4096);
        assert_eq!(settled.len(), 1);
        assert!(settled[0].plain.encode_utf16().count() <= 4096);
        assert_eq!(
            settled[0],
            render_reply(
                &format!(
                    "{}\n\nNext paragraph and whatever follows.",
                    "word ".repeat(1000)
                ),
                4096
            )[0]
        );
    }

    #[test]
    fn open_code_blocks_and_bold_are_closed() {
        assert_eq!(render_draft("Here:\n```rust\nfn main() {", 4096).unwrap(), "Here:\n\n<pre><code class=\"language-rust\">fn main() {</code></pre>");
        assert_eq!(render_draft("Hello **wor", 4096).unwrap(), "Hello <b>wor</b>");
        assert_eq!(render_draft("Run `ls -", 4096).unwrap(), "Run <code>ls -</code>");
        assert_eq!(render_draft("Hello **", 4096).unwrap(), "Hello");
    }

    /// Issue 35 item 10: a draft goes out before the end-of-turn checks (previews off for
    /// links no person posted), in every round, after a fetch or a search too: its links are
    /// plain text, never `<a href>`, so no destination the model chose hides behind words in
    /// a draft.
    #[test]
    fn links_in_a_draft_are_plain_text() {
        for text in [
            "See [the docs](https://attacker.example/?q=SECRET) now",
            "<https://attacker.example/?q=SECRET>",
            "mention [me](tg://user?id=1)",
            "**bold [x](https://attacker.example/b)**",
        ] {
            let d = render_draft(text, 4096).unwrap();
            assert!(!d.contains("<a") && !d.contains("href"), "{text:?} → {d:?}");
            assert!(html::validate(&d).is_ok(), "{d}");
        }
        assert_eq!(render_draft("See [the docs](https://attacker.example/?q=SECRET) now", 4096).unwrap(), "See the docs now");
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
