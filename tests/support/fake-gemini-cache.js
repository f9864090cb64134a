// Gemini's implicit cache, as the fake Gemini reports it: a request that repeats the prefix of
// an earlier request (same model, within the last few minutes) has that prefix's tokens
// reported as `cachedContentTokenCount`, once the prefix reaches the model's minimum cacheable
// size (Gemini's caching docs: 2,048 tokens for Gemini 2.5 models, 4,096 for newer ones).
//
// The prefix is compared on the request in the order Gemini reads it: system instruction,
// tools, then the contents. How tokens are counted is the measure's: by default 4 characters
// of the request's JSON each (quick, what the tests use); the benchmarks count Gemini's own
// tokens (`geminiMeasure`, gemini-tokens.js).

export const CACHE_WINDOW_MS = 5 * 60_000;
export const minCacheTokens = (model) => (/^gemini-2\./.test(model ?? "") ? 2048 : 4096);

/** The request as one string, in reading order (what a shared prefix is measured on). */
export function linearize(body) {
  return JSON.stringify([body.systemInstruction ?? null, body.tools ?? null, body.toolConfig ?? null]) + JSON.stringify(body.contents ?? []);
}

/** Tokens as 4 characters of the request's JSON: `seq` is the request in reading order,
 *  `tokens(n)` the tokens of its first n elements, `total` the request's. */
export const charMeasure = {
  request(body) {
    return { seq: linearize(body), total: Math.ceil(JSON.stringify(body).length / 4) };
  },
  tokens: (n) => Math.floor(n / 4),
  text: (s) => Math.ceil((s ?? "").length / 4),
};

/** Gemini's own tokens (a tokenizer from gemini-tokens.js): the request's token ids. */
export function geminiMeasure(tokenizer) {
  return {
    request(body) {
      const seq = tokenizer.request(body);
      return { seq, total: seq.length };
    },
    tokens: (n) => n,
    text: (s) => tokenizer.count(s ?? ""),
  };
}

const commonPrefix = (a, b) => {
  const n = Math.min(a.length, b.length);
  let i = 0;
  if (typeof a === "string") {
    while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  } else {
    while (i < n && a[i] === b[i]) i++;
  }
  return i;
};

/** A cache over the requests seen: `cached(body, model)` answers the request's tokens and its
 *  cached tokens, and remembers it for the next ones. */
export function implicitCache({ now = () => Date.now(), measure = charMeasure } = {}) {
  let seen = [];
  return {
    measure,
    cached(body, model) {
      const { seq, total } = measure.request(body);
      const t = now();
      seen = seen.filter((r) => t - r.at <= CACHE_WINDOW_MS);
      let best = 0;
      for (const r of seen) if (r.model === model) best = Math.max(best, commonPrefix(r.seq, seq));
      seen.push({ at: t, model, seq });
      if (seen.length > 200) seen.shift();
      const tokens = measure.tokens(best);
      return { prompt: total, cached: tokens >= minCacheTokens(model) ? Math.min(tokens, total) : 0 };
    },
  };
}
