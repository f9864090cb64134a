//! Gemini's `streamGenerateContent?alt=sse` read as it arrives (the pace of the drafts shown
//! meanwhile is the Telegram side's: `telegram::drafts`).
//!
//! - [`SseDecoder`] cuts the byte stream into events (`data: {json}` blocks ended by a blank
//!   line, `\n` or `\r\n`), however the network splits it, UTF-8 included.
//! - [`merge`] folds the chunks (each a `GenerateContentResponse` with a piece of the answer)
//!   into the one response `generateContent` would have given: adjacent text parts joined,
//!   function calls and signatures kept, the last finish reason, usage and grounding.
//! - [`visible_so_far`] is the answer's visible text while it arrives.

use super::{Candidate, Content, GenerateContentResponse, Part};

/// Bytes a streamed answer may take in all: a model's answer (its output capped by
/// `MAX_OUTPUT_TOKENS`) is far smaller; a stream past it is cut off as a failed call.
pub const MAX_STREAM_BYTES: usize = 4 * 1024 * 1024;

/// Splits an SSE byte stream into the `data` payloads of its events.
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    total: usize,
}

impl SseDecoder {
    /// Whether the stream so far is over [`MAX_STREAM_BYTES`] (the caller stops reading).
    pub fn too_long(&self) -> bool {
        self.total > MAX_STREAM_BYTES
    }

    /// Takes the next bytes; returns the data of every event they completed.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.total += bytes.len();
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some((end, sep)) = find_blank_line(&self.buf) {
            let block: Vec<u8> = self.buf.drain(..end + sep).take(end).collect();
            if let Some(data) = event_data(&String::from_utf8_lossy(&block)) {
                out.push(data);
            }
        }
        out
    }

    /// The stream ended: an event not followed by a blank line still counts.
    pub fn finish(&mut self) -> Vec<String> {
        let rest = std::mem::take(&mut self.buf);
        event_data(&String::from_utf8_lossy(&rest)).into_iter().collect()
    }
}

/// The first blank line: where the block before it ends, and the separator's length.
fn find_blank_line(buf: &[u8]) -> Option<(usize, usize)> {
    (0..buf.len()).find_map(|i| {
        if buf[i..].starts_with(b"\r\n\r\n") {
            Some((i, 4))
        } else if buf[i..].starts_with(b"\n\n") {
            Some((i, 2))
        } else {
            None
        }
    })
}

/// The data lines of one event block, joined by newlines (none: a comment or empty block).
fn event_data(block: &str) -> Option<String> {
    let lines: Vec<&str> = block
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| d.strip_prefix(' ').unwrap_or(d))
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// Parses one event's data as a response chunk. An error sent in the stream (`{"error":
/// {...}}`, after a 200 the status can no longer say it) is an error, not an empty chunk.
pub fn parse_chunk(data: &str) -> Result<GenerateContentResponse, String> {
    let value: serde_json::Value = serde_json::from_str(data).map_err(|e| format!("a streamed chunk is not JSON: {e}"))?;
    if let Some(error) = value.get("error") {
        let message = error.get("message").and_then(serde_json::Value::as_str).unwrap_or("no message");
        return Err(format!("the stream failed: {message}"));
    }
    // Read again from the text, as a whole response is (`outbound::gemini`): a second reader
    // of the response from a `Value` would be as much code again (issue 50: the wasm budget).
    serde_json::from_str(data).map_err(|e| format!("a streamed chunk is not a response: {e}"))
}

/// Whether a part is text that the next text part may be appended to.
fn plain_text(p: &Part) -> bool {
    p.text.is_some() && p.function_call.is_none() && p.function_response.is_none() && p.extra.is_empty()
}

/// Adds a chunk's part to the parts so far: text continues the previous text part of the same
/// kind (thought or not); an empty text part carrying a signature gives it to that part.
fn push_part(parts: &mut Vec<Part>, part: Part) {
    if let Some(last) = parts.last_mut() {
        let joinable = plain_text(last) && plain_text(&part) && last.thought == part.thought;
        if joinable && (last.thought_signature.is_none() || part.text.as_deref() == Some("")) {
            last.text.get_or_insert_default().push_str(part.text.as_deref().unwrap_or_default());
            if part.thought_signature.is_some() {
                last.thought_signature = part.thought_signature;
            }
            return;
        }
    }
    parts.push(part);
}

