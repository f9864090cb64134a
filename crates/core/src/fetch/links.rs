//! Which URLs the conversation put in front of the model ([`LinkSet`], from the text of the
//! messages in view): only those may be fetched; and what else a turn has in view (outside
//! text, search results, documents, fetched pages).
use crate::history::{HistoryMessage, Role};
use std::collections::BTreeSet;
use url::Url;

/// The key under which URLs are compared: host, port, path and query of the parsed URL
/// (scheme and fragment do not matter for what is fetched from whom).
pub(crate) fn key(url: &Url) -> Option<String> {
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let host = url.host_str()?;
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    let query = url.query().map(|q| format!("?{q}")).unwrap_or_default();
    Some(format!("{host}{port}{}{query}", url.path()))
}

/// Parses what looks like a link in text: with a scheme, or a bare `example.com/x` as https.
pub(crate) fn parse_lenient(token: &str) -> Option<Url> {
    if token.contains("://") {
        return Url::parse(token).ok();
    }
    if looks_like_domain(token) {
        return Url::parse(&format!("https://{token}")).ok();
    }
    None
}

/// A bare `host.tld[/...]` or `www.x`, as Telegram would turn into a link.
pub(crate) fn looks_like_domain(token: &str) -> bool {
    let host = token.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit('@').next().unwrap_or("");
    let host = host.split(':').next().unwrap_or("");
    let labels: Vec<&str> = host.split('.').collect();
    if labels.len() < 2 || labels.iter().any(|l| l.is_empty() || !l.chars().all(|c| c.is_alphanumeric() || c == '-')) {
        return false;
    }
    let tld = labels.last().copied().unwrap_or("");
    let numeric_quad = labels.len() == 4 && labels.iter().all(|l| l.chars().all(|c| c.is_ascii_digit()));
    numeric_quad || (tld.chars().count() >= 2 && tld.chars().any(char::is_alphabetic))
}

pub(crate) const TRAILING: &[char] = &['.', ',', ';', ':', '!', '?', '\'', '"', ')', ']', '}', '>', '*', '_', '~', '|'];
pub(crate) const LEADING: &[char] = &['(', '[', '{', '<', '"', '\'', '*', '_', '~', '|'];

/// Candidate links in free text: whitespace-separated tokens, Markdown `[text](url)` split,
/// surrounding punctuation trimmed. Variants are all substrings of the text.
pub(crate) fn candidates(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for token in text.split(|c: char| c.is_whitespace() || c == '<' || c == '>' || c == '`') {
        if token.is_empty() || !(token.contains('.') || token.contains("://")) {
            continue;
        }
        let mut pieces = vec![token];
        if let Some((_, after)) = token.split_once("](") {
            pieces.push(after);
        }
        for piece in pieces {
            let lead = piece.trim_start_matches(LEADING);
            out.push(lead.to_string());
            let trimmed = lead.trim_end_matches(TRAILING);
            if trimmed != lead {
                out.push(trimmed.to_string());
            }
        }
    }
    out
}

/// URLs that appeared in the conversation: what `fetch_url` may fetch (people's messages,
/// then links of pages fetched in the turn) and what a reply may link with a preview.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkSet {
    keys: BTreeSet<String>,
}

/// Most URLs one set holds (bounds memory on link-heavy pages).
pub(crate) const MAX_LINKS: usize = 5_000;

impl LinkSet {
    /// Adds every link-looking token of `text`.
    pub fn add_text(&mut self, text: &str) {
        for c in candidates(text) {
            self.add(&c);
        }
    }

    /// Adds one URL (absolute, or a bare domain read as https).
    pub fn add(&mut self, raw: &str) {
        if self.keys.len() >= MAX_LINKS {
            return;
        }
        if let Some(k) = parse_lenient(raw.trim()).as_ref().and_then(key) {
            self.keys.insert(k);
        }
    }

