//! Outbound HTTP: one function for every call the worker makes (Telegram, Gemini, fetch_url),
//! with a timeout and the subrequest count.
//!
//! Invariant: errors never contain the URL (the Telegram URL carries the bot token).

use crate::env::Meter;
use futures::future::{select, Either};
use std::time::Duration;
use worker::{AbortController, Delay, Fetch, Headers, Method, Request, RequestInit};

pub struct HttpResponse {
    pub status: u16,
    pub body: String,
    pub headers: Headers,
}

/// Sends a request and reads the body as text. `Err` is a network failure or timeout.
pub async fn send(
    meter: &Meter,
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<String>,
    timeout: Duration,
) -> Result<HttpResponse, String> {
    meter.add(1);
    let h = Headers::new();
    for (k, v) in headers {
        h.set(k, v).map_err(|_| "invalid header".to_string())?;
    }
    let mut init = RequestInit::new();
    init.with_method(method).with_headers(h);
    if let Some(b) = body {
        init.with_body(Some(b.into()));
    }
    let request = Request::new_with_init(url, &init).map_err(|_| "invalid request".to_string())?;
    let controller = AbortController::default();
    let signal = controller.signal();
    let fetch = Fetch::Request(request);
    let call = async {
        let mut resp = fetch.send_with_signal(&signal).await.map_err(|e| e.to_string())?;
        let status = resp.status_code();
        let body = resp.text().await.map_err(|e| e.to_string())?;
        Ok::<_, String>(HttpResponse { status, body, headers: resp.headers().clone() })
    };
    let timer = Delay::from(timeout);
    futures::pin_mut!(call);
    match select(call, timer).await {
        Either::Left((result, _)) => result.map_err(|e| format!("request failed: {}", redact(&e))),
        Either::Right(_) => {
            controller.abort();
            Err(format!("timed out after {} s", timeout.as_secs()))
        }
    }
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
