// What a turn costs (issue 17): requests laid out so that consecutive turns of a chat repeat
// their prefix (system instruction, tools, history) and only the turn context at the end is
// new; the history's start stays put across turns once it is cut; the fake Gemini reports the
// repeated prefix as cached tokens the way Gemini does, and /usage and the costs API show the
// cached share.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, uniqueId, ADMIN_TOKEN } from "../support/stack.js";
import { TURN_CONTEXT_HEADER, turnContext } from "../support/prompt.js";
import { linearize } from "../support/fake-gemini-cache.js";

let s;
before(async () => {
  s = await startStack({ vars: { DEBOUNCE_MS: "100", HISTORY_TOKEN_BUDGET: "6000", CONSOLIDATE_MIN_MESSAGES: "4" } });
});
after(async () => {
  await s?.close();
});

/** A request's body without its turn context (the part that changes every turn). */
function withoutTurnContext(body) {
  const contents = structuredClone(body.contents);
  const last = contents.filter((c) => c.role === "user").at(-1);
  assert.ok(last.parts.at(-1).text.startsWith(TURN_CONTEXT_HEADER), "the turn context is the last part");
  last.parts.pop();
  return { ...body, contents: contents.filter((c) => c.parts.length > 0) };
}

/** Sends a message and waits for its answer. */
async function say(uid, text, n) {
  await s.webhook(privateText(uid, text, { name: "Kim" }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === n, 15_000, `answer ${n}`);
}

test("consecutive turns repeat the previous request up to its turn context", async () => {
  const uid = uniqueId();
  for (let i = 1; i <= 3; i++) await say(uid, `question number ${i}: what about the weather on day ${i}?`, i);
  const bodies = s.gemini.calls(uid).map((r) => r.body);
  assert.equal(bodies.length, 3);
  for (let i = 1; i < bodies.length; i++) {
    const [prev, next] = [bodies[i - 1], bodies[i]];
    assert.deepEqual(next.systemInstruction, prev.systemInstruction, "the system instruction does not change");
    assert.deepEqual(next.tools, prev.tools);
    // Everything before the previous turn context is the start of the next request.
    const head = linearize(withoutTurnContext(prev)).replace(/\]\}\]$/, "");
    assert.ok(linearize(next).startsWith(head), `turn ${i + 1} repeats turn ${i}'s prefix`);
    assert.notEqual(turnContext(next), turnContext(prev), "the turn context is the turn's own");
  }
  // What changes per turn is in the turn context, not in the system instruction.
  const system = bodies[0].systemInstruction.parts[0].text;
  assert.doesNotMatch(system, /Current time: |Answer message #/);
  assert.match(turnContext(bodies[2]), /## Situation\nAnswer message #\d+[\s\S]*## Now\nCurrent time: /);
});

