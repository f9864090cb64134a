//! Whether a reply keeps Telegram's link preview: only links people posted keep one; a
//! reply that links anything else goes out with the preview off.
use crate::format::render_reply;
use crate::format::split::TELEGRAM_LIMIT;
use super::html::decode_entities;
use super::links::{looks_like_domain, parse_lenient, url_tokens, LinkSet, LEADING, TRAILING};

/// The links Telegram would see in a reply once rendered: link targets and link-looking
/// text (Telegram links bare domains too).
pub fn reply_links(markdown: &str) -> Vec<String> {
    render_reply(markdown, TELEGRAM_LIMIT).iter().flat_map(|c| html_links(&c.html)).collect()
}

/// The links in what a rich answer would send of `markdown` ([`crate::format::rich::render_rich`],
/// the payload itself, not a second rendering): every `href` of its HTML, and link-looking
/// text. None when the answer would not go as rich messages.
pub fn rich_links(markdown: &str) -> Vec<String> {
    crate::format::rich::render_rich(markdown).unwrap_or_default().iter().flat_map(|c| html_links(&c.html)).collect()
}

/// The links in a Telegram HTML payload as it is sent: every `href`, and link-looking text
/// (Telegram links bare domains too), entities decoded.
pub fn html_links(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut text = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        text.push_str(&rest[..open]);
        text.push(' ');
        let tag = &rest[open..];
        let close = tag.find('>').map_or(tag.len(), |c| c + 1);
        if let Some((_, href)) = tag[..close].split_once("href=\"") {
            out.push(decode_entities(href.split('"').next().unwrap_or("")));
        }
        rest = &tag[close..];
    }
    text.push_str(rest);
    for token in decode_entities(&text).split(char::is_whitespace) {
        let token = token.trim_start_matches(LEADING).trim_end_matches(TRAILING);
        if token.contains("://") || looks_like_domain(token) {
            out.push(token.to_string());
        }
    }
    out
}

/// Whether a Telegram HTML payload links anything no person posted.
pub fn html_links_unposted(html: &str, people: &LinkSet) -> bool {
    any_unposted(&html_links(html), people)
}

/// Whether `markdown` links anything no person posted. Checked on the text as written, on
/// [`url_tokens`] of it (Telegram also finds links glued to «, “, —, a comma or a zero-width
/// space, and a preview is a zero-click fetch of the URL), and on the rich payload it would be
/// sent as ([`rich_links`]: a rich message cannot turn previews off, and its renderer decodes
/// spellings such as `https:\/\/` and links inside table cells), so that such an answer goes
/// as an ordinary message with previews off.
pub fn needs_preview_off(markdown: &str, people: &LinkSet) -> bool {
    links_unposted(markdown, people) || links_unposted(&url_tokens(markdown), people) || any_unposted(&rich_links(markdown), people)
}

pub(crate) fn links_unposted(markdown: &str, people: &LinkSet) -> bool {
    any_unposted(&reply_links(markdown), people)
}

/// Whether any of `links` is not one a person posted.
fn any_unposted(links: &[String], people: &LinkSet) -> bool {
    links.iter().any(|link| {
        let mut variants = vec![link.as_str()];
        let trimmed = link.trim_end_matches(TRAILING);
        if trimmed != link {
            variants.push(trimmed);
        }
        !variants.iter().any(|v| parse_lenient(v).is_some_and(|u| people.contains(&u)))
    })
}
