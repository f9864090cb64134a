//! Outbound HTTP: one function for every call the worker makes (Telegram, Gemini, fetch_url),
//! with a timeout and the subrequest count.
//!
//! Invariants (INVARIANTS.md): "Secrets never print" (errors never contain the URL),
//! "Fetch policy" (redirects and the body cap, for [`get_capped`]), "Bounded invocations"
//! ([`prepare`] is every fetch's way out: past `config::SUBREQUEST_CEILING` the call fails as
//! a network error).
//!
//! Also:
//! - [`get_bytes`] (Telegram file downloads) reads at most the bytes asked for.
//! - [`get_capped`] (fetch_url) never follows a redirect (the core checks every hop) and reads
//!   a body only when `fetch::should_read_body` allows it from the status and content type;
//!   past `fetch::MAX_BODY_BYTES` the rest is not read, the request aborted.
//! - An answer of Telegram or Gemini that states an uncompressed length within its cap is read
//!   whole by the runtime; every other body is read chunk by chunk, up to its cap.

use crate::config::Meter;
use agent_core::fetch::{should_read_body, FetchResponse, MAX_BODY_BYTES};
use futures::future::{select, Either};
use std::time::Duration;
use worker::js_sys::{Reflect, Uint8Array};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{web_sys, AbortController, Delay, Headers, Method, RequestRedirect};

pub struct HttpResponse {
    pub status: u16,
    pub body: String,
    pub headers: Headers,
}

/// A request ready to go: its headers set, the subrequest counted.
///
/// Built and sent with the runtime's own `fetch(url, init)`, not through `worker::Request` and
/// `worker::Fetch`: those make a `Request` object, read its URL, method and headers back into
/// Rust, and `fetch` then copies the request once more to add the abort signal; the answer's
/// `worker::Response` reads its headers, status, `cf` and WebSocket up front. A turn makes
/// several calls, and that bookkeeping was about a tenth of a short turn's own CPU.
pub(super) struct Prepared {
    url: String,
    init: web_sys::RequestInit,
}

pub(super) fn prepare(
    meter: &Meter,
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<String>,
    redirect: RequestRedirect,
) -> Result<Prepared, String> {
    // Asked before every outbound call: past the ceiling the call waits for another
    // invocation (its caller retries it as it would a broken connection).
    if meter.count() >= crate::config::SUBREQUEST_CEILING {
        return Err(format!("this invocation's subrequests are spent ({}); continuing in the next invocation", meter.count()));
    }
    meter.add(1);
    let init = web_sys::RequestInit::new();
    init.set_method(method.as_ref());
    if !headers.is_empty() {
        let h = web_sys::Headers::new().map_err(|_| "invalid header".to_string())?;
        for (k, v) in headers {
            h.set(k, v).map_err(|_| "invalid header".to_string())?;
        }
        init.set_headers(&h);
    }
    init.set_redirect(redirect.into());
    if let Some(b) = body {
        // As bytes: a string would be decoded from UTF-8 into a JavaScript string only for
        // the request to encode it again (a turn's request is tens of kilobytes).
        init.set_body(&Uint8Array::from(b.as_bytes()));
    }
    Ok(Prepared { url: url.to_string(), init })
}

impl Prepared {
    /// Sends the request; the answer once its head has come.
    pub(super) async fn send(self, signal: &web_sys::AbortSignal) -> Result<web_sys::Response, String> {
        self.init.set_signal(Some(signal));
        let scope: web_sys::WorkerGlobalScope = worker::js_sys::global().unchecked_into();
        let answer = JsFuture::from(scope.fetch_with_str_and_init(&self.url, &self.init)).await.map_err(js_error)?;
        answer.dyn_into().map_err(|_| "the answer is not a Response".to_string())
    }
}

/// Runs `call` until it ends or `timeout` passes; then the request is aborted (whatever was
/// not read is never transferred) unless `read_whole` says the answer was read to its end
/// (aborting a finished request only costs CPU). Errors are redacted.
pub(super) async fn within<T>(
    call: impl std::future::Future<Output = Result<T, String>>,
    controller: AbortController,
    timeout: Duration,
    read_whole: impl FnOnce(&T) -> bool,
) -> Result<T, String> {
    let timer = Delay::from(timeout);
    futures::pin_mut!(call);
    let result = match select(call, timer).await {
        Either::Left((result, _)) => result.map_err(|e| format!("request failed: {}", redact(&e))),
        Either::Right(_) => Err(format!("timed out after {} s", timeout.as_secs())),
    };
    if !result.as_ref().is_ok_and(read_whole) {
        controller.abort();
    }
    result
}

