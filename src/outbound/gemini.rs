//! The Gemini client: `POST {GEMINI_API_BASE}/v1beta/models/{model}:generateContent`, the key
//! in the `x-goog-api-key` header (never in the URL). Implements the core's `ModelPort`.

use crate::config::{Ctx, Meter};
use super::net;
use agent_core::gemini::{parse_error, GenerateContentRequest, GenerateContentResponse, ModelError};
use agent_core::secret::Secret;
use agent_core::turn::ModelPort;
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

/// Long answers with thinking can take a while; the alarm has minutes of wall time.
pub(super) const TIMEOUT: Duration = Duration::from_secs(120);

pub struct GeminiClient {
    pub(super) base: String,
    pub(super) key: Secret,
    pub(super) meter: Meter,
}

impl Ctx {
    /// The Gemini client, counting on this context's meter.
    pub fn gemini(&self) -> GeminiClient {
        GeminiClient::new(&self.cfg.gemini_api_base, self.secrets.gemini_api_key.clone(), self.meter.clone())
    }
}

impl GeminiClient {
    pub fn new(base: &str, key: Secret, meter: Meter) -> Self {
        GeminiClient { base: base.trim_end_matches('/').to_string(), key, meter }
    }

    /// Posts any request body to a model method (`generateContent`, `embedContent`, ...).
    pub async fn post(&self, model: &str, method: &str, body: String) -> Result<String, ModelError> {
        let model = model.trim_start_matches("models/");
        let url = format!("{}/v1beta/models/{}:{}", self.base, model, method);
        let resp = net::post_json(&self.meter, &url, &[("x-goog-api-key", self.key.expose())], body, TIMEOUT)
            .await
            .map_err(ModelError::Network)?;
        answer_of(resp)
    }
}

impl GeminiClient {
    /// Embeds texts with an embeddings model (`batchEmbedContents`), one vector per text.
    pub async fn embed(&self, model: &str, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
        #[derive(Deserialize)]
        struct Values {
            values: Vec<f32>,
        }
        #[derive(Deserialize)]
        struct Batch {
            embeddings: Vec<Values>,
        }
        let model = model.trim_start_matches("models/");
        let body = json!({"requests": texts.iter().map(|t| json!({
            "model": format!("models/{model}"),
            "content": {"parts": [{"text": t}]},
            "outputDimensionality": agent_core::memory::vector::DIMENSIONS,
        })).collect::<Vec<_>>()});
        let raw = self.post(model, "batchEmbedContents", body.to_string()).await.map_err(|e| e.to_string())?;
        let batch: Batch = serde_json::from_str(&raw).map_err(|e| e.to_string())?;
        Ok(batch.embeddings.into_iter().map(|v| v.values).collect())
    }
}

impl ModelPort for GeminiClient {
    async fn generate(&self, model: &str, request: &GenerateContentRequest) -> Result<GenerateContentResponse, ModelError> {
        let body = serde_json::to_string(request).map_err(|e| ModelError::InvalidResponse(e.to_string()))?;
        let text = self.post(model, "generateContent", body).await?;
        serde_json::from_str(&text).map_err(|e| ModelError::InvalidResponse(e.to_string()))
    }
}

impl GeminiClient {
    /// Asks an image model (`core::image::request_body`); the answer read up to
    /// `core::image::MAX_ANSWER_BYTES` (a picture in base64), never more.
    pub async fn generate_image(&self, model: &str, body: &str) -> Result<String, ModelError> {
        let model = model.trim_start_matches("models/");
        let url = format!("{}/v1beta/models/{}:generateContent", self.base, model);
        let headers = [("content-type", "application/json"), ("x-goog-api-key", self.key.expose())];
        let resp = net::post_bytes(&self.meter, &url, &headers, body.as_bytes(), agent_core::image::MAX_ANSWER_BYTES, TIMEOUT)
            .await
            .map_err(ModelError::Network)?;
        answer_of(resp)
    }
}

/// A model method's answer: its body when 200, else Gemini's error (with `Retry-After`).
fn answer_of(resp: net::HttpResponse) -> Result<String, ModelError> {
    if resp.status == 200 {
        Ok(resp.body)
    } else {
        let retry_after = resp.headers.get("retry-after").ok().flatten();
        Err(parse_error(resp.status, &resp.body, retry_after.as_deref()))
    }
}
