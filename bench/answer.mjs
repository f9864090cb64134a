// How fast an answer shows (issue 19): from the webhook's answer to the first visible sign
// (a draft or typing), to the first streamed text, and to the final message, for one private
// message and for a five-message burst (100 ms apart, timed from the first message's webhook
// answer), with a fake Gemini whose first token comes after 300 ms and whose answer streams
// over 2 s. The same with the old behaviour (DEBOUNCE_MS 1500, STREAM_DRAFTS off) for
// comparison. Part of `npm run bench` (bench/worker.mjs); `node bench/answer.mjs` runs it alone
// and prints its JSON.
import { startStack, privateText, sleep } from "../tests/support/stack.js";

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : null;
};
const ANSWER = "Here is **the plan** for today: first we walk to the market, then we cook soup together, and at the end we rest in the garden with a cup of tea and a good book.";

/** One run: `messages` private messages 100 ms apart from a new user; the times it took. */
async function run(s, uid, messages) {
  s.gemini.script(uid, [{ text: ANSWER }]);
  let answered = 0;
  for (let i = 0; i < messages; i++) {
    const r = await s.webhook(privateText(uid, `message ${i + 1}`));
    if (r.status !== 200) throw new Error(`the webhook answered ${r.status}`);
    if (i === 0) answered = Date.now();
    if (i < messages - 1) await sleep(100);
  }
  await s.tg.waitFor(() => s.tg.sent(uid).length >= 1, 60_000, "the final message");
  await sleep(messages > 1 ? 2000 : 500); // a second model call would show by now
  const tg = s.tg.requests.filter((r) => r.body.chat_id === uid && r.fault === undefined);
  const sign = tg.find((r) => (r.method === "sendMessageDraft" && r.draft !== undefined) || r.method === "sendChatAction");
  const text = tg.find((r) => r.method === "sendMessageDraft" && r.draft);
  const final = tg.find((r) => r.method === "sendMessage" && r.text !== undefined);
  const calls = s.gemini.calls(uid);
  const firstToken = calls[0]?.chunks?.[0] ?? null;
  return {
    sign_ms: sign ? sign.at - answered : null,
    first_text_ms: text ? text.at - answered : null,
    first_text_after_first_token_ms: text && firstToken ? text.at - firstToken : null,
    final_ms: final.at - answered,
    model_calls: calls.length,
  };
}

async function series(vars, label, base) {
  const s = await startStack({ latencyMs: 300, vars });
  s.gemini.streamMs = 2000;
  const out = {};
  try {
    for (const [name, messages] of [["single", 1], ["burst_of_5", 5]]) {
      const runs = [];
      for (let k = 0; k < 5; k++) runs.push(await run(s, base + (name === "single" ? 0 : 100) + k, messages));
      const pick = (key) => median(runs.map((r) => r[key]).filter((v) => v !== null));
      out[name] = {
        runs: runs.length,
        sign_ms: pick("sign_ms"),
        first_text_ms: pick("first_text_ms"),
        first_text_after_first_token_ms: pick("first_text_after_first_token_ms"),
        final_ms: pick("final_ms"),
        model_calls_max: Math.max(...runs.map((r) => r.model_calls)),
      };
    }
  } finally {
    await s.close();
  }
  return { label, ...out };
}

/** Both series: the default (adaptive, streamed) and the old behaviour. */
export async function answerSpeed() {
  const streamed = await series({ DEBOUNCE_MS: "" }, "adaptive debounce, streamed drafts (defaults)", 88_000_000);
  const old = await series({ DEBOUNCE_MS: "1500", STREAM_DRAFTS: "off" }, "DEBOUNCE_MS 1500, STREAM_DRAFTS off (a fixed window, typing, no drafts)", 88_100_000);
  return { streamed, old };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(JSON.stringify(await answerSpeed(), null, 2));
}
