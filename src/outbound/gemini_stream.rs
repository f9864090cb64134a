//! The streamed Gemini call: `POST .../models/{model}:streamGenerateContent?alt=sse`. The
//! answer arrives as server-sent events, each a piece of the response (`core::gemini::stream`); every
//! piece is handed to a [`ChunkSink`] as it comes (the chat shows it as a draft), and the
//! pieces merged are the same response `generateContent` gives, so the turn goes on unchanged.
//!
//! Invariant: an error answer (not 200) is read and classified exactly like `generateContent`'s;
//! a stream the network cuts, a piece that does not parse, or a stream over
//! `core::gemini::stream::MAX_STREAM_BYTES` is a network error (the turn retries), never a half answer.
//! An error answer's body is read up to `fetch::MAX_BODY_BYTES`.
//!
//! A [`Stop`] thrown while the call runs ends it at once, whoever threw it (the turn's one stop
//! switch, thrown by the chat object: `chat/stop.rs`): the request is aborted and the body no
//! longer read, woken by the switch itself (no timer looks for it). What the call gives then is
//! the switch's [`StopReason`]'s: the person's Stop (Telegram's Stop button) keeps the answer so
//! far, marked stopped (`STOPPED_BY_USER`); an abandoned early start drops it, the call failing
//! as `ModelError::Abandoned`. Either way it is charged what it cost so far
//! (`core::turn::abandoned_usage`).

use super::gemini::{GeminiClient, TIMEOUT};
use super::net;
use agent_core::gemini::{parse_error, GenerateContentRequest, GenerateContentResponse, ModelError};
use agent_core::gemini::stream::{merge, parse_chunk, SseDecoder};
use futures::future::{select, Either};
pub use agent_core::turn::stop::{Stop, StopReason};
use std::cell::RefCell;
use worker::{AbortController, Method, RequestRedirect};

/// What a model call the switch ended gives, `so_far` the pieces that came: the person's
/// Stop, the answer so far marked stopped; an abandoned start, `ModelError::Abandoned`.
/// Both charged what the call cost (the request sent, the text written).
pub fn ended(stop: Option<&Stop>, request: &GenerateContentRequest, so_far: Vec<GenerateContentResponse>) -> Result<GenerateContentResponse, ModelError> {
    match stop.and_then(Stop::reason) {
        Some(StopReason::Person) => Ok(stopped_answer(request, so_far)),
        _ => Err(ModelError::Abandoned { usage: agent_core::turn::abandoned_usage(request, &so_far) }),
    }
}

/// Receives the pieces of a streamed answer so far, after each new one.
#[allow(async_fn_in_trait)]
pub trait ChunkSink {
    async fn chunk(&self, so_far: &[GenerateContentResponse]);
}

impl GeminiClient {
    /// Streams one answer, telling `sink` of every piece; returns the merged response. `stop`
    /// thrown meanwhile: the call ends at once, as [`ended`] says (module doc).
    pub async fn stream_generate(&self, model: &str, request: &GenerateContentRequest, sink: &impl ChunkSink, stop: Option<&Stop>) -> Result<GenerateContentResponse, ModelError> {
        let body = serde_json::to_string(request).map_err(|e| ModelError::InvalidResponse(e.to_string()))?;
        let model = model.trim_start_matches("models/");
        let url = format!("{}/v1beta/models/{}:streamGenerateContent?alt=sse", self.base, model);
        let headers = [("content-type", "application/json"), ("x-goog-api-key", self.key.expose())];
        let fetch = net::prepare(&self.meter, Method::Post, &url, &headers, Some(body), RequestRedirect::Follow).map_err(ModelError::Network)?;
        let controller = AbortController::default();
        let signal = controller.signal();
        // The pieces so far, outside the call: a Stop ends the call and keeps them.
        let seen = RefCell::new(Vec::new());
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
                // The next piece, unless the turn is stopped first: then the body is cancelled
                // and what came so far is what the stop makes of it.
                let next = {
                    let piece = body.next();
                    futures::pin_mut!(piece);
                    match select(piece, std::pin::pin!(Stop::thrown_if(stop))).await {
                        Either::Left((piece, _)) => Some(piece?),
                        Either::Right(_) => None,
                    }
                };
                let Some(next) = next else {
                    body.cancel();
                    return Ok(Ok((seen.take(), true)));
                };
                let Some(bytes) = next else { break };
                let events = decoder.push(&bytes);
                if decoder.too_long() {
                    return Err(format!("the streamed answer is over {} bytes", agent_core::gemini::stream::MAX_STREAM_BYTES));
                }
                if take(&mut seen.borrow_mut(), events)? {
                    let so_far = seen.borrow().clone();
                    sink.chunk(&so_far).await;
                }
            }
            take(&mut seen.borrow_mut(), decoder.finish())?;
            Ok::<_, String>(Ok((seen.take(), false)))
        };
        // Stopped (the switch thrown, whoever threw it): the request is aborted (nothing more
        // is read or generated for us) and what came so far is what the stop makes of it.
        let call = async {
            futures::pin_mut!(call);
            match select(call, std::pin::pin!(Stop::thrown_if(stop))).await {
                Either::Left((result, _)) => result,
                Either::Right(_) => Ok(Ok((seen.take(), true))),
            }
        };
        // An answer streamed to its end needs no abort; an error's body may be cut, a stopped
        // call's rest is not read.
        let outcome = net::within(call, controller, TIMEOUT, |r| matches!(r, Ok((_, false)))).await;
        match outcome {
            Err(e) => Err(ModelError::Network(e)),
            Ok(Err(e)) => Err(e),
            Ok(Ok((chunks, true))) => ended(stop, request, chunks),
            Ok(Ok((chunks, _))) if chunks.is_empty() => Err(ModelError::InvalidResponse("the stream had no answer".into())),
            Ok(Ok((chunks, _))) => Ok(merge(chunks)),
        }
    }
}

/// The answer so far of a stream the person stopped: finish reason `STOPPED_BY_USER`
/// (`core::telegram::drafts::STOPPED_REASON`).
/// Gemini states the usage in the last piece only: a stopped stream's is estimated (the
/// request's size, the text written so far), so the turn is charged what it used, not nothing.
fn stopped_answer(request: &GenerateContentRequest, chunks: Vec<GenerateContentResponse>) -> GenerateContentResponse {
    let usage = agent_core::turn::abandoned_usage(request, &chunks);
    let mut answer = merge(chunks);
    if answer.candidates.is_empty() {
        answer.candidates.push(agent_core::gemini::Candidate::default());
    }
    answer.candidates[0].finish_reason = Some(agent_core::telegram::drafts::STOPPED_REASON.into());
    answer.usage_metadata = Some(usage);
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
