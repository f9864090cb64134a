//! Whether a reply keeps Telegram's link preview: only links people posted keep one; a
//! reply that links anything else goes out with the preview off.
use crate::format::render_reply;
use crate::format::split::TELEGRAM_LIMIT;
use super::html::decode_entities;
use super::links::{looks_like_domain, parse_lenient, url_tokens, LinkSet, LEADING, TRAILING};

/// The links Telegram would see in a reply once rendered: link targets and link-looking
/// text (Telegram links bare domains too).
pub fn reply_links(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    for chunk in render_reply(markdown, TELEGRAM_LIMIT) {
        let mut rest = chunk.html.as_str();
        while let Some(at) = rest.find("href=\"") {
            let after = &rest[at + 6..];
            let end = after.find('"').unwrap_or(after.len());
            out.push(decode_entities(&after[..end]));
            rest = &after[end..];
        }
        for token in chunk.plain.split(|c: char| c.is_whitespace() || c == '<' || c == '>') {
            let token = token.trim_start_matches(LEADING).trim_end_matches(TRAILING);
            if token.contains("://") || looks_like_domain(token) {
                out.push(token.to_string());
            }
        }
    }
    out
}

/// Whether `markdown` links anything no person posted. Checked on the text as written and on
/// [`url_tokens`] of it: Telegram also finds links glued to «, “, —, a comma or a zero-width
/// space, and a preview is a zero-click fetch of the URL.
pub fn needs_preview_off(markdown: &str, people: &LinkSet) -> bool {
    links_unposted(markdown, people) || links_unposted(&url_tokens(markdown), people)
}

pub(crate) fn links_unposted(markdown: &str, people: &LinkSet) -> bool {
    reply_links(markdown).iter().any(|link| {
        let mut variants = vec![link.as_str()];
        let trimmed = link.trim_end_matches(TRAILING);
        if trimmed != link {
            variants.push(trimmed);
        }
        !variants.iter().any(|v| parse_lenient(v).is_some_and(|u| people.contains(&u)))
    })
}
