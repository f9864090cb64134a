// Gemini's implicit cache, as the fake Gemini reports it: a request that repeats the prefix of
// an earlier request (same model, within the last few minutes) has that prefix's tokens
// reported as `cachedContentTokenCount`, once the prefix reaches the model's minimum cacheable
// size (Gemini's caching docs: 2,048 tokens for Gemini 2.5 models, 4,096 for newer ones).
//
// The prefix is compared on the request in the order Gemini reads it: system instruction,
// tools, then the contents; tokens are estimated as 4 characters each, like the fake's
// promptTokenCount.

export const CACHE_WINDOW_MS = 5 * 60_000;
export const minCacheTokens = (model) => (/^gemini-2\./.test(model ?? "") ? 2048 : 4096);

/** The request as one string, in reading order (what a shared prefix is measured on). */
export function linearize(body) {
  return JSON.stringify([body.systemInstruction ?? null, body.tools ?? null, body.toolConfig ?? null]) + JSON.stringify(body.contents ?? []);
}

const commonPrefix = (a, b) => {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
};

/** A cache over the requests seen: `cached(body, model)` answers the cached tokens of a new
 * request and remembers it for the next ones. */
export function implicitCache({ now = () => Date.now() } = {}) {
  let seen = [];
  return {
    cached(body, model) {
      const text = linearize(body);
      const t = now();
      seen = seen.filter((r) => t - r.at <= CACHE_WINDOW_MS);
      let best = 0;
      for (const r of seen) if (r.model === model) best = Math.max(best, commonPrefix(r.text, text));
      seen.push({ at: t, model, text });
      if (seen.length > 200) seen.shift();
      const tokens = Math.floor(best / 4);
      return tokens >= minCacheTokens(model) ? tokens : 0;
    },
  };
}
