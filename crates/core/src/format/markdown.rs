//! Markdown (as the model writes it) to Telegram's HTML parse mode, with pulldown-cmark.
//!
//! Invariants (INVARIANTS.md): "Formatting". Property-tested against
//! [`super::html::validate`]:
//! - the tags Telegram accepts are `b i s u code pre a blockquote tg-spoiler`; every tag is
//!   opened and closed through one stack;
//! - text is escaped as `&lt; &gt; &amp;`, and `&quot;` inside attributes;
//! - nothing is nested inside `pre`/`code`, and blockquotes are never nested;
//! - links are only emitted for http(s), tg and mailto URLs.
//!
//! Telegram has no tags for headings, lists and tables: headings become bold lines, lists get
//! bullets or numbers, tables become an aligned monospace block.

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// Quotes longer than this (in characters) are sent collapsed (`<blockquote expandable>`).
const EXPANDABLE_QUOTE_CHARS: usize = 500;

/// Renders Markdown to Telegram HTML.
pub fn to_telegram_html(markdown: &str) -> String {
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS;
    let mut r = Renderer::default();
    for event in Parser::new_ext(markdown, options) {
        r.event(event);
    }
    r.finish()
}

/// Escapes text for Telegram HTML.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    escape_into(&mut out, text);
    out
}

/// Escapes `text` for Telegram's HTML (and rich HTML) onto `out`.
pub(crate) fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
}

fn escape_attr(text: &str) -> String {
    escape(text).replace('"', "&quot;")
}

/// Whether a link target is one Telegram accepts as a text link.
fn linkable(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    (lower.starts_with("https://") || lower.starts_with("http://") || lower.starts_with("tg://")
        || lower.starts_with("mailto:"))
        && !url.chars().any(char::is_whitespace)
}

struct Open {
    tag: &'static str,
    /// Byte offset in `out` of the opening tag (blockquote: to mark it expandable later).
    at: usize,
}

#[derive(Default)]
struct Table {
    rows: Vec<Vec<String>>,
    cell: Option<String>,
}

#[derive(Default)]
struct Renderer {
    out: String,
    stack: Vec<Open>,
    /// Newlines at the end of the text written so far (tags do not count).
    trailing_nl: usize,
    /// True right after a container opened or an item's bullet: no separation needed.
    fresh: bool,
    /// Ordered-list counters (`None` for bullets), innermost last.
    lists: Vec<Option<u64>>,
    in_code_block: bool,
    quote_depth: usize,
    /// Stack depth at the start of the current block; inline tags above it close with it.
    block_depth: Vec<usize>,
    /// Whether each open link/image emitted an `<a>`.
    links: Vec<bool>,
    table: Option<Table>,
}

impl Renderer {
    fn text(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        if let Some(table) = &mut self.table {
            if let Some(cell) = &mut table.cell {
                cell.push_str(s);
            }
            return;
        }
        escape_into(&mut self.out, s);
        let trailing = s.chars().rev().take_while(|c| *c == '\n').count();
        self.trailing_nl = if trailing == s.chars().count() { self.trailing_nl + trailing } else { trailing };
        self.fresh = false;
    }

    /// Text outside code, where `||spoiler||` markers are recognised.
    fn prose(&mut self, s: &str) {
        if self.table.is_some() {
            return self.text(s);
        }
        let mut pieces = s.split("||").peekable();
        while let Some(piece) = pieces.next() {
            self.text(piece);
            if pieces.peek().is_some() {
                self.toggle_spoiler();
            }
        }
    }

    fn toggle_spoiler(&mut self) {
        if self.stack.iter().any(|o| o.tag == "tg-spoiler") {
            self.close("tg-spoiler");
        } else {
            self.open("tg-spoiler", "<tg-spoiler>".to_string());
        }
    }

    fn open(&mut self, tag: &'static str, html: String) {
        if self.table.is_some() {
            return;
        }
        self.stack.push(Open { tag, at: self.out.len() });
        self.out.push_str(&html);
    }

    /// Closes `tag` and everything opened after it; does nothing if it is not open.
    fn close(&mut self, tag: &'static str) {
        if let Some(pos) = self.stack.iter().rposition(|o| o.tag == tag) {
            self.close_to(pos);
        }
    }

    /// Closes every tag at stack index `depth` and above.
    fn close_to(&mut self, depth: usize) {
        while self.stack.len() > depth {
            let open = self.stack.pop().expect("non-empty");
            if open.tag == "blockquote" {
                let body = &self.out[open.at..];
                if body.chars().count() > EXPANDABLE_QUOTE_CHARS {
                    self.out.replace_range(open.at..open.at + "<blockquote>".len(), "<blockquote expandable>");
                }
            }
            self.out.push_str("</");
            self.out.push_str(open.tag);
            self.out.push('>');
        }
    }

