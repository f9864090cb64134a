// The "Model cost" section of BENCHMARKS.md: Gemini's implicit cache over the recorded
// 500-message conversation, replayed through the worker (bench/cache.mjs) and simulated
// natively before and after issue 17's request layout (crates/bench/src/cache.rs).

const pct = (x) => `${(100 * x).toFixed(1)}%`;
const usd = (x) => `$${x.toFixed(3)}`;
const n = (x) => Math.round(x).toLocaleString("en-US");

/** What the figures say about the goal (at least 75% cached in both formats). */
function verdict(cache, prompt) {
  const missed = cache.results.filter((r) => r.cached_share < 0.75);
  if (missed.length === 0) return "The goal, at least 75% of input tokens cached in both formats, is met.";
  return missed
    .map((r) => {
      const sim = prompt.cache_simulation[r.format].after;
      return `The goal, at least 75% cached, is not met in the ${r.format} format (${pct(r.cached_share)}): its requests are small, and the first ${sim.first_turn_over_minimum - 1} turns' requests are under Gemini's 4,096-token minimum, so nothing of them can be cached; from then on ${pct(sim.cached_share_from_then)} is (simulated).`;
    })
    .join(" ");
}

export function cacheSection(cache, prompt) {
  const rows = cache.results
    .map((r) => {
      const sim = prompt.cache_simulation[r.format];
      return `| ${r.format} | ${r.turns} | ${n(r.input_tokens_per_turn)} | ${pct(r.cached_share)} ${r.cached_share >= 0.75 ? "✅" : "❌"} | ${usd(r.cost_per_100_turns_usd)} | ${usd(r.uncached_cost_per_100_turns_usd)} | ${pct(sim.before.cached_share)} → ${pct(sim.after.cached_share)} (${pct(sim.after.cached_share_from_then)} from turn ${sim.after.first_turn_over_minimum}) |`;
    })
    .join("\n");
  return `## Model cost: Gemini's implicit cache

The recorded 500-message group conversation (its ${cache.messages} messages from people) goes
through the webhook in order; every ${cache.every}th mentions the bot and waits for its answer,
so it is replayed as about 110 turns, once per history format. The fake Gemini reports
\`cachedContentTokenCount\` as Gemini's implicit cache does: the longest prefix a request shares
with one of the last five minutes, counted from the model's minimum cacheable size on
(4,096 tokens for the default gemini-3.8-flash; tokens are 4 characters of the request's JSON).
Costs are the bot's own (\`/api/v1/costs\`) at list price, $1.50 per million input tokens,
$0.375 cached, $7.50 output. "Before → after" is a native simulation of the same replay
(\`crates/bench/src/cache.rs\`, the same prefix rule) with the request layout before issue 17
(the turn's situation, stored context and time opening the system instruction; the history cut
anew every turn) and now (a system instruction that stays the same, the history from a start
that stays put, the turn context last).

| format | turns | input tokens per turn | cached share (worker) | cost per 100 turns | the same with nothing cached | cached share, simulated before → after |
|---|---|---|---|---|---|---|
${rows}

${verdict(cache, prompt)}
`;
}
