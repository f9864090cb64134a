//! Reply formatting: the model's Markdown becomes Telegram HTML ([`markdown`]), checked
//! against Telegram's rules ([`html`]), and split into messages that fit ([`split`]).
//! [`render_reply`] is the one entry point delivery uses; [`escape_markdown`] makes outside text
//! (names, notes) literal inside Markdown the bot composes itself; [`draft`] renders an answer
//! still being streamed.

pub mod draft;
pub mod escape;
pub mod html;
pub mod markdown;
pub mod rich;
pub mod split;

pub use escape::escape_markdown;

/// One message to send: its HTML and the plain text to fall back to if Telegram refuses it.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub html: String,
    pub plain: String,
}

/// Renders a Markdown reply into Telegram messages. Never returns an empty chunk; returns no
/// chunks at all for a blank reply.
pub fn render_reply(markdown: &str, limit: usize) -> Vec<Chunk> {
    let rendered = markdown::to_telegram_html(markdown);
    // The renderer's output is valid by construction (property-tested); if that ever fails,
    // sending escaped source text is still correct, just unformatted.
    let html = match html::validate(&rendered) {
        Ok(_) => rendered,
        Err(_) => markdown::escape(markdown.trim()),
    };
    split::split_html(&html, limit)
        .into_iter()
        .map(|html| Chunk { plain: html::to_plain(&html), html })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_replies_give_no_chunks() {
        assert!(render_reply("  \n ", 4096).is_empty());
    }

    #[test]
    fn chunks_carry_a_plain_fallback() {
        let c = render_reply("**a** & b", 4096);
        assert_eq!(c, vec![Chunk { html: "<b>a</b> &amp; b".into(), plain: "a & b".into() }]);
    }
}
