//! Rich answers (Bot API 10.1 `sendRichMessage`, `sendRichMessageDraft`): an answer whose
//! Markdown needs what Telegram's HTML messages cannot show (a table, maths, a long answer
//! structured by headings) is rendered to Telegram's rich HTML and split within the rich
//! limits; every other answer stays an ordinary message ([`super::render_reply`]).
//!
//! Invariants (INVARIANTS.md): "Rich answers fall back once". Also:
//! - [`needs_rich`] decides; [`render_rich`] renders, or says no (`None`) when one block alone
//!   is over a limit (a table of more than [`RICH_COLUMN_LIMIT`] columns or too many rows, a
//!   nesting deeper than [`RICH_DEPTH_LIMIT`]): the answer then goes as today's HTML.
//! - The rich HTML is built from a fixed set of tags, text escaped; raw HTML the model writes
//!   stays text; links only for http(s), tg and mailto URLs (as in [`super::markdown`]).
//! - A chunk is whole top-level blocks, at most [`TEXT_BUDGET`] characters (UTF-16 units,
//!   never fewer than Telegram counts) and [`BLOCK_BUDGET`] blocks: a margin under
//!   Telegram's [`RICH_TEXT_LIMIT`] and [`RICH_BLOCK_LIMIT`].

use super::markdown::escape_into;
use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// Telegram's limit on the text of a rich message (all texts, formula sources included).
pub const RICH_TEXT_LIMIT: usize = 32_768;
/// Telegram's limit on the blocks of a rich message (nested blocks, list items and table rows
/// included).
pub const RICH_BLOCK_LIMIT: usize = 500;
/// Telegram's limit on the nesting of blocks and rich texts.
pub const RICH_DEPTH_LIMIT: usize = 16;
/// Telegram's limit on the columns of a table.
pub const RICH_COLUMN_LIMIT: usize = 20;
/// What one chunk holds at most: a margin under the limits.
pub const TEXT_BUDGET: usize = 30_000;
pub const BLOCK_BUDGET: usize = 480;
/// Headings that make a long answer "structured", and how long it must be.
const STRUCTURED_HEADINGS: usize = 2;
const STRUCTURED_CHARS: usize = 1_500;

/// What the model is told where rich answers are on (and only there).
pub const PROMPT_NOTE: &str = "## Rich answers\nThis chat shows rich answers: when it helps, you may use Markdown pipe tables, \
headings (#, ##) for long structured answers, and LaTeX maths ($x^2$ inline, $$...$$ on its own line).";

fn options() -> Options {
    Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS | Options::ENABLE_MATH
}

/// Whether an answer needs a rich message: it has a table or maths, or it is long and
/// structured by headings.
pub fn needs_rich(markdown: &str) -> bool {
    let mut headings = 0;
    for event in Parser::new_ext(markdown, options()) {
        match event {
            Event::Start(Tag::Table(_)) | Event::InlineMath(_) | Event::DisplayMath(_) => return true,
            Event::Start(Tag::Heading { .. }) => headings += 1,
            _ => {}
        }
    }
    headings >= STRUCTURED_HEADINGS && markdown.chars().count() >= STRUCTURED_CHARS
}

/// One rich message: its HTML, and the Markdown it came from (stored as the bot's message, and
/// sent as today's HTML if Telegram refuses the rich one).
#[derive(Debug, Clone, PartialEq)]
pub struct RichChunk {
    pub html: String,
    pub markdown: String,
}

/// A top-level block, rendered, with what it counts toward the limits.
#[derive(Debug, Default)]
struct Block {
    html: String,
    range: (usize, usize),
    text: usize,
    blocks: usize,
    depth: usize,
    columns: usize,
}

