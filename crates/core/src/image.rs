//! Pictures the bot makes (`generate_image`, issue 39): the image model's request, what its
//! answer means (a picture, or a refusal said in one short honest line), the daily picture
//! limits, the caption, and the `multipart/form-data` body that uploads the picture to
//! Telegram's `sendPhoto`. Pure: the edge (`src/bot/image.rs`) calls Gemini and Telegram.
//!
//! Invariants (INVARIANTS.md): "A picture is made and sent once" (the step's outbox key;
//! the edge keeps the made picture until it is sent), "What is in view decides"
//! (`generate_image` is a writing tool: withheld with outside text in view).
//!
//! Also:
//! - The image request carries no tools (no search, no URL context, no functions): the prompt
//!   and the photos are all the image model sees, and nothing it is given can reach a URL.
//! - Sizes are capped before anything is held: the answer's body ([`MAX_ANSWER_BYTES`], read
//!   capped by the edge) and the decoded picture ([`MAX_PHOTO_BYTES`], Telegram's `sendPhoto`
//!   limit; the base64 is measured before it is decoded).

use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};

/// Telegram's limit for a photo uploaded with `sendPhoto` (10 MB).
pub const MAX_PHOTO_BYTES: usize = 10 * 1000 * 1000;

/// The most of the image model's answer that is read: a 10 MB picture in base64 (13.4 MB) and
/// the JSON around it.
pub const MAX_ANSWER_BYTES: usize = 14 * 1024 * 1024;

/// The largest photo given to the image model to edit (Gemini's inline limit per image file).
pub const MAX_SOURCE_BYTES: usize = 7 * 1000 * 1000;

/// Photos in view a request may edit or combine (the model takes up to 14; each costs input).
pub const MAX_SOURCE_PHOTOS: usize = 3;

/// A caption's limit (Telegram: 1024 characters after entities are parsed; sent as plain text).
pub const MAX_CAPTION_CHARS: usize = 1024;

/// The aspect ratios Gemini's image models take (`imageConfig.aspectRatio`).
pub const ASPECT_RATIOS: [&str; 10] = ["1:1", "2:3", "3:2", "3:4", "4:3", "4:5", "5:4", "9:16", "16:9", "21:9"];

/// The prompt's limit in characters (a picture's description, not a document).
pub const MAX_PROMPT_CHARS: usize = 2000;

/// The default image model when `IMAGE_MODEL` is `on`: Nano Banana 2.1, Google's current image
/// model (the model list in Google's token-counting docs, read 2026-11-26; its predecessor
/// `gemini-3.1-flash-image` was shut down on 2026-10-29).
pub const DEFAULT_IMAGE_MODEL: &str = "gemini-nano-banana-2.1";

/// The function's arguments, checked for shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    pub prompt: String,
    pub photos: Vec<i64>,
    pub aspect_ratio: Option<String>,
}

/// Checks `generate_image`'s arguments: a prompt, at most [`MAX_SOURCE_PHOTOS`] message ids,
/// a known aspect ratio (an unknown one is dropped: the model's default).
pub fn parse_ask(args: &Value) -> Result<Ask, &'static str> {
    let prompt = args.get("prompt").and_then(Value::as_str).map(str::trim).unwrap_or_default();
    if prompt.is_empty() {
        return Err("prompt is required");
    }
    let prompt: String = prompt.chars().take(MAX_PROMPT_CHARS).collect();
    let photos: Vec<i64> = match args.get("photo_message_ids") {
        Some(Value::Array(v)) => v
            .iter()
            .filter_map(|x| x.as_i64().or_else(|| x.as_str().and_then(|s| s.trim().trim_start_matches('#').parse().ok())))
            .collect(),
        _ => Vec::new(),
    };
    if photos.len() > MAX_SOURCE_PHOTOS {
        return Err("at most 3 photo_message_ids");
    }
    let aspect_ratio = args
        .get("aspect_ratio")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|r| ASPECT_RATIOS.contains(r))
        .map(str::to_string);
    Ok(Ask { prompt, photos, aspect_ratio })
}

/// A photo given to the image model to edit or combine.
pub struct Source<'a> {
    pub mime_type: &'a str,
    pub bytes: &'a [u8],
}

