//! html_to_text and links_in_html on top of the `html5gum` tokenizer, keeping our rules
//! (skip elements, block elements on their own lines, title first, whitespace collapsed, cut).
use html5gum::{Token, Tokenizer};
use url::Url;

const SKIP_ELEMENTS: [&str; 7] = ["script", "style", "noscript", "svg", "template", "iframe", "head"];
const BLOCK_ELEMENTS: [&str; 22] = [
    "p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "table", "section", "article",
    "header", "footer", "blockquote", "pre", "hr", "title",
];

fn tokens(html: &str) -> impl Iterator<Item = Token> + '_ {
    let mut emitter = html5gum::emitters::default::DefaultEmitter::default();
    // script/style/title/textarea content as raw text, as a browser's tree builder would.
    emitter.naively_switch_states(true);
    Tokenizer::new_with_emitter(html, emitter).flatten()
}

pub fn html_to_text(html: &str, max_chars: usize) -> String {
    let mut out = String::new();
    let mut title: Option<String> = None;
    let mut in_title = false;
    let mut skipping: Option<Vec<u8>> = None;
    for token in tokens(html) {
        match token {
            Token::StartTag(tag) => {
                let name: &[u8] = &tag.name;
                if name == b"title" && title.is_none() {
                    in_title = true;
                    title = Some(String::new());
                }
                if skipping.is_some() {
                    continue;
                }
                let name_s = std::str::from_utf8(name).unwrap_or("");
                if SKIP_ELEMENTS.contains(&name_s) && !tag.self_closing {
                    skipping = Some(name.to_vec());
                    continue;
                }
                out.push(if BLOCK_ELEMENTS.contains(&name_s) { '\n' } else { ' ' });
            }
            Token::EndTag(tag) => {
                let name: &[u8] = &tag.name;
                if name == b"title" {
                    in_title = false;
                }
                if let Some(s) = &skipping {
                    if s.as_slice() == name {
                        skipping = None;
                    }
                    continue;
                }
                let name_s = std::str::from_utf8(name).unwrap_or("");
                out.push(if BLOCK_ELEMENTS.contains(&name_s) { '\n' } else { ' ' });
            }
            Token::String(s) => {
                let s = String::from_utf8_lossy(&s.value);
                if in_title {
                    if let Some(t) = title.as_mut() {
                        t.push_str(&s);
                    }
                }
                if skipping.is_none() {
                    out.push_str(&s);
                }
            }
            Token::Doctype(_) => out.push(' '),
            _ => {}
        }
    }
    let title = title.map(|t| t.trim().to_string()).unwrap_or_default();
    let mut text = String::new();
    if !title.is_empty() {
        text.push_str(&title);
        text.push_str("\n\n");
    }
    for line in out.lines() {
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if !line.is_empty() {
            text.push_str(&line);
            text.push('\n');
        }
    }
    if text.chars().count() > max_chars {
        text = text.chars().take(max_chars).collect();
        text.push_str("\n[… cut]");
    }
    text.trim_end().to_string()
}

pub fn links_in_html(html: &str, base: &Url) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for token in tokens(html) {
        let Token::StartTag(tag) = token else { continue };
        let Some(value) = tag.attributes.get(b"href".as_slice()) else { continue };
        let value = String::from_utf8_lossy(&value.value);
        if let Ok(mut u) = base.join(value.trim()) {
            if matches!(u.scheme(), "http" | "https") {
                u.set_fragment(None);
                let s = u.to_string();
                if !out.contains(&s) {
                    out.push(s);
                }
            }
        }
        if out.len() >= crate::ours_html::MAX_PAGE_LINKS {
            break;
        }
    }
    out
}