/// Renders an answer as rich messages within the limits; `None` when it cannot be (a block
/// over a limit on its own) or is blank.
pub fn render_rich(markdown: &str) -> Option<Vec<RichChunk>> {
    let blocks = blocks_of(markdown);
    if blocks.is_empty() {
        return None;
    }
    if blocks.iter().any(|b| b.text > TEXT_BUDGET || b.blocks > BLOCK_BUDGET || b.depth > RICH_DEPTH_LIMIT || b.columns > RICH_COLUMN_LIMIT) {
        return None;
    }
    let mut chunks: Vec<RichChunk> = Vec::new();
    let (mut html, mut text, mut count, mut start, mut end) = (String::new(), 0, 0, blocks[0].range.0, blocks[0].range.0);
    for b in &blocks {
        if !html.is_empty() && (text + b.text > TEXT_BUDGET || count + b.blocks > BLOCK_BUDGET) {
            chunks.push(RichChunk { html: std::mem::take(&mut html), markdown: markdown[start..end].trim().to_string() });
            (text, count, start) = (0, 0, b.range.0);
        }
        html.push_str(&b.html);
        text += b.text;
        count += b.blocks;
        end = b.range.1;
    }
    chunks.push(RichChunk { html, markdown: markdown[start..end].trim().to_string() });
    Some(chunks)
}

/// The rich draft of an answer still being written (completed like an HTML draft, links shown
/// as their words), if it fits one rich message.
pub fn render_rich_draft(partial: &str) -> Option<String> {
    let chunks = render_rich(&super::draft::complete(partial))?;
    match chunks.as_slice() {
        [one] => Some(super::draft::without_links(&one.html)),
        _ => None,
    }
}


fn linkable(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    (lower.starts_with("https://") || lower.starts_with("http://") || lower.starts_with("tg://") || lower.starts_with("mailto:"))
        && !url.chars().any(char::is_whitespace)
}

/// Renders the top-level blocks of `markdown`.
fn blocks_of(markdown: &str) -> Vec<Block> {
    let mut w = Walker::default();
    for (event, range) in Parser::new_ext(markdown, options()).into_offset_iter() {
        if w.level == 0 && matches!(event, Event::Start(_) | Event::Rule | Event::DisplayMath(_) | Event::Html(_)) {
            w.cur = Block { range: (range.start, range.end), ..Block::default() };
        }
        match event {
            Event::Start(tag) => w.start(tag),
            Event::End(tag) => w.end(tag),
            other => w.leaf(other),
        }
        if w.level == 0 {
            w.cur.range.1 = range.end;
            // A paragraph that only held a block formula leaves an empty "<p></p>".
            w.cur.html = w.cur.html.replace("<p></p>", "");
            if !w.cur.html.is_empty() {
                let block = std::mem::take(&mut w.cur);
                w.out.push(block);
            }
        }
    }
    w.out
}

/// The walk over the Markdown's events: the block being rendered, the open tags.
#[derive(Default)]
struct Walker {
    out: Vec<Block>,
    cur: Block,
    /// Open tags' closing text, innermost last ("" for a tag that shows as nothing).
    stack: Vec<&'static str>,
    level: usize,
    in_head: bool,
    row_cells: usize,
}

impl Walker {
    fn open(&mut self, tag: &str, close: &'static str, block: bool) {
        self.cur.html.push_str(tag);
        self.stack.push(close);
        self.cur.depth = self.cur.depth.max(self.stack.len());
        if block {
            self.cur.blocks += 1;
        }
    }

    /// Text-like content inside `tag`: counts toward the text and one level of nesting.
    fn wrapped(&mut self, open: &str, text: &str, close: &str) {
        self.cur.text += text.encode_utf16().count();
        self.cur.depth = self.cur.depth.max(self.stack.len() + 1);
        self.cur.html.push_str(open);
        escape_into(&mut self.cur.html, text);
        self.cur.html.push_str(close);
    }

