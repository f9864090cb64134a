// The playground forwards what its page sends to the worker with the real webhook secret, so
// it must refuse what any other web page (or a rebound DNS name) sends it: a foreign Origin or
// Host gets 403, a non-JSON POST 415, and none of them reaches the webhook.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { startPlayground } from "../../tools/playground.js";
import { TOKEN, WEBHOOK_SECRET } from "../support/stack.js";

let playground;
let fakeWorker;
const delivered = [];

before(async () => {
  fakeWorker = http.createServer(async (req, res) => {
    let raw = "";
    for await (const c of req) raw += c;
    delivered.push({ secret: req.headers["x-telegram-bot-api-secret-token"], body: raw });
    res.writeHead(200, { "content-type": "application/json" });
    res.end('{"ok":true}');
  });
  await new Promise((r) => fakeWorker.listen(0, "127.0.0.1", r));
  playground = await startPlayground({ port: 0, token: TOKEN, secret: WEBHOOK_SECRET, workerUrl: `http://127.0.0.1:${fakeWorker.address().port}` });
});
after(async () => {
  await playground?.close();
  await new Promise((r) => fakeWorker?.close(r));
});

/** A raw request (so Host and Origin can be set as an attacker's browser would). */
function request(pathname, { method = "POST", headers = {}, body = "" } = {}) {
  const { port } = new URL(playground.base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, path: pathname, method, headers: { host: `127.0.0.1:${port}`, ...headers } }, (res) => {
      let text = "";
      res.on("data", (c) => (text += c));
      res.on("end", () => resolve({ status: res.statusCode, text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const sendBody = JSON.stringify({ chat: "dm", text: "forwarded?" });

test("cross-site and non-JSON posts are refused and never forwarded", async () => {
  const { port } = new URL(playground.base);
  const cases = [
    // A page on another site posting JSON (a fetch it would need CORS for) or a form.
    [{ origin: "https://evil.example", "content-type": "application/json" }, 403],
    [{ origin: "https://evil.example", "content-type": "text/plain" }, 403],
    [{ origin: `http://127.0.0.1:${port + 1}`, "content-type": "application/json" }, 403],
    // DNS rebinding: the attacker's name resolving to 127.0.0.1.
    [{ host: `evil.example:${port}`, "content-type": "application/json" }, 403],
    // Same origin but not JSON (what a cross-site simple form would look like).
    [{ "content-type": "text/plain" }, 415],
    [{ "content-type": "application/x-www-form-urlencoded" }, 415],
  ];
  for (const [headers, status] of cases) {
    const r = await request("/api/send", { headers, body: sendBody });
    assert.equal(r.status, status, JSON.stringify(headers));
  }
  assert.equal((await request("/", { method: "GET", headers: { host: `evil.example:${port}` } })).status, 403, "the page too");
  assert.equal(delivered.length, 0, "nothing reached the webhook");
});

test("the playground's own page still works", async () => {
  const { port } = new URL(playground.base);
  for (const origin of [`http://127.0.0.1:${port}`, undefined]) {
    const headers = { "content-type": "application/json; charset=utf-8" };
    if (origin) headers.origin = origin;
    const r = await request("/api/send", { headers, body: sendBody });
    assert.equal(r.status, 200, r.text);
  }
  assert.equal(delivered.length, 2);
  assert.equal(delivered[0].secret, WEBHOOK_SECRET);
  const r = await request("/api/send", { headers: { host: `localhost:${port}`, origin: `http://localhost:${port}`, "content-type": "application/json" }, body: sendBody });
  assert.equal(r.status, 200);
});
