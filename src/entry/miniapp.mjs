// The Mini App's page files (src/api/miniapp/page: its HTML, script, style and the chart
// library), served from the Worker's JavaScript before the wasm is called: as text modules of
// the bundle they stay out of the wasm, whose gzip size is budgeted (issue 40,
// docs/research/wasm-size.md). The page's API (`/app/api/…`) stays the wasm's
// (src/api/miniapp). No CDN, no tracking, no inline script or style: the Content-Security-
// Policy below allows only this origin's files. The page reads Telegram's launch parameters
// from the URL fragment (the init data and the theme), which never reaches a server.
import INDEX from "../api/miniapp/page/index.html" with { type: "text" };
import SCRIPT from "../api/miniapp/page/app.js" with { type: "text" };
import STYLE from "../api/miniapp/page/app.css" with { type: "text" };
// uPlot 1.6.32 (MIT, page/UPLOT-LICENSE), the npm package's dist/uPlot.iife.min.js and
// dist/uPlot.min.css unchanged; loaded only when the operators' view opens.
import CHART_SCRIPT from "../api/miniapp/page/uplot.min.js" with { type: "text" };
import CHART_STYLE from "../api/miniapp/page/uplot.min.css" with { type: "text" };

/** Only this origin's script, style and API; no inline code, no frames but Telegram's web
 *  client, no forms posting elsewhere. The wasm's answers under /app carry the same
 *  (src/api/miniapp/mod.rs `CSP`; tests/e2e/miniapp.test.js compares them). */
export const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors https://web.telegram.org";

const FILES = new Map([
  ["/app", [INDEX, "text/html; charset=utf-8"]],
  ["/app/", [INDEX, "text/html; charset=utf-8"]],
  ["/app/app.js", [SCRIPT, "text/javascript; charset=utf-8"]],
  ["/app/app.css", [STYLE, "text/css; charset=utf-8"]],
  ["/app/uplot.min.js", [CHART_SCRIPT, "text/javascript; charset=utf-8"]],
  ["/app/uplot.min.css", [CHART_STYLE, "text/css; charset=utf-8"]],
]);

/** The answer for a GET of one of the page's files, or undefined (the wasm answers the rest,
 *  including a HEAD or POST of these paths and every 404 under /app). */
export function miniAppFile(request) {
  if (request.method !== "GET") return undefined;
  const file = FILES.get(new URL(request.url).pathname);
  if (!file) return undefined;
  return new Response(file[0], {
    headers: {
      "content-type": file[1],
      "cache-control": "public, max-age=300",
      "content-security-policy": CSP,
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
    },
  });
}