    fn start(&mut self, tag: Tag<'_>) {
        self.level += 1;
        match tag {
            Tag::Paragraph => self.open("<p>", "</p>", true),
            Tag::Heading { level, .. } => {
                let (o, c) = HEADINGS[(level as usize).clamp(1, 6) - 1];
                self.open(o, c, true)
            }
            Tag::BlockQuote(_) => self.open("<blockquote>", "</blockquote>", true),
            Tag::CodeBlock(kind) => {
                let lang = match kind {
                    CodeBlockKind::Fenced(l) => l.split_whitespace().next().unwrap_or("").to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                if lang.is_empty() || !lang.chars().all(|c| c.is_ascii_alphanumeric() || "+-_#.".contains(c)) {
                    self.open("<pre>", "</pre>", true)
                } else {
                    self.open(&format!("<pre><code class=\"language-{lang}\">"), "</code></pre>", true)
                }
            }
            Tag::List(Some(_)) => self.open("<ol>", "</ol>", true),
            Tag::List(None) => self.open("<ul>", "</ul>", true),
            Tag::Item => self.open("<li>", "</li>", true),
            Tag::Table(_) => self.open("<table>", "</table>", true),
            Tag::TableHead | Tag::TableRow => {
                self.in_head = matches!(tag, Tag::TableHead);
                self.row_cells = 0;
                self.open("<tr>", "</tr>", true)
            }
            Tag::TableCell => {
                self.row_cells += 1;
                self.cur.columns = self.cur.columns.max(self.row_cells);
                let (o, c) = if self.in_head { ("<th>", "</th>") } else { ("<td>", "</td>") };
                self.open(o, c, false)
            }
            Tag::Emphasis => self.open("<i>", "</i>", false),
            Tag::Strong => self.open("<b>", "</b>", false),
            Tag::Strikethrough => self.open("<s>", "</s>", false),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } if linkable(&dest_url) => {
                let mut href = String::new();
                escape_into(&mut href, &dest_url);
                self.open(&format!("<a href=\"{}\">", href.replace('"', "&quot;")), "</a>", false)
            }
            _ => self.stack.push(""),
        }
    }

    fn end(&mut self, tag: TagEnd) {
        self.level = self.level.saturating_sub(1);
        if matches!(tag, TagEnd::TableHead) {
            self.in_head = false;
        }
        if let Some(close) = self.stack.pop() {
            self.cur.html.push_str(close);
        }
    }

    fn leaf(&mut self, event: Event<'_>) {
        match event {
            Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) => {
                self.cur.text += t.encode_utf16().count();
                escape_into(&mut self.cur.html, &t);
            }
            Event::Code(t) => self.wrapped("<code>", &t, "</code>"),
            Event::InlineMath(t) => self.wrapped("<tg-math>", &t, "</tg-math>"),
            Event::DisplayMath(t) => {
                self.cur.blocks += 1;
                // A block formula inside a paragraph ends the paragraph around it.
                let in_p = self.stack.last() == Some(&"</p>");
                let (open, close) = if in_p { ("</p><tg-math-block>", "</tg-math-block><p>") } else { ("<tg-math-block>", "</tg-math-block>") };
                self.wrapped(open, t.trim(), close);
            }
            Event::SoftBreak => {
                self.cur.text += 1;
                self.cur.html.push(' ');
            }
            Event::HardBreak => {
                self.cur.text += 1;
                self.cur.html.push('\n');
            }
            Event::Rule => {
                self.cur.blocks += 1;
                self.cur.html.push_str("<hr>");
            }
            Event::TaskListMarker(done) => {
                self.cur.text += 2;
                self.cur.html.push_str(if done { "☑ " } else { "☐ " });
            }
            _ => {}
        }
    }
}

