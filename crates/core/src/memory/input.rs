//! What consolidation reads: the conversation's messages, with text that is not the chat's
//! people's own words left out (issue 35 item 8).
//!
//! Invariants (INVARIANTS.md): "Outside words never become memories" (forwarded text and a
//! document's contents: its description, what it says). The line stays (ids, order, who
//! posted it), marked as left out: the model still sees that something was forwarded or
//! shared, only not what it says.

use crate::conversation::Part;
use crate::history::HistoryMessage;

/// What stands for a forwarded message's text in consolidation's input.
pub const FORWARDED_LEFT_OUT: &str = "[a forwarded message: not this person's words, left out of memories]";
/// What stands for a document's contents in consolidation's input.
pub const DOCUMENT_LEFT_OUT: &str = "its contents are not this person's words, left out of memories";

/// The messages as the extraction call may read them: forwarded messages reduced to a marker,
/// documents (anything but an image) to their kind.
pub fn for_extraction(messages: &[HistoryMessage]) -> Vec<HistoryMessage> {
    messages
        .iter()
        .map(|m| {
            let mut m = m.clone();
            if m.forwarded_from.is_some() {
                m.parts = vec![Part::Text { text: FORWARDED_LEFT_OUT.to_string(), entities: Vec::new() }];
                return m;
            }
            for p in &mut m.parts {
                if let Part::Media { kind, detail, mime_type, .. } = p {
                    let image = mime_type.as_deref().is_some_and(|t| t.trim().to_ascii_lowercase().starts_with("image/"));
                    if kind == "document" && !image {
                        *detail = DOCUMENT_LEFT_OUT.to_string();
                    }
                }
            }
            m
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{compact_lines, Role};

    fn msg(seq: i64, text: &str, forwarded: Option<&str>, media: Option<(&str, Option<&str>, &str)>) -> HistoryMessage {
        let mut parts = vec![Part::Text { text: text.into(), entities: Vec::new() }];
        if let Some((kind, mime, detail)) = media {
            parts.push(Part::Media {
                kind: kind.into(),
                detail: detail.into(),
                file_id: Some("f".into()),
                file_unique_id: Some(format!("u{seq}")),
                mime_type: mime.map(str::to_string),
                thumb_file_id: None,
                size: None,
            });
        }
        HistoryMessage {
            seq,
            message_id: Some(seq),
            role: Role::User,
            user_id: Some(7),
            name: "Ann".into(),
            username: None,
            reply_to: None,
            reply_info: None,
            forwarded_from: forwarded.map(str::to_string),
            parts,
            date: 0,
            edited: false,
            turn_id: None,
            answered_upto: None,
            media_group_id: None,
            album_ids: Vec::new(),
        }
    }

    #[test]
    fn forwarded_and_document_text_never_reaches_extraction() {
        let msgs = vec![
            msg(1, "I love hiking", None, None),
            msg(2, "Ann's password is hunter2 and she owes Mallory 500 EUR", Some("Mallory"), None),
            msg(3, "read this", None, Some(("document", Some("application/pdf"), "a letter — Ann agrees to wire 500 EUR to Mallory"))),
            msg(4, "my cat", None, Some(("photo", None, "a tabby cat"))),
        ];
        let lines = compact_lines(&for_extraction(&msgs));
        assert!(lines.contains("I love hiking") && lines.contains("read this") && lines.contains("a tabby cat"), "{lines}");
        for leaked in ["hunter2", "owes Mallory", "wire 500"] {
            assert!(!lines.contains(leaked), "{leaked} in {lines}");
        }
        assert!(lines.contains(FORWARDED_LEFT_OUT) && lines.contains(DOCUMENT_LEFT_OUT), "{lines}");
        assert_eq!(for_extraction(&msgs).len(), msgs.len(), "every line stays");
    }
}
