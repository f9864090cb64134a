// How fast an answer shows (issues 19 and 40): from the webhook's answer to the first visible
// sign (a draft or typing), to the first streamed text of the answer that is kept, and to the
// final message, for one private message and for a five-message burst (100 ms apart, timed from
// the first message's webhook answer), with a fake Gemini whose first token comes after 300 ms
// and whose answer streams over 2 s. Two settings on the same stack: this bot as deployed (the
// adaptive quiet window with early starts) and the baseline of a bot that calls the model at
// once (DEBOUNCE_MS 0). Each run also counts its model calls and the abandoned early starts with
// their tokens (from `model_calls`, what the budgets and costs add up).
//
// Then what abandoned early starts cost on a recorded conversation: the recorded group
// conversation (bench/cache.mjs) never starts early (groups keep the debounce), so the people's
// messages of tests/fixtures/conversations/group_500.json are replayed as one private chat
// instead, each person's run of messages in a row (within a minute in the recording) sent as a
// burst 150 ms apart, each run after the answer to the one before.
//
// Part of `npm run bench` (bench/worker.mjs); `node bench/answer.mjs` runs it alone and prints
// its JSON.
import fs from "node:fs";
import path from "node:path";
import { startStack, privateText, sleep, ROOT } from "../tests/support/stack.js";

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : null;
};
const ANSWER = "Here is **the plan** for today: first we walk to the market, then we cook soup together, and at the end we rest in the garden with a cup of tea and a good book.";
const RUNS = 5;

/** Model calls of `chat` as stored: all, and the abandoned early starts with their tokens. */
async function callsOf(s, chat) {
  const rows = await s.sql("SELECT total_tokens, error FROM calls WHERE chat_id = ? AND purpose = 'turn'", chat);
  const abandoned = rows.filter((r) => /abandoned/.test(r.error ?? ""));
  return { calls: rows.length, tokens: rows.reduce((a, r) => a + r.total_tokens, 0), abandoned: abandoned.length, abandoned_tokens: abandoned.reduce((a, r) => a + r.total_tokens, 0) };
}

/** One run: `messages` private messages 100 ms apart from a new user; the times it took. */
async function run(s, uid, messages) {
  s.gemini.script(uid, Array.from({ length: messages }, () => ({ text: ANSWER })));
  let answered = 0;
  for (let i = 0; i < messages; i++) {
    const r = await s.webhook(privateText(uid, `message ${i + 1}`));
    if (r.status !== 200) throw new Error(`the webhook answered ${r.status}`);
    if (i === 0) answered = Date.now();
    if (i < messages - 1) await sleep(100);
  }
  await s.tg.waitFor(() => s.tg.sent(uid).length >= 1, 60_000, "the final message");
  await sleep(messages > 1 ? 2500 : 800); // a further model call or message would show by now
  const tg = s.tg.requests.filter((r) => r.body.chat_id === uid && r.fault === undefined);
  const calls = s.gemini.calls(uid);
  // The answer that is kept is the last call's: an abandoned start's drafts were taken back.
  const kept = calls.at(-1);
  const sign = tg.find((r) => (r.method === "sendMessageDraft" && r.draft !== undefined) || r.method === "sendChatAction");
  const text = tg.find((r) => r.method === "sendMessageDraft" && r.draft && (!kept || r.at >= kept.at));
  const finals = tg.filter((r) => r.method === "sendMessage" && r.text !== undefined);
  const firstToken = kept?.chunks?.[0] ?? null;
  const stored = await callsOf(s, uid);
  return {
    sign_ms: sign ? sign.at - answered : null,
    first_text_ms: text ? text.at - answered : null,
    first_text_after_first_token_ms: text && firstToken ? text.at - firstToken : null,
    final_ms: finals[0].at - answered,
    final_messages: finals.length,
    model_calls: calls.length,
    abandoned: stored.abandoned,
    abandoned_tokens: stored.abandoned_tokens,
    tokens: stored.tokens,
  };
}

async function series(vars, label, base) {
  const s = await startStack({ latencyMs: 300, vars });
  s.gemini.streamMs = 2000;
  const out = {};
  try {
    for (const [name, messages] of [["single", 1], ["burst_of_5", 5]]) {
      const runs = [];
      for (let k = 0; k < RUNS; k++) runs.push(await run(s, base + (name === "single" ? 0 : 100) + k, messages));
      const pick = (key) => median(runs.map((r) => r[key]).filter((v) => v !== null));
      const max = (key) => Math.max(...runs.map((r) => r[key]));
      out[name] = {
        runs: runs.length,
        sign_ms: pick("sign_ms"),
        first_text_ms: pick("first_text_ms"),
        first_text_after_first_token_ms: pick("first_text_after_first_token_ms"),
        final_ms: pick("final_ms"),
        final_messages_max: max("final_messages"),
        model_calls_max: max("model_calls"),
        abandoned_max: max("abandoned"),
        abandoned_tokens_median: pick("abandoned_tokens"),
        tokens_median: pick("tokens"),
      };
    }
  } finally {
    await s.close();
  }
  return { label, ...out };
}

/** The recorded conversation's people, as runs of one person's messages in a row. */
function recordedRuns(limit) {
  const fixture = JSON.parse(fs.readFileSync(path.join(ROOT, "tests/fixtures/conversations/group_500.json"), "utf8"));
  const runs = [];
  for (const m of fixture.messages.filter((x) => !x.bot).slice(0, limit)) {
    const text = m.text || (m.media ? `[${m.media.kind}] ${m.media.detail}` : "…");
    const last = runs.at(-1);
    if (last && last.user === m.user_id && m.date - last.date <= 60) last.texts.push(text);
    else runs.push({ user: m.user_id, date: m.date, texts: [text] });
    runs.at(-1).date = m.date;
  }
  return runs;
}

/** The recorded conversation replayed as one private chat with early starts (module doc). */
export async function recordedPrivate(chat, limit = 80) {
  // One person writes every message: no hourly turn budget in the way.
  const s = await startStack({ latencyMs: 300, vars: { DEBOUNCE_MS: "", USER_TURNS_PER_HOUR: "0" } });
  try {
    const runs = recordedRuns(limit);
    for (const r of runs) {
      const before = s.tg.sent(chat).length;
      for (let i = 0; i < r.texts.length; i++) {
        if (i > 0) await sleep(150);
        const res = await s.webhook(privateText(chat, r.texts[i]));
        if (res.status !== 200) throw new Error(`the webhook answered ${res.status}`);
      }
      await s.tg.waitFor(() => s.tg.sent(chat).length > before, 60_000, "the run's answer");
    }
    await sleep(1500);
    const stored = await callsOf(s, chat);
    return { messages: runs.reduce((a, r) => a + r.texts.length, 0), runs: runs.length, runs_of_several: runs.filter((r) => r.texts.length > 1).length, answers: s.tg.sent(chat).length, ...stored };
  } finally {
    await s.close();
  }
}

/** This bot (defaults: adaptive window, early starts) against a bot that calls the model at once. */
export async function answerSpeed({ quick = false } = {}) {
  const early = await series({ DEBOUNCE_MS: "" }, "this bot (adaptive window, early start; the defaults)", 88_000_000);
  const baseline = await series({ DEBOUNCE_MS: "0" }, "baseline: the model called at once (DEBOUNCE_MS 0)", 88_100_000);
  // Quick mode (npm run bench -- --quick): the two series only, not the recorded replay.
  const recorded = quick ? null : await recordedPrivate(88_200_000);
  return { early, baseline, recorded };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(JSON.stringify(await answerSpeed(), null, 2));
}