/// The most of a Gemini or Telegram API answer that is read (the size a streamed answer may
/// reach, `core::gemini::stream::MAX_STREAM_BYTES`): past it the call fails like a broken connection
/// and is retried as one, rather than a model's runaway answer being held and parsed whole.
pub const MAX_RESPONSE_BYTES: usize = agent_core::gemini::stream::MAX_STREAM_BYTES;

/// Sends a request and reads the body as text, at most [`MAX_RESPONSE_BYTES`]. `Err` is a
/// network failure, a timeout or a body over the cap.
pub async fn send(
    meter: &Meter,
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<String>,
    timeout: Duration,
) -> Result<HttpResponse, String> {
    let fetch = prepare(meter, method, url, headers, body, RequestRedirect::Follow)?;
    let controller = AbortController::default();
    let signal = controller.signal();
    let call = async {
        let resp = fetch.send(&signal).await?;
        let status = resp.status();
        let (bytes, over) = read_capped(&resp, MAX_RESPONSE_BYTES, true).await?;
        if over {
            return Err(format!("the answer is over {MAX_RESPONSE_BYTES} bytes"));
        }
        let body = String::from_utf8_lossy(&bytes).into_owned();
        Ok::<_, String>(HttpResponse { status, body, headers: Headers(resp.headers()) })
    };
    // `Ok` only when the body was read to its end.
    within(call, controller, timeout, |_| true).await
}