const HEADINGS: [(&str, &str); 6] =
    [("<h1>", "</h1>"), ("<h2>", "</h2>"), ("<h3>", "</h3>"), ("<h4>", "</h4>"), ("<h5>", "</h5>"), ("<h6>", "</h6>")];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_maths_and_long_structured_answers_need_rich() {
        assert!(needs_rich("| a | b |\n|---|---|\n| 1 | 2 |"));
        assert!(needs_rich("The area is $\\pi r^2$."));
        assert!(needs_rich("$$\nE = mc^2\n$$"));
        assert!(!needs_rich("Hello **there**, it costs $5 and $10."));
        assert!(!needs_rich("# One\n\nshort\n\n## Two\n\nshort"));
        let long = format!("# One\n\n{}\n\n## Two\n\n{}", "word ".repeat(200), "word ".repeat(200));
        assert!(needs_rich(&long));
    }

    #[test]
    fn a_table_renders_as_rich_html() {
        let c = render_rich("Prices:\n\n| item | € |\n|---|---|\n| tea & <cake> | 3 |\n").unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].html, "<p>Prices:</p><table><tr><th>item</th><th>€</th></tr><tr><td>tea &amp; &lt;cake&gt;</td><td>3</td></tr></table>");
    }

    #[test]
    fn maths_headings_code_and_lists() {
        let c = render_rich("# T\n\nArea $a<b$:\n\n$$\nx^2\n$$\n\n```rust\nfn x() {}\n```\n\n- one\n- [x] two\n").unwrap();
        let h = &c[0].html;
        assert!(h.starts_with("<h1>T</h1><p>Area <tg-math>a&lt;b</tg-math>:</p>"), "{h}");
        assert!(h.contains("<tg-math-block>x^2</tg-math-block>"), "{h}");
        assert!(h.contains("<pre><code class=\"language-rust\">fn x() {}\n</code></pre>"), "{h}");
        assert!(h.contains("<ul><li>one</li><li>☑ two</li></ul>"), "{h}");
        assert!(!h.contains("<p></p>"));
    }

    #[test]
    fn raw_html_and_odd_links_stay_text() {
        let c = render_rich("| a |\n|---|\n| <b onclick=x>hi</b> [x](javascript:alert(1)) [y](https://e.com/?a=\"1\") |").unwrap();
        let h = &c[0].html;
        assert!(h.contains("&lt;b onclick=x&gt;hi&lt;/b&gt;"), "{h}");
        assert!(!h.contains("javascript"), "{h}");
        assert!(h.contains("<a href=\"https://e.com/?a=&quot;1&quot;\">y</a>"), "{h}");
    }

    #[test]
    fn long_answers_split_at_blocks_within_the_limits() {
        let para = format!("{}\n\n", "word ".repeat(1000));
        let md = format!("| a | b |\n|---|---|\n| 1 | 2 |\n\n{}", para.repeat(20));
        let chunks = render_rich(&md).unwrap();
        assert!(chunks.len() >= 4);
        for c in &chunks {
            assert!(c.html.encode_utf16().count() <= RICH_TEXT_LIMIT + 2000);
            assert!(c.html.starts_with("<p>") || c.html.starts_with("<table>"));
        }
        let rows: String = (0..300).map(|i| format!("| {i} | x |\n")).collect();
        let two_tables = format!("| a | b |\n|---|---|\n{rows}\ntext\n\n| a | b |\n|---|---|\n{rows}");
        let chunks = render_rich(&two_tables).unwrap();
        assert_eq!(chunks.len(), 2, "301 rows each: two messages");
        assert!(chunks[0].markdown.ends_with("text") && chunks[1].markdown.starts_with("| a | b |"));
    }

    #[test]
    fn a_block_over_a_limit_alone_is_not_rich() {
        let wide = format!("|{}\n|{}\n", " c |".repeat(21), "---|".repeat(21));
        assert!(render_rich(&wide).is_none(), "21 columns");
        let rows: String = (0..600).map(|i| format!("| {i} |\n")).collect();
        assert!(render_rich(&format!("| a |\n|---|\n{rows}")).is_none(), "600 rows");
        let deep = format!("{}x", "> ".repeat(20));
        assert!(render_rich(&deep).is_none(), "20 quotes deep");
        assert!(render_rich("  ").is_none());
    }

    #[test]
    fn drafts_render_without_links() {
        let d = render_rich_draft("| a | b |\n|---|---|\n| [x](https://e.com) | **bo").unwrap();
        assert!(!d.contains("<a "), "{d}");
        assert!(d.contains("<table>"));
    }
}
