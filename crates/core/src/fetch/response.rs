//! One fetch's answer: redirects (each hop checked like the first URL), which bodies are read
//! and how much of them, and the page made of a body.
use url::Url;
use super::host::{check_parsed, Refusal, MAX_URL_LEN};
use super::html::{html_to_text, links_in_html, MAX_PAGE_LINKS};
use super::links::candidates;

/// Readable text kept per page.
pub const MAX_PAGE_CHARS: usize = 40_000;
/// Bytes of a body read at most; the rest is never read (the fetch is aborted).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// A fetch response as the edge saw it: the body is present only when
/// [`should_read_body`] said so, and holds at most [`MAX_BODY_BYTES`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FetchResponse {
    pub status: u16,
    pub location: Option<String>,
    pub content_type: String,
    pub body: Option<String>,
    /// The body was longer than the cap; the rest was not read.
    pub truncated: bool,
}

pub fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// Content types whose text the model can read.
pub fn readable_type(content_type: &str) -> bool {
    let ct = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    ct.is_empty()
        || ct.starts_with("text/")
        || ct.ends_with("+xml")
        || ct.ends_with("+json")
        || matches!(ct.as_str(), "application/json" | "application/xml" | "application/xhtml+xml")
}

/// Whether the edge reads a response's body (decided from status and headers, before any
/// byte of the body is read).
pub fn should_read_body(status: u16, content_type: &str) -> bool {
    (200..300).contains(&status) && readable_type(content_type)
}

/// The next hop of a redirect, checked like the first URL.
pub fn redirect_target(current: &Url, location: Option<&str>, allow_loopback: bool) -> Result<Url, Refusal> {
    let location = location.map(str::trim).filter(|l| !l.is_empty()).ok_or(Refusal::BadRedirect)?;
    if location.len() > MAX_URL_LEN {
        return Err(Refusal::Redirect(Box::new(Refusal::TooLong)));
    }
    let next = current.join(location).map_err(|_| Refusal::BadRedirect)?;
    check_parsed(next, allow_loopback).map_err(|r| Refusal::Redirect(Box::new(r)))
}

/// A fetched page: its readable text and the links on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub text: String,
    pub links: Vec<String>,
}

/// Turns a final (non-redirect) response into a page, or the error for the model.
pub fn read_page(url: &Url, resp: &FetchResponse) -> Result<Page, String> {
    if !(200..300).contains(&resp.status) {
        return Err(format!("HTTP {}", resp.status));
    }
    if !readable_type(&resp.content_type) {
        let ct: String = resp.content_type.chars().take(80).collect();
        return Err(format!("unsupported content type {ct}"));
    }
    let body = resp.body.as_deref().unwrap_or("");
    let ct = resp.content_type.to_ascii_lowercase();
    let html = ct.contains("html") || (ct.is_empty() && body.trim_start().starts_with('<'));
    let (mut text, links) = if html {
        (html_to_text(body, MAX_PAGE_CHARS), links_in_html(body, url))
    } else {
        let mut t: String = body.chars().take(MAX_PAGE_CHARS).collect();
        if t.len() < body.len() {
            t.push_str("\n[… cut]");
        }
        let mut set = Vec::new();
        for c in candidates(&t) {
            if c.contains("://") && set.len() < MAX_PAGE_LINKS {
                set.push(c);
            }
        }
        (t, set)
    };
    if resp.truncated && !text.ends_with("[… cut]") {
        text.push_str("\n[… cut]");
    }
    Ok(Page { text, links })
}
