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
//! A [`Stop`] thrown while the call runs (an abandoned early start) ends it at once: the
//! request is aborted, and the call fails as `ModelError::Abandoned` with what it cost so far
//! (`core::turn::abandoned_usage`). The person's Stop (Telegram's Stop button, the sink's
//! `stopped`) ends it as at once, but the answer is what came so far, marked stopped
//! (`STOPPED_BY_USER`), charged the same way.

use super::gemini::{GeminiClient, TIMEOUT};
use super::net;
use agent_core::gemini::{parse_error, GenerateContentRequest, GenerateContentResponse, ModelError};
use agent_core::gemini::stream::{merge, parse_chunk, SseDecoder};
use futures::future::{select, Either};
use std::cell::{Cell, RefCell};
use std::task::{Poll, Waker};
use worker::{AbortController, Method, RequestRedirect};

/// A running turn's stop switch: once thrown, its model call ends at once (the chat object
/// throws it for an abandoned early start, `ChatObject::abandon_turn`).
#[derive(Default)]
pub struct Stop {
    thrown: Cell<bool>,
    waiting: RefCell<Vec<Waker>>,
}

impl Stop {
    /// Throws the switch: every wait on it ends.
    pub fn throw(&self) {
        self.thrown.set(true);
        for w in self.waiting.borrow_mut().drain(..) {
            w.wake();
        }
    }

    pub fn is_thrown(&self) -> bool {
        self.thrown.get()
    }

    /// Resolves once the switch is thrown.
    pub async fn thrown(&self) {
        futures::future::poll_fn(|cx| {
            if self.thrown.get() {
                return Poll::Ready(());
            }
            let mut waiting = self.waiting.borrow_mut();
            if !waiting.iter().any(|w| w.will_wake(cx.waker())) {
                waiting.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }

    /// Runs `work` unless the switch is thrown first (`None`), which drops it.
    pub async fn unless_thrown<T>(stop: Option<&Stop>, work: impl std::future::Future<Output = T>) -> Option<T> {
        let Some(stop) = stop else { return Some(work.await) };
        let thrown = stop.thrown();
        futures::pin_mut!(work, thrown);
        match select(work, thrown).await {
            Either::Left((out, _)) => Some(out),
            Either::Right(_) => None,
        }
    }
}

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
    /// Streams one answer, telling `sink` of every piece; returns the merged response. `stop`
    /// thrown: the call ends as `ModelError::Abandoned`; the sink stopped: the answer so far,
    /// marked stopped (module doc).
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
                // The next piece, unless the person stops the answer first: then the body is
                // cancelled and what came so far is the answer.
                let next = {
                    let piece = body.next();
                    futures::pin_mut!(piece);
                    match select(piece, std::pin::pin!(stop_of(sink))).await {
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
        // Stopped by the person: the request is aborted (nothing more is read or generated for
        // us) and the answer is what came so far, marked stopped.
        let call = async {
            futures::pin_mut!(call);
            match select(call, std::pin::pin!(stop_of(sink))).await {
                Either::Left((result, _)) => result,
                Either::Right(_) => Ok(Ok((seen.take(), true))),
            }
        };
        // Abandoned (an early start a newer message overtook, `stop` thrown): `None`.
        let call = async {
            match Stop::unless_thrown(stop, call).await {
                None => Ok(Ok(None)),
                Some(r) => r.map(|r| r.map(Some)),
            }
        };
        // An answer streamed to its end needs no abort; an error's body may be cut, a stopped
        // or abandoned call's rest is not read.
        let outcome = net::within(call, controller, TIMEOUT, |r| matches!(r, Ok(Some((_, false))))).await;
        match outcome {
            Err(e) => Err(ModelError::Network(e)),
            Ok(Err(e)) => Err(e),
            Ok(Ok(None)) => Err(ModelError::Abandoned { usage: agent_core::turn::abandoned_usage(request, &seen.into_inner()) }),
            Ok(Ok(Some((chunks, true)))) => Ok(stopped_answer(request, chunks)),
            Ok(Ok(Some((chunks, _)))) if chunks.is_empty() => Err(ModelError::InvalidResponse("the stream had no answer".into())),
            Ok(Ok(Some((chunks, _)))) => Ok(merge(chunks)),
        }
    }
}

/// The answer so far of a stopped stream: finish reason `STOPPED_BY_USER`
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