/// The chunks of one streamed answer as the one response `generateContent` gives.
pub fn merge(chunks: Vec<GenerateContentResponse>) -> GenerateContentResponse {
    let mut out = GenerateContentResponse::default();
    let mut candidate: Option<Candidate> = None;
    for chunk in chunks {
        out.prompt_feedback = out.prompt_feedback.or(chunk.prompt_feedback);
        out.usage_metadata = chunk.usage_metadata.or(out.usage_metadata);
        out.model_version = chunk.model_version.or(out.model_version);
        let Some(c) = chunk.candidates.into_iter().next() else { continue };
        let merged = candidate.get_or_insert_with(Candidate::default);
        if let Some(content) = c.content {
            let into = merged.content.get_or_insert_with(|| Content { role: content.role.clone(), parts: Vec::new() });
            for part in content.parts {
                push_part(&mut into.parts, part);
            }
        }
        merged.finish_reason = c.finish_reason.or(merged.finish_reason.take());
        merged.grounding_metadata = c.grounding_metadata.or(merged.grounding_metadata.take());
    }
    out.candidates.extend(candidate);
    out
}

/// The visible text of a streamed answer so far, and whether it calls functions.
pub fn visible_so_far(chunks: &[GenerateContentResponse]) -> (String, bool) {
    let mut text = String::new();
    let mut calls = false;
    for part in chunks.iter().filter_map(|c| c.candidates.first()).filter_map(|c| c.content.as_ref()).flat_map(|c| c.parts.iter()) {
        calls |= part.function_call.is_some();
        if !part.is_thought() {
            text.push_str(part.text.as_deref().unwrap_or_default());
        }
    }
    (text, calls)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemini::Outcome;

    fn chunk(json: &str) -> GenerateContentResponse {
        parse_chunk(json).unwrap()
    }

    #[test]
    fn a_stream_over_the_cap_is_too_long() {
        let mut d = SseDecoder::default();
        let piece = vec![b'x'; 1024 * 1024];
        for _ in 0..4 {
            assert!(d.push(&piece).is_empty());
            assert!(!d.too_long());
        }
        d.push(b"x");
        assert!(d.too_long());
    }

    #[test]
    fn events_are_cut_however_the_bytes_arrive() {
        let stream = "data: {\"a\":1}\r\n\r\ndata: {\"b\":\"é\"}\r\n\r\n: comment\n\ndata: {\"c\":3}\n\n";
        let bytes = stream.as_bytes();
        for split in 1..bytes.len() {
            let mut d = SseDecoder::default();
            let mut got = d.push(&bytes[..split]);
            got.extend(d.push(&bytes[split..]));
            got.extend(d.finish());
            assert_eq!(got, vec!["{\"a\":1}", "{\"b\":\"é\"}", "{\"c\":3}"], "split at {split}");
        }
    }

    #[test]
    fn an_unterminated_last_event_counts() {
        let mut d = SseDecoder::default();
        assert!(d.push(b"data: {\"x\":1}").is_empty());
        assert_eq!(d.finish(), vec!["{\"x\":1}"]);
    }

    #[test]
    fn chunks_merge_into_one_response() {
        let chunks = vec![
            chunk(r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]},"index":0}],"usageMetadata":{"promptTokenCount":5}}"#),
            chunk(r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"lo **wor"}]},"index":0}]}"#),
            chunk(r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"ld**","thoughtSignature":"sig"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":4,"totalTokenCount":9},"modelVersion":"m"}"#),
        ];
        assert_eq!(visible_so_far(&chunks), ("Hello **world**".to_string(), false));
        let r = merge(chunks);
        let Outcome::Content(c) = r.outcome() else { panic!("no content") };
        assert_eq!(c.parts.len(), 1);
        assert_eq!(c.visible_text(), "Hello **world**");
        assert_eq!(c.parts[0].thought_signature.as_deref(), Some("sig"));
        assert_eq!(r.finish_reason(), Some("STOP"));
        assert_eq!(r.usage_metadata.unwrap().total_token_count, 9);
        assert_eq!(r.model_version.as_deref(), Some("m"));
    }

    #[test]
    fn function_calls_and_thoughts_stay_their_own_parts() {
        let chunks = vec![
            chunk(r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"plan","thought":true}]}}]}"#),
            chunk(r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"Hi"}]}}]}"#),
            chunk(r#"{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"react","args":{}},"thoughtSignature":"s"}]},"finishReason":"STOP"}]}"#),
        ];
        assert_eq!(visible_so_far(&chunks), ("Hi".to_string(), true));
        let r = merge(chunks);
        let parts = &r.candidates[0].content.as_ref().unwrap().parts;
        assert_eq!(parts.len(), 3);
        assert!(parts[2].function_call.is_some());
    }

    #[test]
    fn an_error_in_the_stream_is_an_error() {
        let e = parse_chunk(r#"{"error":{"code":500,"message":"Internal error","status":"INTERNAL"}}"#).unwrap_err();
        assert!(e.contains("Internal error"), "{e}");
        assert!(parse_chunk("not json").is_err());
    }

    #[test]
    fn a_blocked_stream_stays_blocked() {
        let r = merge(vec![chunk(r#"{"promptFeedback":{"blockReason":"SAFETY"}}"#)]);
        assert!(matches!(r.outcome(), Outcome::Empty { .. }));
    }
}
