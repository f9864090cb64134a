//! Gemini `generateContent` wire types and error classification.
//!
//! Invariants:
//! - Every response field is optional and unknown fields are kept ([`Part::extra`]), so a
//!   model turn read from Gemini serialises back with everything it had, `thoughtSignature`
//!   included. The bot stores its own turns this way and sends them back unchanged.
//! - `system` is never a role in `contents`; the system instruction has its own field.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct FunctionCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    #[serde(default)]
    pub args: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionResponse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    pub response: Value,
}

/// One part of a content. Exactly one data field is set in practice; the rest is kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_call: Option<FunctionCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_response: Option<FunctionResponse>,
    /// Fields this code does not model (inlineData, fileData, executableCode, ...).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Part {
    pub fn text(t: impl Into<String>) -> Self {
        Part { text: Some(t.into()), ..Default::default() }
    }
    pub fn function_response(name: &str, id: Option<String>, response: Value) -> Self {
        Part {
            function_response: Some(FunctionResponse { id, name: name.to_string(), response }),
            ..Default::default()
        }
    }
    pub fn is_thought(&self) -> bool {
        self.thought == Some(true)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Content {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default)]
    pub parts: Vec<Part>,
}

impl Content {
    pub fn user(parts: Vec<Part>) -> Self {
        Content { role: Some("user".into()), parts }
    }
    pub fn model(parts: Vec<Part>) -> Self {
        Content { role: Some("model".into()), parts }
    }
    pub fn is_model(&self) -> bool {
        self.role.as_deref() == Some("model")
    }
    pub fn function_calls(&self) -> impl Iterator<Item = &FunctionCall> {
        self.parts.iter().filter_map(|p| p.function_call.as_ref())
    }
    /// The visible text: non-thought text parts, joined.
    pub fn visible_text(&self) -> String {
        self.parts
            .iter()
            .filter(|p| !p.is_thought())
            .filter_map(|p| p.text.as_deref())
            .collect::<Vec<_>>()
            .join("")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionDeclaration {
    pub name: String,
    pub description: String,
    /// Null for a function without parameters: Gemini refuses an OBJECT with no properties.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub parameters: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub function_declarations: Vec<FunctionDeclaration>,
    /// Gemini's built-in Google Search grounding (`WEB_SEARCH`): `{}` turns it on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub google_search: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_level: Option<String>,
    pub include_thoughts: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct GenerationConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_mime_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_config: Option<ThinkingConfig>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateContentRequest {
    pub system_instruction: Option<Content>,
    pub contents: Vec<Content>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_config: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation_config: Option<GenerationConfig>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    #[serde(default)]
    pub content: Option<Content>,
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// Google Search grounding: the pages the answer relied on.
    #[serde(default)]
    pub grounding_metadata: Option<GroundingMetadata>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct GroundingMetadata {
    #[serde(default)]
    pub grounding_chunks: Vec<GroundingChunk>,
    #[serde(default)]
    pub web_search_queries: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct GroundingChunk {
    #[serde(default)]
    pub web: Option<WebChunk>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct WebChunk {
    #[serde(default)]
    pub uri: String,
    #[serde(default)]
    pub title: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PromptFeedback {
    #[serde(default)]
    pub block_reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct UsageMetadata {
    #[serde(default)]
    pub prompt_token_count: u64,
    #[serde(default)]
    pub candidates_token_count: u64,
    #[serde(default)]
    pub cached_content_token_count: u64,
    #[serde(default)]
    pub thoughts_token_count: u64,
    #[serde(default)]
    pub tool_use_prompt_token_count: u64,
    #[serde(default)]
    pub total_token_count: u64,
    /// Output tokens by modality (an image model's `IMAGE` tokens are priced apart).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates_tokens_details: Vec<ModalityTokenCount>,
}

/// Tokens of one modality (`TEXT`, `IMAGE`, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ModalityTokenCount {
    #[serde(default)]
    pub modality: String,
    #[serde(default)]
    pub token_count: u64,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct GenerateContentResponse {
    #[serde(default)]
    pub candidates: Vec<Candidate>,
    #[serde(default)]
    pub prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    pub usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    pub model_version: Option<String>,
}

/// What the first candidate amounts to.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A usable model turn (text and/or function calls).
    Content(Content),
    /// Nothing usable: blocked prompt, SAFETY/RECITATION/OTHER finish, no parts, only thoughts.
    /// The reason is recorded and the user gets a short graceful reply.
    Empty { reason: String },
}

impl GenerateContentResponse {
    /// Whether the first candidate used Google Search (grounding metadata, or the server's own
    /// tool calls and responses in its content).
    pub fn searched(&self) -> bool {
        self.candidates.first().is_some_and(|c| {
            c.grounding_metadata.as_ref().is_some_and(|g| !g.grounding_chunks.is_empty() || !g.web_search_queries.is_empty())
                || c.content.as_ref().is_some_and(|content| {
                    content.parts.iter().any(|p| p.extra.contains_key("toolResponse") || p.extra.contains_key("toolCall"))
                })
        })
    }

    /// How many Google Search queries the first candidate ran (grounding metadata).
    pub fn search_queries(&self) -> u32 {
        self.candidates.first().and_then(|c| c.grounding_metadata.as_ref()).map_or(0, |g| g.web_search_queries.len() as u32)
    }

    /// The web pages the first candidate was grounded on: (title, URL), in Gemini's order.
    pub fn grounding_sources(&self) -> Vec<(String, String)> {
        self.candidates
            .first()
            .and_then(|c| c.grounding_metadata.as_ref())
            .map(|g| g.grounding_chunks.iter().filter_map(|c| c.web.as_ref()).map(|w| (w.title.clone(), w.uri.clone())).collect())
            .unwrap_or_default()
    }

    pub fn finish_reason(&self) -> Option<&str> {
        self.candidates.first().and_then(|c| c.finish_reason.as_deref())
    }

    pub fn outcome(&self) -> Outcome {
        if let Some(reason) = self.prompt_feedback.as_ref().and_then(|f| f.block_reason.as_ref()) {
            return Outcome::Empty { reason: format!("prompt blocked: {reason}") };
        }
        let Some(candidate) = self.candidates.first() else {
            return Outcome::Empty { reason: "no candidates".into() };
        };
        let finish = candidate.finish_reason.clone().unwrap_or_else(|| "UNSPECIFIED".into());
        let content = candidate.content.clone().unwrap_or_default();
        let useful = content.parts.iter().any(|p| {
            p.function_call.is_some() || (!p.is_thought() && p.text.as_deref().is_some_and(|t| !t.trim().is_empty()))
        });
        let refused = matches!(
            finish.as_str(),
            "SAFETY" | "RECITATION" | "OTHER" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII"
                | "MALFORMED_FUNCTION_CALL" | "IMAGE_SAFETY" | "LANGUAGE"
        );
        if refused || !useful {
            let reason = if useful { finish } else { format!("{finish} without usable parts") };
            return Outcome::Empty { reason };
        }
        let mut content = content;
        content.role = Some("model".into());
        Outcome::Content(content)
    }
}

/// Why a model call failed, classified for retry.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// An HTTP error answer from Gemini.
    #[error("Gemini HTTP {status} {status_text}: {message}")]
    Http {
        status: u16,
        status_text: String,
        message: String,
        /// From `RetryInfo.retryDelay` or the `Retry-After` header.
        retry_after_ms: Option<u64>,
        /// A daily quota, which retrying today will not fix.
        daily_quota: bool,
    },
    #[error("network error calling Gemini: {0}")]
    Network(String),
    #[error("unreadable Gemini response: {0}")]
    InvalidResponse(String),
    /// An early start (`chat_state`, "Early start") given up because a newer message of the
    /// burst came within its quiet window: the call was stopped. `usage` is what it cost (the
    /// stream's last count, or `gemini::stream::abandoned_usage`'s estimate), charged like any
    /// call's. Neither retried nor apologised for: the burst's own turn answers.
    #[error("abandoned early start: a newer message came within the quiet window")]
    Abandoned { usage: UsageMetadata },
}

impl ModelError {
    /// Whether the same request may succeed later.
    pub fn is_transient(&self) -> bool {
        match self {
            ModelError::Http { status, daily_quota, .. } => {
                matches!(status, 408 | 429 | 500 | 502 | 503 | 504) && !daily_quota
            }
            ModelError::Network(_) => true,
            ModelError::InvalidResponse(_) => true,
            ModelError::Abandoned { .. } => false,
        }
    }

    /// An early start given up for a newer message ([`ModelError::Abandoned`]).
    pub fn is_abandoned(&self) -> bool {
        matches!(self, ModelError::Abandoned { .. })
    }
    pub fn retry_after_ms(&self) -> Option<u64> {
        match self {
            ModelError::Http { retry_after_ms, .. } => *retry_after_ms,
            _ => None,
        }
    }
    /// A 400 that may come from the shape of the history (roles, function call pairing),
    /// which a repaired history can fix.
    pub fn is_history_shape(&self) -> bool {
        match self {
            ModelError::Http { status: 400, message, .. } => {
                let m = message.to_ascii_lowercase();
                m.contains("function call turn")
                    || m.contains("function response")
                    || m.contains("must not be empty")
                    || m.contains("empty text")
                    || m.contains("valid role")
                    || m.contains("thought_signature")
                    || m.contains("required oneof field")
            }
            _ => false,
        }
    }
}

/// Parses a `google.rpc.Status` error body (and the `Retry-After` header, if any).
pub fn parse_error(status: u16, body: &str, retry_after_header: Option<&str>) -> ModelError {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let err = v.get("error").cloned().unwrap_or(Value::Null);
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("({} bytes, not a Gemini error body)", body.len()));
    let status_text = err.get("status").and_then(Value::as_str).unwrap_or("").to_string();
    let details = err.get("details").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut retry_after_ms = details
        .iter()
        .find_map(|d| d.get("retryDelay").and_then(Value::as_str))
        .and_then(parse_duration_ms);
    if retry_after_ms.is_none() {
        retry_after_ms = retry_after_header.and_then(|h| crate::decimal::parse_f64(h.trim())).map(|s| (s * 1000.0) as u64);
    }
    let daily_quota = details.iter().any(|d| {
        d.get("violations").and_then(Value::as_array).is_some_and(|vs| {
            vs.iter().any(|v| {
                v.get("quotaId").and_then(Value::as_str).is_some_and(|q| q.contains("PerDay"))
            })
        })
    });
    ModelError::Http { status, status_text, message, retry_after_ms, daily_quota }
}

/// Parses a protobuf Duration string such as `"37s"` or `"12.5s"`.
pub fn parse_duration_ms(s: &str) -> Option<u64> {
    let secs: f64 = crate::decimal::parse_f64(s.trim().strip_suffix('s')?)?;
    (secs >= 0.0).then(|| (secs * 1000.0).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!("{}/../../tests/fixtures/gemini/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn response(name: &str) -> GenerateContentResponse {
        serde_json::from_str(&fixture(name)).unwrap()
    }

    #[test]
    fn text_answer_is_content() {
        let r = response("01_text_markdown_answer.json");
        let Outcome::Content(c) = r.outcome() else { panic!("expected content") };
        assert!(c.visible_text().contains("**"));
        assert!(r.usage_metadata.unwrap().prompt_token_count > 0);
    }

    #[test]
    fn usage_has_thoughts_and_cache() {
        let u = response("02_structured_json_thoughts_cached_tokens.json").usage_metadata.unwrap();
        assert!(u.thoughts_token_count > 0 && u.cached_content_token_count > 0);
    }

    #[test]
    fn thought_signature_round_trips_unchanged() {
        let r = response("03_function_call_with_thought_signature.json");
        let Outcome::Content(c) = r.outcome() else { panic!() };
        let sig = c.parts[0].thought_signature.clone().expect("signature");
        let back: Content = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
        assert_eq!(back.parts[0].thought_signature.as_deref(), Some(sig.as_str()));
        assert_eq!(back, c);
        assert_eq!(c.function_calls().count(), 1);
    }

    #[test]
    fn parallel_calls_keep_signature_on_first_only() {
        let Outcome::Content(c) = response("04_parallel_function_calls_signature_on_first.json").outcome() else {
            panic!()
        };
        assert_eq!(c.function_calls().count(), 2);
        assert!(c.parts[0].thought_signature.is_some());
        assert!(c.parts[1].thought_signature.is_none());
    }

    #[test]
    fn empty_and_refused_answers_are_empty_outcomes() {
        for f in [
            "06_max_tokens_no_parts_thinking_exhausted.json",
            "07_prompt_blocked_safety.json",
            "08_finish_safety_no_content.json",
            "09_finish_recitation.json",
            "10_thought_part_include_thoughts.json",
        ] {
            assert!(matches!(response(f).outcome(), Outcome::Empty { .. }), "{f}");
        }
        // A truncated answer still has text worth sending.
        assert!(matches!(response("05_max_tokens_partial_text.json").outcome(), Outcome::Content(_)));
    }

    #[test]
    fn errors_classify_for_retry() {
        let e429 = parse_error(429, &fixture("11_error_429_resource_exhausted.json"), None);
        assert!(e429.is_transient());
        assert_eq!(e429.retry_after_ms(), Some(37_000));
        let e503 = parse_error(503, &fixture("12_error_503_unavailable.json"), Some("3"));
        assert!(e503.is_transient());
        assert_eq!(e503.retry_after_ms(), Some(3_000));
        for (s, f) in [
            (400, "13_error_400_invalid_argument_unknown_field.json"),
            (400, "14_error_400_api_key_invalid.json"),
            (404, "15_error_404_model_not_found.json"),
        ] {
            assert!(!parse_error(s, &fixture(f), None).is_transient(), "{f}");
        }
        let shape = parse_error(
            400,
            r#"{"error":{"code":400,"message":"Please ensure that function call turn comes immediately after a user turn or after a function response turn.","status":"INVALID_ARGUMENT"}}"#,
            None,
        );
        assert!(shape.is_history_shape());
    }

    #[test]
    fn daily_quota_is_permanent() {
        let body = r#"{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]}}"#;
        assert!(!parse_error(429, body, None).is_transient());
    }
}
