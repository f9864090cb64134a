//! Splits a rendered reply into messages Telegram accepts: each at most 4096 visible
//! characters (counted in UTF-16 code units, which is never less than Telegram's own count
//! of code points), cut at a paragraph, then a line, then a word boundary, and never inside an
//! HTML entity, a surrogate pair or an emoji sequence.
//!
//! Invariants (INVARIANTS.md): "Formatting". Also: every chunk is valid HTML on its own
//! (tags open at a cut are closed at the end of the chunk and reopened, with their
//! attributes, at the start of the next: a code block split in two is two code blocks of the
//! same language), and no chunk is empty or blank.

use super::html::{tokenize, Token};

/// Telegram's limit for a message text.
pub const TELEGRAM_LIMIT: usize = 4096;

#[derive(Debug, Clone)]
enum Atom<'a> {
    /// A visible character (or an entity that shows as one), with its UTF-16 width.
    Char { src: &'a str, ch: char, units: usize },
    Open(&'a str, String),
    Close(String),
}

fn atoms(html: &str) -> Vec<Atom<'_>> {
    let tokens = match tokenize(html) {
        Ok(t) => t,
        // Not HTML we produced: treat it all as text.
        Err(_) => vec![Token::Text(html)],
    };
    let mut out = Vec::with_capacity(html.len());
    for token in tokens {
        match token {
            Token::Open { name, raw } => out.push(Atom::Open(raw, name)),
            Token::Close { name, .. } => out.push(Atom::Close(name)),
            Token::Text(text) => {
                let mut iter = text.char_indices().peekable();
                while let Some((i, c)) = iter.next() {
                    if c == '&' {
                        if let Some(end) = text[i..].find(';').filter(|e| *e <= 10) {
                            let src = &text[i..i + end + 1];
                            let shown = super::html::unescape(src).ok().and_then(|s| s.chars().next());
                            if let Some(ch) = shown {
                                out.push(Atom::Char { src, ch, units: ch.len_utf16() });
                                while iter.peek().is_some_and(|(j, _)| *j < i + end + 1) {
                                    iter.next();
                                }
                                continue;
                            }
                        }
                    }
                    out.push(Atom::Char { src: &text[i..i + c.len_utf8()], ch: c, units: c.len_utf16() });
                }
            }
        }
    }
    out
}

/// Characters that continue the previous one: never cut right before them.
fn is_continuation(c: char) -> bool {
    matches!(c as u32, 0x200D | 0xFE00..=0xFE0F | 0x0300..=0x036F | 0x1F3FB..=0x1F3FF | 0xE0020..=0xE007F | 0x20E3)
}

/// Splits rendered Telegram HTML into chunks of at most `limit` visible UTF-16 units.
pub fn split_html(html: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(16);
    let atoms = atoms(html);
    let cuts = cut_points(&atoms, limit);

    let mut chunks = Vec::new();
    let mut stack: Vec<(&str, String)> = Vec::new();
    let mut start = 0;
    for (end, resume) in cuts.into_iter().chain(std::iter::once((atoms.len(), atoms.len()))) {
        let mut chunk: String = stack.iter().map(|(raw, _)| *raw).collect();
        let mut visible = String::new();
        for atom in &atoms[start..end] {
            match atom {
                Atom::Char { src, ch, .. } => {
                    chunk.push_str(src);
                    visible.push(*ch);
                }
                Atom::Open(raw, name) => {
                    chunk.push_str(raw);
                    stack.push((raw, name.clone()));
                }
                Atom::Close(name) => {
                    chunk.push_str("</");
                    chunk.push_str(name);
                    chunk.push('>');
                    if let Some(pos) = stack.iter().rposition(|(_, n)| n == name) {
                        stack.truncate(pos);
                    }
                }
            }
        }
        for (_, name) in stack.iter().rev() {
            chunk.push_str("</");
            chunk.push_str(name);
            chunk.push('>');
        }
        // The whitespace at a cut is dropped, but tags inside it still count.
        for atom in &atoms[end..resume] {
            match atom {
                Atom::Open(raw, name) => stack.push((raw, name.clone())),
                Atom::Close(name) => {
                    if let Some(pos) = stack.iter().rposition(|(_, n)| n == name) {
                        stack.truncate(pos);
                    }
                }
                Atom::Char { .. } => {}
            }
        }
        if !visible.trim().is_empty() {
            chunks.push(chunk);
        }
        start = resume;
    }
    chunks
}

