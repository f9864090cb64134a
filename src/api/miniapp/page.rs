//! The Mini App's page: its HTML, script and style and the chart library, bundled into the worker (no CDN, no
//! tracking, no inline script or style: the Content-Security-Policy below allows only this
//! origin's files). The page reads Telegram's launch parameters from the URL fragment (the
//! init data and the theme), which never reaches a server.

use worker::{Response, Result};

/// Only this origin's script, style and API; no inline code, no frames but Telegram's web
/// client, no forms posting elsewhere.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
     base-uri 'none'; form-action 'none'; frame-ancestors https://web.telegram.org";

const INDEX: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/app.js");
const STYLE: &str = include_str!("page/app.css");
/// uPlot 1.6.32 (MIT, `page/UPLOT-LICENSE`), the npm package's `dist/uPlot.iife.min.js` and
/// `dist/uPlot.min.css` unchanged; loaded only when the operators' view opens.
const CHART_SCRIPT: &str = include_str!("page/uplot.min.js");
const CHART_STYLE: &str = include_str!("page/uplot.min.css");

fn file(body: &str, content_type: &str) -> Result<Response> {
    let mut resp = Response::ok(body)?;
    let h = resp.headers_mut();
    h.set("content-type", content_type)?;
    h.set("cache-control", "public, max-age=300")?;
    Ok(resp)
}

/// The file at `path`, if it is one of the page's.
pub fn asset(path: &str) -> Option<Result<Response>> {
    Some(match path {
        "/app" | "/app/" => file(INDEX, "text/html; charset=utf-8"),
        "/app/app.js" => file(SCRIPT, "text/javascript; charset=utf-8"),
        "/app/app.css" => file(STYLE, "text/css; charset=utf-8"),
        "/app/uplot.min.js" => file(CHART_SCRIPT, "text/javascript; charset=utf-8"),
        "/app/uplot.min.css" => file(CHART_STYLE, "text/css; charset=utf-8"),
        _ => return None,
    })
}
