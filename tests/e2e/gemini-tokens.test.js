// The benchmarks' token counts (bench/cache.mjs, bench/tokens.mjs): Gemini's own tokenizer and
// the implicit cache's rule over its tokens, as the fake Gemini applies them when a benchmark
// asks for Gemini's tokens.
import { test } from "node:test";
import assert from "node:assert/strict";
import { geminiTokenizer } from "../support/gemini-tokens.js";
import { implicitCache, geminiMeasure, charMeasure } from "../support/fake-gemini-cache.js";

const MODEL = "gemini-3.8-flash";

/** A request whose system instruction is `system` and whose one user turn is `text`. */
const request = (system, text) => ({
  systemInstruction: { parts: [{ text: system }] },
  tools: [{ functionDeclarations: [{ name: "react", parameters: { type: "OBJECT", properties: { message_id: { type: "INTEGER" } } } }] }],
  contents: [{ role: "user", parts: [{ text }] }],
});

test("Gemini's tokenizer splits numbers into digits and counts words as words", async () => {
  const t = await geminiTokenizer();
  assert.equal(t.count("9001"), 4, "a token a digit");
  assert.equal(t.count("#9001 Carol#103:"), 11);
  // Four characters a token would make this 10; the vocabulary has these words whole.
  assert.ok(t.count("anyone tried the new ramen place") <= 7, `${t.count("anyone tried the new ramen place")}`);
  const body = request("Be brief.", "hello");
  const ids = t.request(body);
  assert.deepEqual(ids.slice(0, t.count("Be brief.")), t.encode("Be brief."), "the system instruction comes first");
  assert.ok(ids.length > t.count("Be brief.") + t.count("hello"), "tools and turn markers count too");
});

test("the implicit cache over Gemini's tokens: the shared token prefix, from the minimum on, per model", async () => {
  const t = await geminiTokenizer();
  const measure = geminiMeasure(t);
  const cache = implicitCache({ measure });
  const long = Array.from({ length: 800 }, (_, i) => `#${9000 + i} Carol: line ${i} of the history`).join("\n");
  const first = request("Be brief.", long);
  const r1 = cache.cached(first, MODEL);
  assert.equal(r1.cached, 0, "nothing before it");
  assert.equal(r1.prompt, t.request(first).length);
  assert.ok(r1.prompt > 4096, `${r1.prompt}`);

  const next = request("Be brief.", `${long}\n#9800 Bob: and one more`);
  const r2 = cache.cached(next, MODEL);
  const a = t.request(first);
  const b = t.request(next);
  let shared = 0;
  while (a[shared] === b[shared]) shared++;
  assert.equal(r2.cached, shared, "the longest shared prefix, in tokens");
  assert.ok(r2.cached > 4096 && r2.cached < r2.prompt);

  assert.equal(cache.cached(next, "gemini-other").cached, 0, "another model's requests are not shared");
  const short = implicitCache({ measure });
  short.cached(request("Be brief.", "hi there"), MODEL);
  assert.equal(short.cached(request("Be brief.", "hi there, again"), MODEL).cached, 0, "under the minimum, nothing is cached");

  // The estimate counts characters: the same pair of requests, a different count.
  const chars = implicitCache({ measure: charMeasure });
  chars.cached(first, MODEL);
  assert.notEqual(chars.cached(next, MODEL).cached, r2.cached);
});
