//! Copy of agent_core::fetch's links_in_html, html_to_text, decode_entities (verbatim).
use url::Url;
pub const MAX_PAGE_LINKS: usize = 300;
/// The targets of `href` attributes, resolved against the page's URL; http(s) only.
pub fn links_in_html(html: &str, base: &Url) -> Vec<String> {
    let lower = html.to_ascii_lowercase();
    let mut out: Vec<String> = Vec::new();
    let mut from = 0;
    while let Some(at) = lower.get(from..).and_then(|r| r.find("href=")).map(|a| from + a) {
        from = at + 5;
        let rest = html.get(from..).unwrap_or("");
        let value = match rest.chars().next() {
            Some(q @ ('"' | '\'')) => rest[1..].split(q).next().unwrap_or(""),
            _ => rest.split(|c: char| c.is_whitespace() || c == '>').next().unwrap_or(""),
        };
        if let Ok(mut u) = base.join(decode_entities(value.trim()).as_str()) {
            if matches!(u.scheme(), "http" | "https") {
                u.set_fragment(None);
                let s = u.to_string();
                if !out.contains(&s) {
                    out.push(s);
                }
            }
        }
        if out.len() >= MAX_PAGE_LINKS {
            break;
        }
    }
    out
}

const SKIP_ELEMENTS: [&str; 7] = ["script", "style", "noscript", "svg", "template", "iframe", "head"];
const BLOCK_ELEMENTS: [&str; 22] = [
    "p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "table", "section", "article",
    "header", "footer", "blockquote", "pre", "hr", "title",
];

/// Reduces HTML to readable text: scripts and styles dropped, block elements on their own
/// lines, entities decoded, whitespace collapsed, cut at `max_chars`.
pub fn html_to_text(html: &str, max_chars: usize) -> String {
    let mut out = String::new();
    let mut i = 0;
    let bytes = html.as_bytes();
    let lower = html.to_ascii_lowercase();
    let title = lower
        .find("<title")
        .and_then(|t| Some((t, lower[t..].find('>')? + t + 1)))
        .and_then(|(_, start)| Some((start, lower[start..].find("</title")? + start)))
        .map(|(start, end)| decode_entities(&html[start..end]).trim().to_string())
        .unwrap_or_default();
    while i < html.len() {
        if bytes[i] == b'<' {
            let end = match html[i..].find('>') {
                Some(e) => i + e + 1,
                None => break,
            };
            let tag = lower[i + 1..end - 1].trim_start_matches('/');
            let name: String = tag.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            if lower[i..].starts_with("<!--") {
                i = lower[i..].find("-->").map_or(html.len(), |e| i + e + 3);
                continue;
            }
            if SKIP_ELEMENTS.contains(&name.as_str()) && !lower[i + 1..].starts_with('/') {
                let close = format!("</{name}");
                i = lower[end..].find(&close).map_or(html.len(), |e| {
                    let after = end + e;
                    lower[after..].find('>').map_or(html.len(), |g| after + g + 1)
                });
                continue;
            }
            if BLOCK_ELEMENTS.contains(&name.as_str()) {
                out.push('\n');
            } else {
                out.push(' ');
            }
            i = end;
        } else {
            let next = html[i..].find('<').map_or(html.len(), |n| i + n);
            out.push_str(&decode_entities(&html[i..next]));
            i = next;
        }
    }
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

pub fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find('&') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        let end = after.find(';').filter(|e| *e <= 10);
        let decoded = end.and_then(|e| {
            let name = &after[..e];
            let ch = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" | "#39" => Some('\''),
                "nbsp" => Some(' '),
                n if n.starts_with("#x") || n.starts_with("#X") => u32::from_str_radix(&n[2..], 16).ok().and_then(char::from_u32),
                n if n.starts_with('#') => n[1..].parse().ok().and_then(char::from_u32),
                _ => None,
            };
            ch.map(|c| (c, e))
        });
        match decoded {
            Some((c, e)) => {
                out.push(c);
                rest = &after[e + 1..];
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