/// The image model's request body: the photos, then the prompt; text and image out; the
/// aspect ratio when asked. No tools, no system instruction (see the module doc).
pub fn request_body(ask: &Ask, sources: &[Source<'_>]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut parts: Vec<Value> = sources
        .iter()
        .map(|s| json!({"inlineData": {"mimeType": s.mime_type, "data": b64.encode(s.bytes)}}))
        .collect();
    parts.push(json!({"text": ask.prompt}));
    let mut config = json!({"responseModalities": ["TEXT", "IMAGE"]});
    if let Some(r) = &ask.aspect_ratio {
        config["imageConfig"] = json!({"aspectRatio": r});
    }
    json!({"contents": [{"role": "user", "parts": parts}], "generationConfig": config}).to_string()
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Answer {
    #[serde(default)]
    candidates: Vec<Candidate>,
    #[serde(default)]
    prompt_feedback: Option<Feedback>,
    #[serde(default)]
    usage_metadata: Option<crate::gemini::UsageMetadata>,
    #[serde(default)]
    model_version: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Feedback {
    #[serde(default)]
    block_reason: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Content {
    #[serde(default)]
    parts: Vec<AnswerPart>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct AnswerPart {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(default)]
    inline_data: Option<Inline>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Inline {
    mime_type: String,
    data: String,
}

/// What the image model's answer comes to.
#[derive(Debug, Clone, PartialEq)]
pub enum Made {
    /// A picture (its first image part, as the base64 it came in: stored as it is, decoded
    /// once for the upload by [`decode`]) and the caption from its text, if any.
    Picture { mime_type: String, base64: String, caption: Option<String> },
    /// No picture: the line the person gets instead.
    Refused { line: String, reason: String },
}

/// The image model's answer, read: what it made, its usage, the model version, the finish reason.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub made: Made,
    pub usage: crate::gemini::UsageMetadata,
    pub model_version: Option<String>,
    pub finish_reason: Option<String>,
}

/// The finish reasons that mean the model would not make it for safety or policy.
const SAFETY: [&str; 8] = ["SAFETY", "IMAGE_SAFETY", "PROHIBITED_CONTENT", "IMAGE_PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "RECITATION", "IMAGE_RECITATION"];

/// The line said when the image model declines for safety or policy.
pub const SAFETY_LINE: &str = "I can't make that picture: the image model declined it under its safety rules. You could describe it differently.";

/// The line said when the answer had no picture for another reason.
pub const NO_PICTURE_LINE: &str = "The image model answered without a picture this time, so there is nothing to send.";

/// The line said when the picture is larger than Telegram takes.
pub const TOO_LARGE_LINE: &str = "The picture came out larger than Telegram accepts (10 MB), so I couldn't send it.";

/// Reads the image model's answer (`body`, already capped at [`MAX_ANSWER_BYTES`]). Never
/// fails into a loop: an answer without a usable picture is [`Made::Refused`] with its line.
pub fn read_answer(body: &str) -> Result<Reading, String> {
    let a: Answer = serde_json::from_str(body).map_err(|e| format!("unreadable image answer: {e}"))?;
    let usage = a.usage_metadata.unwrap_or_default();
    let candidate = a.candidates.into_iter().next().unwrap_or_default();
    let finish_reason = candidate.finish_reason.clone().or_else(|| a.prompt_feedback.as_ref().and_then(|f| f.block_reason.clone()));
    let refused = |line: &str, reason: String| Made::Refused { line: line.to_string(), reason };
    let reading = |made| Reading { made, usage: usage.clone(), model_version: a.model_version.clone(), finish_reason: finish_reason.clone() };
    if let Some(reason) = a.prompt_feedback.and_then(|f| f.block_reason) {
        return Ok(reading(refused(SAFETY_LINE, format!("prompt blocked: {reason}"))));
    }
    let parts = candidate.content.map(|c| c.parts).unwrap_or_default();
    let caption = caption(parts.iter().filter(|p| p.thought != Some(true)).filter_map(|p| p.text.as_deref()));
    let image = parts.into_iter().filter(|p| p.thought != Some(true)).find_map(|p| p.inline_data.filter(|d| d.mime_type.starts_with("image/")));
    let reason = finish_reason.clone().unwrap_or_else(|| "no finish reason".into());
    let Some(image) = image else {
        let line = if SAFETY.contains(&reason.as_str()) { SAFETY_LINE } else { NO_PICTURE_LINE };
        return Ok(reading(refused(line, reason)));
    };
    // Measured before decoding: base64 is 4 characters for 3 bytes.
    if image.data.len() / 4 * 3 > MAX_PHOTO_BYTES + 3 {
        return Ok(reading(refused(TOO_LARGE_LINE, format!("{} base64 characters", image.data.len()))));
    }
    Ok(reading(Made::Picture { mime_type: image.mime_type, base64: image.data, caption }))
}

/// A picture's bytes from its base64, at most [`MAX_PHOTO_BYTES`] (measured before decoding).
pub fn decode(base64: &str) -> Result<Vec<u8>, String> {
    if base64.len() / 4 * 3 > MAX_PHOTO_BYTES + 3 {
        return Err("over 10 MB".into());
    }
    base64::engine::general_purpose::STANDARD.decode(base64.trim()).map_err(|e| format!("undecodable picture: {e}"))
}

/// The image type of a file by its first bytes (Telegram keeps photos as JPEG; a document
/// may be PNG or WebP): what the image model is told it is.
pub fn sniff_mime(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// The caption from the model's text parts: joined, trimmed, at most [`MAX_CAPTION_CHARS`]
/// characters (cut at a word with an ellipsis); none when there is no text.
pub fn caption<'a>(texts: impl Iterator<Item = &'a str>) -> Option<String> {
    let text = texts.collect::<Vec<_>>().join(" ");
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if text.chars().count() <= MAX_CAPTION_CHARS {
        return Some(text.to_string());
    }
    let cut: String = text.chars().take(MAX_CAPTION_CHARS - 1).collect();
    let cut = cut.rsplit_once(char::is_whitespace).map_or(cut.as_str(), |(head, _)| head).trim_end();
    Some(format!("{cut}…"))
}

/// The image output tokens of a call (`candidatesTokensDetails`, modality `IMAGE`).
pub fn image_tokens(usage: &crate::gemini::UsageMetadata) -> u64 {
    usage.candidates_tokens_details.iter().filter(|d| d.modality.eq_ignore_ascii_case("IMAGE")).map(|d| d.token_count).sum()
}

/// The picture limits (0: unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Pictures per person per UTC day.
    pub per_person_per_day: u64,
    /// Pictures per chat per UTC day.
    pub per_chat_per_day: u64,
}

/// The line a person over a picture limit gets (one clear line, not an apology).
pub const PERSON_LIMIT_LINE: &str = "You've reached today's picture limit; you can ask for more pictures tomorrow (UTC).";
/// The line a chat over its picture limit gets.
pub const CHAT_LIMIT_LINE: &str = "This chat has reached today's picture limit; more pictures tomorrow (UTC).";

/// Whether one more picture is within the limits, given the pictures made today (this step's
/// own not counted): `None`, or the line to send instead. Operators are never limited.
pub fn over_limit(l: &Limits, person_today: u64, chat_today: u64, operator: bool) -> Option<&'static str> {
    let over = |limit: u64, used: u64| limit > 0 && used >= limit;
    if operator {
        None
    } else if over(l.per_chat_per_day, chat_today) {
        Some(CHAT_LIMIT_LINE)
    } else if over(l.per_person_per_day, person_today) {
        Some(PERSON_LIMIT_LINE)
    } else {
        None
    }
}

/// A `multipart/form-data` body: text fields, then one file. The boundary must not occur in
/// any of them (the edge picks a random one; [`boundary_fits`] checks).
pub fn multipart(boundary: &str, fields: &[(&str, String)], file: (&str, &str, &str, &[u8])) -> Vec<u8> {
    let (name, filename, mime, bytes) = file;
    let mut out = Vec::with_capacity(bytes.len() + 512);
    for (k, v) in fields {
        out.extend_from_slice(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n").as_bytes());
    }
    out.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\nContent-Type: {mime}\r\n\r\n").as_bytes(),
    );
    out.extend_from_slice(bytes);
    out.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    out
}

/// Whether `boundary` occurs nowhere in the fields or the file.
pub fn boundary_fits(boundary: &str, fields: &[(&str, String)], bytes: &[u8]) -> bool {
    let b = boundary.as_bytes();
    !fields.iter().any(|(_, v)| v.contains(boundary)) && !bytes.windows(b.len()).any(|w| w == b)
}

/// The file name of an uploaded picture of `mime`.
pub fn file_name(mime: &str) -> &'static str {
    match mime {
        "image/jpeg" => "picture.jpg",
        "image/webp" => "picture.webp",
        _ => "picture.png",
    }
}

/// How a made picture shows in history: the bot's own photo, described by its prompt.
pub fn description(prompt: &str) -> String {
    format!("a picture the bot made: {prompt}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\nrest";

    fn answer(parts: Value, finish: &str) -> String {
        json!({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish}],
               "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1130,
                 "candidatesTokensDetails": [{"modality": "IMAGE", "tokenCount": 1120}, {"modality": "TEXT", "tokenCount": 10}]},
               "modelVersion": "gemini-nano-banana-2.1"})
        .to_string()
    }

    #[test]
    fn a_picture_and_its_caption_are_read_with_the_image_tokens() {
        let data = base64::engine::general_purpose::STANDARD.encode(PNG);
        let r = read_answer(&answer(json!([{"text": "A cat."}, {"inlineData": {"mimeType": "image/png", "data": data}}]), "STOP")).unwrap();
        assert_eq!(r.made, Made::Picture { mime_type: "image/png".into(), base64: data.clone(), caption: Some("A cat.".into()) });
        assert_eq!(decode(&data).unwrap(), PNG);
        assert_eq!(sniff_mime(PNG), Some("image/png"));
        assert_eq!(sniff_mime(b"\xff\xd8\xff\xe0"), Some("image/jpeg"));
        assert_eq!(sniff_mime(b"GIF89a"), None);
        assert_eq!(image_tokens(&r.usage), 1120);
    }

    #[test]
    fn safety_refusals_and_answers_without_a_picture_are_one_short_line() {
        let r = read_answer(&json!({"candidates": [{"finishReason": "IMAGE_SAFETY", "index": 0}]}).to_string()).unwrap();
        assert!(matches!(r.made, Made::Refused { ref line, ref reason } if line == SAFETY_LINE && reason == "IMAGE_SAFETY"));
        let r = read_answer(&json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}).to_string()).unwrap();
        assert!(matches!(r.made, Made::Refused { ref line, .. } if line == SAFETY_LINE));
        let r = read_answer(&answer(json!([{"text": "I can only describe it."}]), "STOP")).unwrap();
        assert!(matches!(r.made, Made::Refused { ref line, .. } if line == NO_PICTURE_LINE));
        assert!(read_answer("not json").is_err());
    }

    #[test]
    fn a_picture_over_telegrams_limit_is_refused_before_it_is_decoded() {
        let big = "A".repeat(MAX_PHOTO_BYTES / 3 * 4 + 400);
        let r = read_answer(&answer(json!([{"inlineData": {"mimeType": "image/png", "data": big}}]), "STOP")).unwrap();
        assert!(matches!(r.made, Made::Refused { ref line, .. } if line == TOO_LARGE_LINE));
        assert!(decode(&"A".repeat(MAX_PHOTO_BYTES / 3 * 4 + 400)).is_err());
    }

    #[test]
    fn the_request_has_the_photos_then_the_prompt_and_no_tools() {
        let ask = Ask { prompt: "make it evening".into(), photos: vec![5], aspect_ratio: Some("16:9".into()) };
        let body: Value = serde_json::from_str(&request_body(&ask, &[Source { mime_type: "image/jpeg", bytes: b"\xff\xd8\xff" }])).unwrap();
        let parts = &body["contents"][0]["parts"];
        assert_eq!(parts[0]["inlineData"]["data"], "/9j/");
        assert_eq!(parts[1]["text"], "make it evening");
        assert_eq!(body["generationConfig"]["imageConfig"]["aspectRatio"], "16:9");
        assert!(body.get("tools").is_none() && body.get("systemInstruction").is_none());
    }

    #[test]
    fn arguments_are_checked() {
        let a = parse_ask(&json!({"prompt": " a fox ", "photo_message_ids": [3, "#4"], "aspect_ratio": "7:1"})).unwrap();
        assert_eq!(a, Ask { prompt: "a fox".into(), photos: vec![3, 4], aspect_ratio: None });
        assert!(parse_ask(&json!({"prompt": ""})).is_err());
        assert!(parse_ask(&json!({"prompt": "x", "photo_message_ids": [1, 2, 3, 4]})).is_err());
    }

    #[test]
    fn limits_say_one_line_and_operators_are_never_limited() {
        let l = Limits { per_person_per_day: 2, per_chat_per_day: 5 };
        assert_eq!(over_limit(&l, 1, 4, false), None);
        assert_eq!(over_limit(&l, 2, 0, false), Some(PERSON_LIMIT_LINE));
        assert_eq!(over_limit(&l, 0, 5, false), Some(CHAT_LIMIT_LINE));
        assert_eq!(over_limit(&l, 9, 9, true), None);
        assert_eq!(over_limit(&Limits { per_person_per_day: 0, per_chat_per_day: 0 }, 99, 99, false), None);
    }

    #[test]
    fn captions_are_cut_to_telegrams_limit() {
        assert_eq!(caption(["  "].into_iter()), None);
        let long = "word ".repeat(400);
        let c = caption([long.as_str()].into_iter()).unwrap();
        assert!(c.chars().count() <= MAX_CAPTION_CHARS && c.ends_with('…'), "{c}");
    }

    #[test]
    fn the_multipart_body_has_the_fields_and_the_file() {
        let body = multipart("XyZ", &[("chat_id", "5".into())], ("photo", "picture.png", "image/png", PNG));
        let text = String::from_utf8_lossy(&body);
        assert!(text.starts_with("--XyZ\r\nContent-Disposition: form-data; name=\"chat_id\"\r\n\r\n5\r\n--XyZ\r\n"));
        assert!(text.contains("filename=\"picture.png\"\r\nContent-Type: image/png\r\n\r\n\u{fffd}PNG"));
        assert!(text.ends_with("\r\n--XyZ--\r\n"));
        assert!(boundary_fits("XyZ", &[("a", "b".into())], PNG));
        assert!(!boundary_fits("PNG", &[], PNG));
    }
}
