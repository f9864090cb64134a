//! The streamed Gemini call: `POST .../models/{model}:streamGenerateContent?alt=sse`. The
//! answer arrives as server-sent events, each a piece of the response (`core::gemini::stream`); every
//! piece is handed to a [`ChunkSink`] as it comes (the chat shows it as a draft), and the
//! pieces merged are the same response `generateContent` gives, so the turn goes on unchanged.
//!
//! Invariant: an error answer (not 200) is read and classified exactly like `generateContent`'s;
//! a stream the network cuts, a piece that does not parse, or a stream over
//! `core::gemini::stream::MAX_STREAM_BYTES` is a network error (the turn retries), never a half answer.
//! An error answer's body is read up to `fetch::MAX_BODY_BYTES`.

use super::gemini::{GeminiClient, TIMEOUT};
use super::net;
use agent_core::gemini::{parse_error, GenerateContentRequest, GenerateContentResponse, ModelError};
use agent_core::gemini::stream::{merge, parse_chunk, SseDecoder};
use worker::{AbortController, Method, RequestRedirect};

/// Receives the pieces of a streamed answer so far, after each new one.
#[allow(async_fn_in_trait)]
pub trait ChunkSink {
    async fn chunk(&self, so_far: &[GenerateContentResponse]);
    /// Whether the person stopped the answer (Telegram's Stop button): the stream is then cut
    /// at once (the request aborted) and what came so far is the answer.
    fn stopped(&self) -> bool {
        false
    }
}

/// How often a streaming call looks whether the answer was stopped between two pieces.
const STOP_POLL_MS: u64 = 50;

/// Resolves once `sink` says the answer was stopped.
async fn stop_of(sink: &impl ChunkSink) {
    while !sink.stopped() {
        worker::Delay::from(std::time::Duration::from_millis(STOP_POLL_MS)).await;
    }
}

impl GeminiClient {
    /// Streams one answer, telling `sink` of every piece; returns the merged response.
    pub async fn stream_generate(&self, model: &str, request: &GenerateContentRequest, sink: &impl ChunkSink) -> Result<GenerateContentResponse, ModelError> {
        let body = serde_json::to_string(request).map_err(|e| ModelError::InvalidResponse(e.to_string()))?;
        let body_text = body.clone();
        let model = model.trim_start_matches("models/");
        let url = format!("{}/v1beta/models/{}:streamGenerateContent?alt=sse", self.base, model);
        let headers = [("content-type", "application/json"), ("x-goog-api-key", self.key.expose())];
        let fetch = net::prepare(&self.meter, Method::Post, &url, &headers, Some(body), RequestRedirect::Follow).map_err(ModelError::Network)?;
        let controller = AbortController::default();
        let signal = controller.signal();
        // The pieces so far, outside the call: a Stop ends the call and keeps them.
        let chunks = std::cell::RefCell::new(Vec::new());
        let call = async {
            let resp = fetch.send(&signal).await?;
            let status = resp.status();
            if status != 200 {
                let retry_after = resp.headers().get("retry-after").ok().flatten();
                let (bytes, _) = net::read_capped(&resp, agent_core::fetch::MAX_BODY_BYTES, true).await?;
                return Ok(Err(parse_error(status, &String::from_utf8_lossy(&bytes), retry_after.as_deref())));
            }
            let mut decoder = SseDecoder::default();
            let Some(body) = resp.body() else {
                return Err("the streamed answer has no body".to_string());
            };
            let mut body = net::Chunks::of(&body);
            loop {
                // The next piece, unless the person stops the answer first: then the body is
                // cancelled and what came so far is the answer.
                let next = {
                    let piece = body.next();
                    futures::pin_mut!(piece);
                    match futures::future::select(piece, std::pin::pin!(stop_of(sink))).await {
                        futures::future::Either::Left((piece, _)) => Some(piece?),
                        futures::future::Either::Right(_) => None,
                    }
                };
                let Some(next) = next else {
                    body.cancel();
                    return Ok(Ok((chunks.take(), true)));
                };
                let Some(bytes) = next else { break };
                let events = decoder.push(&bytes);
                if decoder.too_long() {
                    return Err(format!("the streamed answer is over {} bytes", agent_core::gemini::stream::MAX_STREAM_BYTES));
                }
                if take(&mut chunks.borrow_mut(), events)? {
                    let so_far = chunks.borrow().clone();
                    sink.chunk(&so_far).await;
                }
            }
            take(&mut chunks.borrow_mut(), decoder.finish())?;
            Ok::<_, String>(Ok((chunks.take(), false)))
        };
        // Stopped by the person: the request is aborted (nothing more is read or generated for
        // us) and the answer is what came so far, marked stopped.
        let call = async {
            futures::pin_mut!(call);
            match futures::future::select(call, std::pin::pin!(stop_of(sink))).await {
                futures::future::Either::Left((result, _)) => result,
                futures::future::Either::Right(_) => Ok(Ok((chunks.take(), true))),
            }
        };
        // An answer streamed to its end needs no abort; an error's body may be cut.
        match net::within(call, controller, TIMEOUT, |r| matches!(r, Ok((_, false)))).await {
            Ok(Ok((chunks, true))) => Ok(stopped_answer(chunks, &body_text)),
            Err(e) => Err(ModelError::Network(e)),
            Ok(Err(e)) => Err(e),
            Ok(Ok((chunks, _))) if chunks.is_empty() => Err(ModelError::InvalidResponse("the stream had no answer".into())),
            Ok(Ok((chunks, _))) => Ok(merge(chunks)),
        }
    }
}

/// The answer so far of a stopped stream: finish reason `STOPPED_BY_USER`
/// (`core::telegram::drafts::STOPPED_REASON`).
/// Gemini states the usage in the last piece only: a stopped stream's is estimated (the
/// request's size, the text written so far), so the turn is charged what it used, not nothing.
fn stopped_answer(chunks: Vec<GenerateContentResponse>, request: &str) -> GenerateContentResponse {
    use agent_core::history::estimate_tokens;
    let written = agent_core::gemini::stream::visible_so_far(&chunks).0;
    let mut answer = merge(chunks);
    if answer.candidates.is_empty() {
        answer.candidates.push(agent_core::gemini::Candidate::default());
    }
    answer.candidates[0].finish_reason = Some(agent_core::telegram::drafts::STOPPED_REASON.into());
    if answer.usage_metadata.is_none() {
        let (prompt, output) = (estimate_tokens(request) as u64, estimate_tokens(&written) as u64);
        answer.usage_metadata = Some(agent_core::gemini::UsageMetadata {
            prompt_token_count: prompt,
            candidates_token_count: output,
            total_token_count: prompt + output,
            ..Default::default()
        });
    }
    answer
}

/// Adds the events' chunks; whether there were any. A chunk that does not parse fails the call.
fn take(chunks: &mut Vec<GenerateContentResponse>, events: Vec<String>) -> Result<bool, String> {
    let any = !events.is_empty();
    for data in events {
        chunks.push(parse_chunk(&data)?);
    }
    Ok(any)
}