test("a cut history keeps its start for many turns, and the summary covers what it cut", async () => {
  const uid = uniqueId();
  const words = (i) => `message ${i}: ` + "lorem ipsum dolor sit amet ".repeat(30);
  const turns = 18;
  for (let i = 1; i <= turns; i++) await say(uid, words(i), i);
  const firsts = s.gemini.calls(uid).map((r) => r.body.contents[0].parts[0].text);
  const moves = firsts.filter((f, i) => i > 0 && f !== firsts[i - 1]).length;
  assert.ok(moves >= 1, "the budget did cut the history");
  assert.ok(moves <= 3, `the history's start moved ${moves} times in ${turns} turns`);
  const [conv] = await s.sql("SELECT history_cut_seq FROM conversations WHERE conv = ?", String(uid));
  assert.ok(conv.history_cut_seq > 0, "the cut is stored for the next turn");
  // Consolidation summarises exactly what the turns no longer show.
  await s.scheduled();
  let summary;
  for (let i = 0; i < 120 && !summary; i++) {
    await new Promise((r) => setTimeout(r, 250));
    [summary] = await s.sql("SELECT until_seq FROM summaries WHERE conv = ?", String(uid));
  }
  assert.ok(summary, "a summary was written");
  const [before] = await s.sql("SELECT MAX(seq) AS seq FROM messages WHERE conv = ? AND seq < ?", String(uid), conv.history_cut_seq);
  assert.equal(summary.until_seq, before.seq, "the summary ends right before the first message shown");
  await say(uid, "and now?", turns + 1);
  const [after] = await s.sql("SELECT history_cut_seq FROM conversations WHERE conv = ?", String(uid));
  const tc = turnContext(s.gemini.calls(uid).at(-1));
  assert.match(tc, /\nsummary: "/);
  // The summary covers the cut unless this very turn had to cut anew.
  const same = after.history_cut_seq === conv.history_cut_seq;
  assert.equal(/not shown \(over the history budget\)/.test(tc), !same, tc);
});

test("repeated prefixes are reported as cached, priced at the cached rate and shown as a share", async () => {
  const uid = uniqueId();
  // Long enough messages that the shared prefix passes Gemini's minimum cacheable size.
  const long = (i) => `part ${i} of my notes: ` + "the quick brown fox jumps over the lazy dog; ".repeat(80);
  for (let i = 1; i <= 3; i++) await say(uid, long(i), i);
  const calls = await s.sql("SELECT prompt_tokens, cached_tokens FROM calls WHERE chat_id = ? ORDER BY created_at, n", uid);
  assert.equal(calls.length, 3);
  assert.ok(calls.at(-1).cached_tokens > 0, `the last turn had cached input: ${JSON.stringify(calls)}`);
  assert.ok(calls.at(-1).cached_tokens < calls.at(-1).prompt_tokens);
  const r = await s.fetch(`/api/v1/costs?period=today&chat_id=${uid}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  const body = await r.json();
  const cached = calls.reduce((a, c) => a + c.cached_tokens, 0);
  const prompt = calls.reduce((a, c) => a + c.prompt_tokens, 0);
  const mine = body.rows.find((row) => row.chat_id === uid);
  assert.ok(Math.abs(mine.cached_share - cached / prompt) < 1e-9, JSON.stringify(mine));
  const all = body.rows.reduce((a, row) => [a[0] + row.cached_tokens, a[1] + row.prompt_tokens], [0, 0]);
  assert.ok(Math.abs(body.cached_share - all[0] / all[1]) < 1e-9, "the total share is over all rows");
  await s.webhook(privateText(uid, "/usage", { entities: [{ type: "bot_command", offset: 0, length: 6 }] }));
  await s.tg.waitFor(() => s.tg.sent(uid).some((t) => /% of input/.test(t)), 10_000, "the /usage answer");
  const usage = s.tg.sent(uid).find((t) => /% of input/.test(t));
  const pct = Math.round((100 * cached) / prompt);
  assert.ok(usage.includes(`${cached} cached: ${pct}% of input`), usage);
});

// Google's published prices (https://ai.google.dev/gemini-api/docs/pricing, read 2026-11-26),
// USD per million tokens, for the default model, gemini-3.8-flash: a promotional price through
// 2026-12-31, then the list price; cache reads at a tenth of the input price.
const FLASH_38 = (now) =>
  now < Date.UTC(2027, 0, 1) ? { input: 0.75, cached: 0.075, output: 3.75 } : { input: 1.5, cached: 0.15, output: 7.5 };

test("/usage and the costs API price a recorded turn as a hand calculation from Google's published prices", async () => {
  const uid = uniqueId();
  // One turn whose usage is large enough to show in cents: 400,000 input tokens of which
  // 300,000 served from the cache, 20,000 output and 10,000 thinking tokens.
  const usageMetadata = { promptTokenCount: 400_000, cachedContentTokenCount: 300_000, candidatesTokenCount: 20_000, thoughtsTokenCount: 10_000, totalTokenCount: 430_000 };
  s.gemini.script(uid, [{ raw: { candidates: [{ content: { role: "model", parts: [{ text: "Priced." }] }, finishReason: "STOP", index: 0 }], usageMetadata, modelVersion: "gemini-3.8-flash" } }]);
  await say(uid, "what does this cost?", 1);
  const [call] = await s.sql("SELECT model, prompt_tokens, cached_tokens, candidates_tokens, thoughts_tokens, created_at FROM calls WHERE chat_id = ?", uid);
  assert.equal(call.model, "gemini-3.8-flash");
  // By hand: fresh input at the input price, cached input at the cached price, output and
  // thinking at the output price.
  const p = FLASH_38(call.created_at);
  const fresh = call.prompt_tokens - call.cached_tokens;
  const expected = (fresh * p.input + call.cached_tokens * p.cached + (call.candidates_tokens + call.thoughts_tokens) * p.output) / 1e6;
  if (call.created_at < Date.UTC(2027, 0, 1)) assert.ok(Math.abs(expected - 0.21) < 1e-12, `the promotional price: ${expected}`);

  const r = await s.fetch(`/api/v1/costs?period=today&chat_id=${uid}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  const mine = (await r.json()).rows.find((row) => row.chat_id === uid);
  assert.ok(Math.abs(mine.cost_usd - expected) < 1e-9, `costs API ${mine.cost_usd}, by hand ${expected}`);

  await s.webhook(privateText(uid, "/usage", { entities: [{ type: "bot_command", offset: 0, length: 6 }] }));
  await s.tg.waitFor(() => s.tg.sent(uid).some((t) => /Estimated cost/.test(t)), 10_000, "the /usage answer");
  const usage = s.tg.sent(uid).find((t) => /Estimated cost/.test(t));
  assert.ok(usage.includes(`Estimated cost: $${expected.toFixed(4)}`), `${usage}\nby hand: $${expected.toFixed(4)}`);
});

test("with PRICES set (a table without dates) the costs API and /usage answer and price at it", async () => {
  const b = await startStack({ vars: { DEBOUNCE_MS: "100", PRICES: "gemini-3.8-flash=2/10/0.2" } });
  try {
    const uid = uniqueId();
    const usageMetadata = { promptTokenCount: 100_000, cachedContentTokenCount: 50_000, candidatesTokenCount: 10_000, totalTokenCount: 110_000 };
    b.gemini.script(uid, [{ raw: { candidates: [{ content: { role: "model", parts: [{ text: "Priced." }] }, finishReason: "STOP", index: 0 }], usageMetadata, modelVersion: "gemini-3.8-flash" } }]);
    await b.webhook(privateText(uid, "what does this cost?"));
    await b.tg.waitFor(() => b.tg.sent(uid).length === 1, 10_000, "the answer");
    const expected = (50_000 * 2 + 50_000 * 0.2 + 10_000 * 10) / 1e6;
    for (const period of ["all", "week", "today"]) {
      const r = await b.fetch(`/api/v1/costs?period=${period}&chat_id=${uid}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      assert.equal(r.status, 200, `costs?period=${period}`);
      const mine = (await r.json()).rows.find((row) => row.chat_id === uid);
      assert.ok(Math.abs(mine.cost_usd - expected) < 1e-9, `${period}: ${mine.cost_usd}, by hand ${expected}`);
    }
    await b.webhook(privateText(uid, "/usage", { entities: [{ type: "bot_command", offset: 0, length: 6 }] }));
    await b.tg.waitFor(() => b.tg.sent(uid).some((t) => /Estimated cost/.test(t)), 10_000, "the /usage answer");
    assert.ok(b.tg.sent(uid).find((t) => /Estimated cost/.test(t)).includes(`Estimated cost: $${expected.toFixed(4)}`));
  } finally {
    await b.close();
  }
});
