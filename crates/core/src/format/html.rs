//! Telegram HTML: a tokenizer and a validator that applies Telegram's parse rules (allowed
//! tags, LIFO closing, entities), used to check rendered replies before they are sent, by the
//! splitter, and by the property tests. `to_plain` gives the text Telegram would show, for the
//! plain-text fallback.
//!
//! The validator is stricter than Telegram where that catches renderer bugs: a bare `&`, a
//! tag inside `pre`/`code`, a nested blockquote or link are errors here.

/// Tags Telegram's HTML parse mode accepts.
pub const ALLOWED_TAGS: [&str; 17] = [
    "a", "b", "strong", "i", "em", "s", "strike", "del", "u", "ins", "tg-spoiler", "tg-emoji", "tg-time", "span",
    "pre", "code", "blockquote",
];

#[derive(Debug, Clone, PartialEq)]
pub enum Token<'a> {
    /// `<name ...>`: the tag name (lower case) and the whole source text of the tag.
    Open { name: String, raw: &'a str },
    Close { name: String, raw: &'a str },
    /// Escaped text as it appears in the source.
    Text(&'a str),
}

/// Splits Telegram HTML into tags and text. Fails like Telegram on malformed tags.
pub fn tokenize(html: &str) -> Result<Vec<Token<'_>>, String> {
    let mut tokens = Vec::new();
    let bytes = html.as_bytes();
    let mut i = 0;
    let mut text_start = 0;
    while i < bytes.len() {
        if bytes[i] != b'<' {
            i += 1;
            continue;
        }
        if text_start < i {
            tokens.push(Token::Text(&html[text_start..i]));
        }
        let Some(rel_end) = html[i..].find('>') else {
            return Err(format!("Unclosed start tag at byte offset {i}"));
        };
        let raw = &html[i..i + rel_end + 1];
        let inner = &raw[1..raw.len() - 1];
        if let Some(name) = inner.strip_prefix('/') {
            tokens.push(Token::Close { name: name.trim().to_ascii_lowercase(), raw });
        } else {
            let name = inner.split(|c: char| c.is_whitespace()).next().unwrap_or("").to_ascii_lowercase();
            if !ALLOWED_TAGS.contains(&name.as_str()) {
                return Err(format!("Unsupported start tag \"{name}\" at byte offset {i}"));
            }
            tokens.push(Token::Open { name, raw });
        }
        i += rel_end + 1;
        text_start = i;
    }
    if text_start < html.len() {
        tokens.push(Token::Text(&html[text_start..]));
    }
    Ok(tokens)
}

/// Decodes the entities Telegram knows in escaped text. Strict: a `&` that does not start an
/// entity is an error.
pub fn unescape(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find('&') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos..];
        let end = after.find(';').filter(|e| *e <= 10).ok_or_else(|| format!("bare '&' in {after:.20?}"))?;
        let entity = &after[1..end];
        let decoded = match entity {
            "lt" => '<',
            "gt" => '>',
            "amp" => '&',
            "quot" => '"',
            e if e.starts_with("#x") || e.starts_with("#X") => {
                u32::from_str_radix(&e[2..], 16).ok().and_then(char::from_u32).ok_or("bad numeric entity")?
            }
            e if e.starts_with('#') => e[1..].parse::<u32>().ok().and_then(char::from_u32).ok_or("bad numeric entity")?,
            e => return Err(format!("unknown entity &{e};")),
        };
        out.push(decoded);
        rest = &after[end + 1..];
    }
    if rest.contains('<') || rest.contains('>') {
        return Err("unescaped angle bracket".into());
    }
    out.push_str(rest);
    Ok(out)
}

/// Checks that `html` is valid Telegram HTML and returns the text it shows.
pub fn validate(html: &str) -> Result<String, String> {
    let tokens = tokenize(html)?;
    let mut stack: Vec<String> = Vec::new();
    let mut text = String::new();
    for token in &tokens {
        match token {
            Token::Text(t) => text.push_str(&unescape(t)?),
            Token::Open { name, raw } => {
                let top = stack.last().map(String::as_str);
                match top {
                    Some("code") => return Err(format!("tag {raw} inside code")),
                    Some("pre") if !(name == "code" && raw.contains("class=\"language-")) => {
                        return Err(format!("tag {raw} inside pre"))
                    }
                    _ => {}
                }
                if (name == "blockquote" || name == "a" || name == "pre") && stack.contains(name) {
                    return Err(format!("nested {name}"));
                }
                if name == "span" && !raw.contains("class=\"tg-spoiler\"") {
                    return Err("Tag \"span\" must have class \"tg-spoiler\"".into());
                }
                if name == "a" {
                    let href = raw.split("href=\"").nth(1).and_then(|r| r.split('"').next()).unwrap_or("");
                    unescape(href)?;
                    if href.is_empty() {
                        return Err("link without href".into());
                    }
                }
                stack.push(name.clone());
            }
            Token::Close { name, .. } => match stack.pop() {
                Some(open) if open == *name => {}
                Some(open) => {
                    return Err(format!("Unmatched end tag, expected \"</{open}>\", found \"</{name}>\""))
                }
                None => return Err("Unexpected end tag".into()),
            },
        }
    }
    if let Some(open) = stack.last() {
        return Err(format!("Can't find end tag corresponding to start tag \"{open}\""));
    }
    Ok(text)
}

/// The text Telegram would display for `html`, tags removed and entities decoded; lenient,
/// for the plain-text fallback.
pub fn to_plain(html: &str) -> String {
    match tokenize(html) {
        Ok(tokens) => tokens
            .iter()
            .filter_map(|t| match t {
                Token::Text(t) => Some(unescape(t).unwrap_or_else(|_| t.to_string())),
                _ => None,
            })
            .collect(),
        Err(_) => html.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_html() {
        assert_eq!(validate("<b>a &amp; <i>b</i></b> &lt;3").unwrap(), "a & b <3");
        assert_eq!(validate("<pre><code class=\"language-rs\">x</code></pre>").unwrap(), "x");
        assert!(validate("<blockquote expandable>q</blockquote>").is_ok());
    }

    #[test]
    fn rejects_what_telegram_rejects() {
        assert!(validate("<foo>x</foo>").unwrap_err().contains("Unsupported start tag"));
        assert!(validate("<b>bold</i>").unwrap_err().contains("Unmatched end tag"));
        assert!(validate("<b>bold").unwrap_err().contains("Can't find end tag"));
        assert!(validate("</b>").is_err());
        assert!(validate("a<b").is_err());
        assert!(validate("<br/>").is_err());
        // Stricter than Telegram, to catch renderer bugs.
        assert!(validate("a & b").is_err());
        assert!(validate("<code><b>x</b></code>").is_err());
        assert!(validate("<blockquote><blockquote>x</blockquote></blockquote>").is_err());
    }

    #[test]
    fn plain_text_drops_tags() {
        assert_eq!(to_plain("<b>a</b> &lt;b&gt;"), "a <b>");
    }
}
