// Replays the recorded 500-message group conversation (tests/fixtures/conversations/group_500.json)
// through the worker under local workerd, in both history formats: every person's message goes
// to the webhook in order, every fourth one mentions the bot (so it becomes a turn, about 110 of
// them), and the next message waits for that turn's answer. The fake Gemini counts Gemini's own
// tokens (tests/support/gemini-tokens.js) and reports cached tokens the way Gemini's implicit
// cache does (tests/support/fake-gemini-cache.js: the longest prefix shared with a request of
// the last five minutes, from the model's minimum cacheable size on). Prints JSON (read by report.mjs): per format, turns, input and cached tokens, the
// cached share and the estimated cost per 100 turns as the bot prices it (`/api/v1/costs`).
import fs from "node:fs";
import path from "node:path";
import { startStack, groupText, mention, ROOT, ADMIN_TOKEN } from "../tests/support/stack.js";
import { progress, pairs } from "./progress.mjs";

const P = progress("cache", { plan: 2 });

const fixture = JSON.parse(fs.readFileSync(path.join(ROOT, "tests/fixtures/conversations/group_500.json"), "utf8"));
const people = fixture.messages.filter((m) => !m.bot);
const EVERY = 4;
// The default model's list price from 2027-01-01 (crates/core/src/prices.rs, Google's page read
// 2026-11-26; through 2026 it is on a promotional price of half this), its cache reads at a tenth.
const PRICE = { model: "gemini-3.8-flash", input: 1.5, output: 7.5, cached: 0.15 };

async function replay(format, chatId) {
  const s = await startStack({ geminiTokens: "gemini", vars: { HISTORY_FORMAT: format, DEBOUNCE_MS: "50", DEBOUNCE_MAX_MS: "2000", GEMINI_MODEL: PRICE.model, PRICES: `${PRICE.model}=${PRICE.input}/${PRICE.output}/${PRICE.cached}` } });
  try {
    const ids = new Map(); // the fixture's message id → the id the replay sent it with
    let turns = 0;
    const step = P.scenario(`${format}: the recorded group's ${people.length} messages, every ${EVERY}th asking`, people.length);
    for (let i = 0; i < people.length; i++) {
      step.tick();
      const m = people[i];
      const asks = (i + 1) % EVERY === 0;
      const body = m.text || (m.media ? `[${m.media.kind}] ${m.media.detail}` : "…");
      const text = asks ? `@edge_test_bot ${body}` : body;
      const reply = m.reply_to && ids.has(m.reply_to) ? { message_id: ids.get(m.reply_to), chat: { id: chatId, type: "supergroup" }, date: 1, text: "…" } : undefined;
      const u = groupText(chatId, m.user_id, text, { name: m.name, entities: asks ? mention(text, "edge_test_bot") : undefined, reply_to_message: reply });
      ids.set(m.message_id, u.message.message_id);
      const before = s.tg.sent(chatId).length;
      const r = await s.webhook(u);
      if (r.status !== 200) throw new Error(`webhook answered ${r.status}`);
      if (asks) {
        turns++;
        await s.tg.waitFor(() => s.tg.sent(chatId).length > before, 30_000, `turn ${turns}`);
      }
    }
    step.done();
    const calls = await s.sql("SELECT prompt_tokens, cached_tokens FROM calls WHERE chat_id = ? AND purpose = 'turn' ORDER BY created_at, n", chatId);
    const res = await s.fetch("/api/v1/costs?period=all", { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const costs = await res.json();
    const row = costs.rows.filter((r) => r.chat_id === chatId);
    const cost = row.reduce((a, r) => a + (r.cost_usd ?? 0), 0);
    const input = calls.reduce((a, c) => a + c.prompt_tokens, 0);
    const cached = calls.reduce((a, c) => a + (c.cached_tokens ?? 0), 0);
    // What the same calls would cost with nothing cached (every input token at the full price).
    const uncached = cost + (cached * (PRICE.input - PRICE.cached)) / 1e6;
    return {
      format,
      turns,
      model_calls: calls.length,
      input_tokens: input,
      cached_tokens: cached,
      cached_share: cached / Math.max(1, input),
      input_tokens_per_turn: input / Math.max(1, turns),
      cost_per_100_turns_usd: (cost * 100) / Math.max(1, turns),
      uncached_cost_per_100_turns_usd: (uncached * 100) / Math.max(1, turns),
      first_cached_call: calls.findIndex((c) => c.cached_tokens > 0) + 1,
    };
  } finally {
    await s.close();
  }
}

const results = [];
for (const [i, format] of ["structured", "compact"].entries()) {
  const r = await replay(format, -1009100000000 - i);
  results.push(r);
  P.table(`Model cost, ${format} history`, pairs([
    ["turns / model calls", `${r.turns} / ${r.model_calls}`],
    ["input tokens per turn", r.input_tokens_per_turn.toFixed(0)],
    ["cached share", `${(100 * r.cached_share).toFixed(0)}%`],
    ["cost per 100 turns", `$${r.cost_per_100_turns_usd.toFixed(3)} (uncached $${r.uncached_cost_per_100_turns_usd.toFixed(3)})`],
  ]));
}
console.log(JSON.stringify({ messages: people.length, every: EVERY, results }, null, 2));