    fn newlines(&mut self, n: usize) {
        if self.fresh || self.out.is_empty() || self.table.is_some() {
            return;
        }
        while self.trailing_nl < n {
            self.out.push('\n');
            self.trailing_nl += 1;
        }
    }

    fn begin_block(&mut self, sep: usize) {
        self.newlines(sep);
        self.block_depth.push(self.stack.len());
    }

    fn end_block(&mut self) {
        let depth = self.block_depth.pop().unwrap_or(0);
        self.close_to(depth.min(self.stack.len()));
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) if self.in_code_block => self.text(&t),
            Event::Text(t) => self.prose(&t),
            Event::Code(t) => {
                if self.table.is_some() {
                    self.text(&t);
                } else {
                    self.open("code", "<code>".into());
                    self.text(&t);
                    self.close("code");
                }
            }
            Event::InlineHtml(html) => self.inline_html(&html),
            Event::Html(html) => self.text(&html),
            Event::InlineMath(t) | Event::DisplayMath(t) => self.text(&t),
            Event::FootnoteReference(r) => self.text(&format!("[{r}]")),
            Event::SoftBreak | Event::HardBreak => self.text("\n"),
            Event::Rule => {
                self.begin_block(2);
                self.text("——————");
                self.end_block();
            }
            Event::TaskListMarker(done) => {
                self.text(if done { "☑ " } else { "☐ " });
                self.fresh = true;
            }
        }
    }

    /// Raw HTML in Markdown is shown as text, except `<u>`/`<ins>` for underline.
    fn inline_html(&mut self, html: &str) {
        match html.trim().to_ascii_lowercase().as_str() {
            "<u>" | "<ins>" => self.open("u", "<u>".into()),
            "</u>" | "</ins>" => self.close("u"),
            _ => self.text(html),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => self.begin_block(2),
            Tag::Heading { .. } => {
                self.begin_block(2);
                self.open("b", "<b>".into());
            }
            Tag::BlockQuote(_) => {
                self.newlines(2);
                self.quote_depth += 1;
                self.block_depth.push(self.stack.len());
                if self.quote_depth == 1 {
                    self.open("blockquote", "<blockquote>".into());
                    self.fresh = true;
                }
            }
            Tag::CodeBlock(kind) => self.start_code_block(kind),
            Tag::List(start) => {
                self.newlines(if self.lists.is_empty() { 2 } else { 1 });
                self.lists.push(start);
            }
            Tag::Item => self.start_item(),
            Tag::Emphasis => self.open("i", "<i>".into()),
            Tag::Strong => self.open("b", "<b>".into()),
            Tag::Strikethrough => self.open("s", "<s>".into()),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                let ok = linkable(&dest_url) && !self.stack.iter().any(|o| o.tag == "a");
                if ok {
                    self.open("a", format!("<a href=\"{}\">", escape_attr(dest_url.trim())));
                }
                self.links.push(ok);
            }
            Tag::Table(_) => {
                self.begin_block(2);
                self.table = Some(Table::default());
            }
            Tag::TableHead | Tag::TableRow => {
                if let Some(t) = &mut self.table {
                    t.rows.push(Vec::new());
                }
            }
            Tag::TableCell => {
                if let Some(t) = &mut self.table {
                    t.cell = Some(String::new());
                }
            }
            Tag::FootnoteDefinition(label) => {
                self.begin_block(2);
                self.text(&format!("[{label}]: "));
            }
            _ => self.block_depth.push(self.stack.len()),
        }
    }

    /// A code block opens `<pre>`, with `<code class="language-…">` when its fence names a
    /// language (only the characters a language name uses are kept).
    fn start_code_block(&mut self, kind: CodeBlockKind<'_>) {
        self.begin_block(2);
        self.in_code_block = true;
        let lang = match kind {
            CodeBlockKind::Fenced(info) => info
                .split_whitespace()
                .next()
                .unwrap_or("")
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || "+-#._".contains(*c))
                .collect::<String>(),
            CodeBlockKind::Indented => String::new(),
        };
        self.open("pre", "<pre>".into());
        if !lang.is_empty() {
            self.open("code", format!("<code class=\"language-{lang}\">"));
        }
    }

    /// A list item starts its line with its bullet or number, indented by the list's depth.
    fn start_item(&mut self) {
        self.newlines(1);
        self.block_depth.push(self.stack.len());
        let indent = "  ".repeat(self.lists.len().saturating_sub(1));
        let bullet = match self.lists.last_mut() {
            Some(Some(n)) => {
                let b = format!("{indent}{n}. ");
                *n += 1;
                b
            }
            _ => format!("{indent}• "),
        };
        self.text(&bullet);
        self.fresh = true;
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph | TagEnd::Heading(_) | TagEnd::Item | TagEnd::FootnoteDefinition => {
                self.end_block()
            }
            TagEnd::BlockQuote(_) => {
                self.end_block();
                self.quote_depth = self.quote_depth.saturating_sub(1);
            }
            TagEnd::CodeBlock => {
                // The parser ends code with a newline; Telegram would show it as a blank line.
                if self.out.ends_with('\n') {
                    self.out.pop();
                }
                self.in_code_block = false;
                self.end_block();
            }
            TagEnd::List(_) => {
                self.lists.pop();
            }
            TagEnd::Emphasis => self.close("i"),
            TagEnd::Strong => self.close("b"),
            TagEnd::Strikethrough => self.close("s"),
            TagEnd::Link | TagEnd::Image => {
                if self.links.pop() == Some(true) {
                    self.close("a");
                }
            }
            TagEnd::TableCell => {
                if let Some(t) = &mut self.table {
                    let cell = t.cell.take().unwrap_or_default();
                    if let Some(row) = t.rows.last_mut() {
                        row.push(cell.replace('\n', " ").trim().to_string());
                    }
                }
            }
            TagEnd::Table => {
                let table = self.table.take().unwrap_or_default();
                let text = render_table(&table.rows);
                self.open("pre", "<pre>".into());
                self.text(&text);
                self.close("pre");
                self.end_block();
            }
            TagEnd::TableHead | TagEnd::TableRow => {}
            _ => self.end_block(),
        }
    }

    fn finish(mut self) -> String {
        self.close_to(0);
        self.out.trim_end().to_string()
    }
}

