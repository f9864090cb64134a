// The answers of the services the worker calls (src/outbound/net.rs) are capped at 4 MiB of
// what is read, which for a compressed answer is what it inflates to: such an answer over
// the cap is a broken call, retried, never parsed. (Its stated length is not what lets it be
// read in one piece; these tests see the outcome, not how much was read before the cut.)
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, uniqueId, sleep } from "../support/stack.js";

let s;
before(async () => {
  // Unstreamed answers (generateContent), retried soon.
  s = await startStack({ vars: { STREAM_DRAFTS: "off", RETRY_BASE_MS: "300", MAX_TURN_ATTEMPTS: "3" } });
});
after(async () => {
  await s?.close();
});

test("a compressed answer that inflates past the 4 MiB cap is a broken call, retried; the next answer is the reply", async () => {
  const uid = uniqueId();
  // 5 MiB of spaces after the answer: about 5 KB on the wire, over the cap once inflated.
  s.gemini.script(uid, [{ text: "from the oversized answer", gzipPad: 5 * 1024 * 1024 }, { text: "the real answer" }]);
  await s.webhook(privateText(uid, "hello"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 30_000, "the reply");
  await sleep(500);
  assert.deepEqual(s.tg.sent(uid), ["the real answer"]);
  assert.equal(s.gemini.calls(uid).length, 2);
});

test("a compressed answer within the cap is read and answered", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "compressed but small", gzipPad: 1000 }]);
  await s.webhook(privateText(uid, "hello"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 30_000, "the reply");
  assert.deepEqual(s.tg.sent(uid), ["compressed but small"]);
});