/// Reads at most `max` bytes of a body; the rest is not read. Whether it was cut. `known`:
/// the answer comes from a service the bot talks to by design (Telegram, Gemini), whose stated
/// length is believed; a page fetch_url reads never gets that (a body may be framed otherwise
/// than its stated length says).
pub(super) async fn read_capped(resp: &web_sys::Response, max: usize, known: bool) -> Result<(Vec<u8>, bool), String> {
    // A known service's body whose length the answer states, within the cap and not
    // compressed (the runtime decompresses, so a compressed body's stated length says nothing
    // of what is read), is read in one piece by the runtime: reading it chunk by chunk costs
    // a promise, a copy and a wake-up per chunk, and most answers (Telegram's, Gemini's
    // unstreamed) are of this kind.
    if known && stated_length(&resp.headers()).is_some_and(|n| n <= max) {
        let buffer = JsFuture::from(resp.array_buffer().map_err(js_error)?).await.map_err(js_error)?;
        return Ok(cut(Uint8Array::new(&buffer).to_vec(), max));
    }
    let Some(stream) = resp.body() else { return Ok((Vec::new(), false)) };
    let mut bytes: Vec<u8> = Vec::new();
    let mut chunks = Chunks::of(&stream);
    while let Some(chunk) = chunks.next().await? {
        let room = max.saturating_sub(bytes.len());
        if chunk.len() > room {
            bytes.extend_from_slice(&chunk[..room]);
            return Ok((bytes, true));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok((bytes, false))
}

/// An incoming request's body when it is at most `max` bytes, else `None`: a body whose
/// stated length is over is not read at all, one without a stated length only up to `max`.
/// A stated length within `max` is read in one piece by the runtime (the webhook's case).
pub async fn request_body_within(req: &web_sys::Request, max: usize) -> Result<Option<Vec<u8>>, String> {
    let stated = stated_length(&req.headers());
    if stated.is_some_and(|n| n > max) {
        return Ok(None);
    }
    let bytes = if stated.is_some() {
        let buffer = JsFuture::from(req.array_buffer().map_err(js_error)?).await.map_err(js_error)?;
        Uint8Array::new(&buffer).to_vec()
    } else {
        let Some(stream) = req.body() else { return Ok(Some(Vec::new())) };
        let mut bytes: Vec<u8> = Vec::new();
        let mut chunks = Chunks::of(&stream);
        while let Some(chunk) = chunks.next().await? {
            if bytes.len() + chunk.len() > max {
                return Ok(None);
            }
            bytes.extend_from_slice(&chunk);
        }
        bytes
    };
    Ok((bytes.len() <= max).then_some(bytes))
}

/// A body read whole, cut to `max` bytes; whether it was cut.
fn cut(mut bytes: Vec<u8>, max: usize) -> (Vec<u8>, bool) {
    let truncated = bytes.len() > max;
    bytes.truncate(max);
    (bytes, truncated)
}

/// A body read chunk by chunk with the stream's own reader, whose lock is never released: a
/// body read to its end needs no release, one left part-read goes with its aborted request,
/// and a release costs an exception object (the reader's `closed` promise is rejected with a
/// TypeError, stack trace and all).
pub(super) struct Chunks(web_sys::ReadableStreamDefaultReader);

impl Chunks {
    pub(super) fn of(stream: &web_sys::ReadableStream) -> Chunks {
        Chunks(stream.get_reader().unchecked_into())
    }

    /// Stops reading: the rest of the body is not transferred (a stopped answer's stream; an
    /// abort alone may leave the runtime reading it to its end).
    pub(super) fn cancel(&self) {
        let _ = self.0.cancel();
    }

    /// The next chunk, or `None` at the end.
    pub(super) async fn next(&mut self) -> Result<Option<Vec<u8>>, String> {
        let result = JsFuture::from(self.0.read()).await.map_err(js_error)?;
        if Reflect::get(&result, &"done".into()).ok().and_then(|d| d.as_bool()).unwrap_or(false) {
            return Ok(None);
        }
        let value = Reflect::get(&result, &"value".into()).map_err(js_error)?;
        let chunk = value.dyn_into::<Uint8Array>().map_err(|_| "a body chunk is not bytes".to_string())?;
        Ok(Some(chunk.to_vec()))
    }
}

/// A JavaScript error as text (redacted where it is shown, by the callers' `within`).
fn js_error(e: JsValue) -> String {
    worker::Error::from(e).to_string()
}

/// The body length an answer states, when its body is not compressed.
fn stated_length(headers: &web_sys::Headers) -> Option<usize> {
    let encoding = headers.get("content-encoding").ok().flatten();
    if encoding.is_some_and(|e| !e.trim().eq_ignore_ascii_case("identity")) {
        return None;
    }
    headers.get("content-length").ok().flatten()?.trim().parse().ok()
}

/// One GET for fetch_url (see the module invariants). `Err` is a network failure or timeout.
pub async fn get_capped(meter: &Meter, url: &str, headers: &[(&str, &str)], timeout: Duration) -> Result<FetchResponse, String> {
    let fetch = prepare(meter, Method::Get, url, headers, None, RequestRedirect::Manual)?;
    let controller = AbortController::default();
    let signal = controller.signal();
    let call = async {
        let resp = fetch.send(&signal).await?;
        let status = resp.status();
        let headers = resp.headers();
        let header = |name: &str| headers.get(name).ok().flatten();
        let mut out = FetchResponse {
            status,
            location: header("location"),
            content_type: header("content-type").unwrap_or_default(),
            body: None,
            truncated: false,
        };
        if should_read_body(status, &out.content_type) {
            let (bytes, truncated) = read_capped(&resp, MAX_BODY_BYTES, false).await?;
            out.body = Some(String::from_utf8_lossy(&bytes).into_owned());
            out.truncated = truncated;
        }
        Ok::<_, String>(out)
    };
    within(call, controller, timeout, |out| out.body.is_some() && !out.truncated).await
}

/// A GET whose body is bytes, of which at most `max` are read (the rest is never
/// transferred). The status, the bytes, and whether they were cut. `Err` is a network failure
/// or timeout.
pub async fn get_bytes(meter: &Meter, url: &str, max: usize, timeout: Duration) -> Result<(u16, Vec<u8>, bool), String> {
    let fetch = prepare(meter, Method::Get, url, &[], None, RequestRedirect::Follow)?;
    let controller = AbortController::default();
    let signal = controller.signal();
    let call = async {
        let resp = fetch.send(&signal).await?;
        let status = resp.status();
        if status != 200 {
            return Ok((status, Vec::new(), false));
        }
        let (bytes, truncated) = read_capped(&resp, max, true).await?;
        Ok::<_, String>((status, bytes, truncated))
    };
    within(call, controller, timeout, |(status, _, truncated)| *status == 200 && !truncated).await
}

pub async fn post_json(
    meter: &Meter,
    url: &str,
    headers: &[(&str, &str)],
    body: String,
    timeout: Duration,
) -> Result<HttpResponse, String> {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    send(meter, Method::Post, url, &all, Some(body), timeout).await
}

/// Drops anything that looks like a URL from an error text.
fn redact(text: &str) -> String {
    text.split_whitespace()
        .map(|w| if w.contains("://") || w.contains("/bot") { "<url>" } else { w })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A POST of `body` bytes (an upload: `multipart/form-data` with its boundary in
/// `content_type`, or JSON) whose answer is read as text up to `max` bytes. `Err` is a network
/// failure, a timeout or an answer over the cap (never read past it).
pub async fn post_bytes(
    meter: &Meter,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    max: usize,
    timeout: Duration,
) -> Result<HttpResponse, String> {
    let fetch = prepare(meter, Method::Post, url, headers, None, RequestRedirect::Follow)?;
    fetch.init.set_body(&Uint8Array::from(body));
    let controller = AbortController::default();
    let signal = controller.signal();
    let call = async {
        let resp = fetch.send(&signal).await?;
        let status = resp.status();
        let (bytes, over) = read_capped(&resp, max, true).await?;
        if over {
            return Err(format!("the answer is over {max} bytes"));
        }
        let body = String::from_utf8_lossy(&bytes).into_owned();
        Ok::<_, String>(HttpResponse { status, body, headers: Headers(resp.headers()) })
    };
    within(call, controller, timeout, |_| true).await
}