/// Aligns table cells into columns of monospace text.
fn render_table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; cols];
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut lines = Vec::new();
    for (r, row) in rows.iter().enumerate() {
        let cells: Vec<String> = (0..cols)
            .map(|i| {
                let cell = row.get(i).map(String::as_str).unwrap_or("");
                format!("{cell}{}", " ".repeat(widths[i] - cell.chars().count()))
            })
            .collect();
        lines.push(cells.join(" | ").trim_end().to_string());
        if r == 0 && rows.len() > 1 {
            lines.push(widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("-+-"));
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_formatting() {
        assert_eq!(
            to_telegram_html("**bold** *it* ~~gone~~ `x<y` [link](https://e.com/?a=1&b=\"2\")"),
            "<b>bold</b> <i>it</i> <s>gone</s> <code>x&lt;y</code> <a href=\"https://e.com/?a=1&amp;b=&quot;2&quot;\">link</a>"
        );
    }

    #[test]
    fn escapes_everything_else() {
        assert_eq!(to_telegram_html("a < b && c > d"), "a &lt; b &amp;&amp; c &gt; d");
        assert_eq!(to_telegram_html("<b>b</b> <script>x</script>"), "&lt;b&gt;b&lt;/b&gt; &lt;script&gt;x&lt;/script&gt;");
    }

    #[test]
    fn fenced_code_keeps_language_and_nothing_nests_inside() {
        let html = to_telegram_html("```rust\nfn main() { **not bold** }\n```");
        assert_eq!(html, "<pre><code class=\"language-rust\">fn main() { **not bold** }</code></pre>");
        assert_eq!(to_telegram_html("```\na\n```"), "<pre>a</pre>");
    }

    #[test]
    fn headings_lists_and_tables_become_text() {
        let html = to_telegram_html("# Title\n\n- one\n- two\n  1. sub\n\n| a | bb |\n|---|---|\n| 1 | 2 |");
        assert_eq!(
            html,
            "<b>Title</b>\n\n• one\n• two\n  1. sub\n\n<pre>a | bb\n--+---\n1 | 2</pre>"
        );
    }

    #[test]
    fn spoilers_and_underline() {
        assert_eq!(to_telegram_html("a ||secret|| b"), "a <tg-spoiler>secret</tg-spoiler> b");
        assert_eq!(to_telegram_html("<u>under</u>"), "<u>under</u>");
        // An unclosed spoiler is closed at the end of its paragraph.
        assert_eq!(to_telegram_html("||open\n\nnext"), "<tg-spoiler>open</tg-spoiler>\n\nnext");
    }

    #[test]
    fn long_quotes_are_expandable_and_quotes_never_nest() {
        let long = format!("> {}", "word ".repeat(200));
        assert!(to_telegram_html(&long).starts_with("<blockquote expandable>"));
        assert_eq!(to_telegram_html("> a\n>> b"), "<blockquote>a\n\nb</blockquote>");
    }

    #[test]
    fn unsafe_links_are_plain_text() {
        assert_eq!(to_telegram_html("[x](javascript:alert(1))"), "x");
        assert_eq!(to_telegram_html("![cat](https://e.com/c.png)"), "<a href=\"https://e.com/c.png\">cat</a>");
    }
}