/// Where to cut: pairs of (end of this chunk, start of the next) atom indices.
fn cut_points(atoms: &[Atom<'_>], limit: usize) -> Vec<(usize, usize)> {
    let mut cuts = Vec::new();
    let mut start = 0;
    while start < atoms.len() {
        let mut units = 0;
        // Candidate (end, resume) pairs by priority: word, line, paragraph; and the same
        // past half the limit, which are preferred so chunks are not needlessly short.
        let mut best: [Option<(usize, usize)>; 3] = [None; 3];
        let mut best_late: [Option<(usize, usize)>; 3] = [None; 3];
        let mut i = start;
        let mut prev_char: Option<(usize, char)> = None;
        while i < atoms.len() {
            if let Atom::Char { ch, units: u, .. } = atoms[i] {
                if units + u > limit {
                    break;
                }
                let candidate = match (ch, prev_char) {
                    ('\n', Some((j, '\n'))) if j > start => Some((2, (j, i + 1))),
                    ('\n', _) => Some((1, (i, i + 1))),
                    (' ' | '\t', _) => Some((0, (i, i + 1))),
                    _ => None,
                };
                if let Some((p, cut)) = candidate {
                    best[p] = Some(cut);
                    if units >= limit / 2 {
                        best_late[p] = Some(cut);
                    }
                }
                units += u;
                prev_char = Some((i, ch));
            }
            i += 1;
        }
        if i >= atoms.len() {
            break;
        }
        let cut = best_late.iter().rev().flatten().next().or_else(|| best.iter().rev().flatten().next()).copied();
        let (end, resume) = match cut {
            Some((end, resume)) if end > start => (end, resume),
            _ => {
                // No whitespace at all: cut hard, but not inside an emoji sequence.
                let mut c = i;
                while c > start + 1 {
                    let next_is_cont = matches!(atoms.get(c), Some(Atom::Char { ch, .. }) if is_continuation(*ch));
                    let prev_is_zwj = matches!(atoms.get(c - 1), Some(Atom::Char { ch: '\u{200D}', .. }));
                    if !next_is_cont && !prev_is_zwj {
                        break;
                    }
                    c -= 1;
                }
                (c, c)
            }
        };
        cuts.push((end, resume));
        start = resume;
    }
    cuts
}

/// Splits plain text (no markup) into chunks of at most `limit` UTF-16 units, with the same
/// boundary preferences. The text is escaped first and unescaped after, so `<` and `&` are safe.
pub fn split_plain(text: &str, limit: usize) -> Vec<String> {
    split_html(&super::markdown::escape(text), limit)
        .into_iter()
        .map(|chunk| super::html::to_plain(&chunk))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::html::validate;
    use super::*;
    use crate::telegram::utf16_len;

    fn check(chunks: &[String], limit: usize) {
        for c in chunks {
            let text = validate(c).unwrap_or_else(|e| panic!("{e}: {c}"));
            assert!(utf16_len(&text) <= limit, "chunk of {} units", utf16_len(&text));
            assert!(!text.trim().is_empty());
        }
    }

    #[test]
    fn short_text_is_one_chunk() {
        assert_eq!(split_html("<b>hi</b>", 4096), vec!["<b>hi</b>"]);
        assert!(split_html("   ", 4096).is_empty());
    }

    #[test]
    fn prefers_paragraphs_then_lines_then_words() {
        let para = format!("{}\n\n{}", "a".repeat(30), "b".repeat(30));
        assert_eq!(split_html(&para, 40), vec!["a".repeat(30), "b".repeat(30)]);
        let lines = format!("{} {}\n{}", "a".repeat(10), "a".repeat(15), "b".repeat(30));
        assert_eq!(split_html(&lines, 40), vec![format!("{} {}", "a".repeat(10), "a".repeat(15)), "b".repeat(30)]);
        let words = "word ".repeat(20);
        let chunks = split_html(words.trim(), 32);
        check(&chunks, 32);
        assert!(chunks.iter().all(|c| !c.starts_with(' ') && c.split(' ').all(|w| w == "word")));
    }

    #[test]
    fn code_blocks_are_closed_and_reopened() {
        let code: String = (0..50).map(|i| format!("let x{i} = {i};\n")).collect();
        let html = format!("<pre><code class=\"language-rust\">{}</code></pre>", code.trim_end());
        let chunks = split_html(&html, 200);
        assert!(chunks.len() > 1);
        check(&chunks, 200);
        for c in &chunks {
            assert!(c.starts_with("<pre><code class=\"language-rust\">") && c.ends_with("</code></pre>"), "{c}");
        }
    }

    #[test]
    fn never_cuts_entities_or_surrogate_pairs() {
        let html = "&amp;😀".repeat(300);
        let chunks = split_html(&html, 101);
        check(&chunks, 101);
        let joined: String = chunks.iter().map(|c| validate(c).unwrap()).collect();
        assert_eq!(joined, "&😀".repeat(300));
    }

    #[test]
    fn keeps_zwj_sequences_whole() {
        let family = "👨\u{200d}👩\u{200d}👧";
        let chunks = split_html(&family.repeat(40), 50);
        check(&chunks, 50);
        for c in &chunks {
            assert!(!c.starts_with('\u{200d}') && !c.ends_with('\u{200d}'));
        }
    }

    #[test]
    fn nested_formatting_is_reopened_with_its_attributes() {
        let inner = "word ".repeat(40);
        let html = format!("<blockquote expandable><b>bold <i>{inner}</i></b> <a href=\"https://e.com\">{inner}</a></blockquote>");
        let chunks = split_html(&html, 60);
        check(&chunks, 60);
        assert!(chunks.len() > 3);
        for c in &chunks {
            assert!(c.starts_with("<blockquote expandable>") && c.ends_with("</blockquote>"), "{c}");
        }
        assert!(chunks.iter().any(|c| c.contains("<a href=\"https://e.com\">")));
    }

    #[test]
    fn cjk_without_spaces_is_cut_hard_but_never_loses_text() {
        let text = "日本語のテキスト".repeat(100);
        let chunks = split_html(&text, 50);
        check(&chunks, 50);
        assert_eq!(chunks.concat(), text);
    }

    #[test]
    fn plain_text_splits_safely() {
        let text = "1 < 2 & 3 > 2\n".repeat(100);
        let chunks = split_plain(&text, 100);
        assert!(chunks.iter().all(|c| utf16_len(c) <= 100));
        assert_eq!(chunks.join("\n").replace('\n', ""), text.replace('\n', ""));
    }
}