    pub fn contains(&self, url: &Url) -> bool {
        key(url).is_some_and(|k| self.keys.contains(&k))
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Links people posted in these messages: the text of users' messages (forwarded ones
    /// included: someone chose to post them) and the targets of their text links. The bot's
    /// own messages do not count: the model wrote them.
    pub fn from_people(messages: &[HistoryMessage]) -> Self {
        let mut set = LinkSet::default();
        for m in messages.iter().filter(|m| m.role == Role::User) {
            for p in &m.parts {
                if let crate::conversation::Part::Text { text, entities } = p {
                    set.add_text(text);
                    for e in entities {
                        if let Some(u) = &e.url {
                            set.add(u);
                        }
                    }
                }
            }
        }
        set
    }
}

/// Whether text from outside the chat is in these messages: a forwarded message, or a
/// document (PDF, HTML, text: anything but an image) or a recording (voice, audio, video)
/// whose bytes, description or transcript the model reads. Such text was not written by the
/// people in the chat, so it must not steer what the bot stores or schedules.
pub fn outside_text_in_view(messages: &[HistoryMessage]) -> bool {
    messages.iter().any(|m| {
        m.forwarded_from.is_some()
            || m.parts.iter().any(|p| match p {
                crate::conversation::Part::Media { kind, mime_type, .. } => match kind.as_str() {
                    "document" => !mime_type.as_deref().is_some_and(|t| t.trim().to_ascii_lowercase().starts_with("image/")),
                    "voice" | "audio" | "video" | "video_note" => true,
                    _ => false,
                },
                _ => false,
            })
    })
}

/// Whether Google Search results are in `contents`: a grounded answer's own search parts
/// (`toolCall`/`toolResponse`), in this turn or replayed from an earlier one.
pub fn search_in_view(contents: &[crate::gemini::Content]) -> bool {
    contents.iter().flat_map(|c| &c.parts).any(|p| p.extra.contains_key("toolCall") || p.extra.contains_key("toolResponse"))
}

/// Whether a document or a recording is sent inline in `contents` (any `inlineData` that is
/// not an image: a PDF, HTML or text file, a voice note, audio, video).
pub fn document_in_view(contents: &[crate::gemini::Content]) -> bool {
    contents.iter().flat_map(|c| &c.parts).filter_map(|p| p.extra.get("inlineData")).any(|d| {
        !d.get("mimeType").and_then(|m| m.as_str()).is_some_and(|m| m.to_ascii_lowercase().starts_with("image/"))
    })
}

/// Whether a reply must go out with link previews off: it links something that no person
/// posted (a link the model composed could carry private data in its query, and a preview
/// makes Telegram's servers fetch it without anyone clicking).
/// `text` with every character that cannot be part of a URL (and a `:` not starting `://`)
/// made a space, so a link glued to punctuation stands alone.
pub fn url_tokens(text: &str) -> String {
    let t = text.replace("://", "\u{1}");
    let chars: Vec<char> = t.chars().collect();
    let keep = |i: usize, c: char| {
        c.is_ascii_alphanumeric()
            || "-._~/?#[]@!$&'()*+;=%\u{1}".contains(c)
            // a port: host:8080
            || (c == ':' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
    };
    chars
        .iter()
        .enumerate()
        .map(|(i, &c)| if keep(i, c) { c } else { ' ' })
        .collect::<String>()
        .replace('\u{1}', "://")
}

/// Whether a page fetched in this turn or replayed from an earlier one is in `contents`
/// (a `fetch_url` response carrying content, or its trimmed copy in stored history).
pub fn page_in_view(contents: &[crate::gemini::Content]) -> bool {
    contents.iter().flat_map(|c| &c.parts).filter_map(|p| p.function_response.as_ref()).any(|r| {
        r.name == "fetch_url"
            && (r.response.get("head").is_some()
                || r.response
                    .get("pages")
                    .and_then(|p| p.as_array())
                    .is_some_and(|pages| pages.iter().any(|p| p.get("content").is_some())))
    })
}
