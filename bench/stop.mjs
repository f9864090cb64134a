// Stop (issue 36): a private chat's answer streams as drafts; the person presses Stop. Measures,
// over STOP_RUNS runs (default 5): the first streamed text (the first draft with text, from the
// webhook's answer), and from the Stop update's acknowledgement to the turn's last Bot API call
// (the partial answer it keeps, STOP_KEEPS=partial), and counts the turn's Bot API calls after
// that (drafts or messages: should be none). Prints one JSON object (npm run bench writes it to
// .tmp/bench/stop.json for bench/report.mjs). Needs a bundle in .tmp/bundle.
import { startStack, privateText, uniqueId, sleep } from "../tests/support/stack.js";

const RUNS = Math.max(1, Number(process.env.STOP_RUNS ?? 5));
const LONG = Array.from({ length: 40 }, (_, i) => `Step ${i + 1} of the long plan, with a few words.`).join(" ");
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};

const s = await startStack({ vars: { DRAFT_INTERVAL_MS: "200" } });
try {
  const first = [], silence = [], after = [];
  for (let i = 0; i < RUNS; i++) {
    process.stderr.write(`stop: run ${i + 1} of ${RUNS}\n`);
    const uid = uniqueId();
    s.gemini.script(uid, [{ text: LONG, streamMs: 6000 }]);
    const texts = () => s.tg.calls("sendMessageDraft", uid).filter((r) => r.draft);
    const sent = Date.now();
    await s.webhook(privateText(uid, "tell me the long plan"));
    const acked = Date.now();
    await s.tg.waitFor(() => texts().length >= 1, 15_000, "the first streamed text");
    first.push(texts()[0].at - acked);
    await s.tg.waitFor(() => texts().length >= 3, 15_000, "drafts of the answer");
    const draftId = texts().at(-1).body.draft_id;
    await s.webhook(s.tg.pressStop(uid, draftId));
    const stopped = Date.now();
    await s.tg.waitFor(() => s.finalSent(uid).length === 1, 10_000, "the kept partial answer");
    await sleep(2000);
    const calls = [...s.tg.calls("sendMessageDraft", uid), ...s.tg.calls("sendMessage", uid)].map((c) => c.at);
    const kept = s.finalSent(uid)[0].at;
    silence.push(Math.max(...calls.filter((t) => t <= kept)) - stopped);
    after.push(calls.filter((t) => t > kept).length);
    void sent;
  }
  console.log(JSON.stringify({
    runs: RUNS,
    first_text_ms: { p50: pct(first, 0.5), max: Math.max(...first) },
    stop_to_silence_ms: { p50: pct(silence, 0.5), max: Math.max(...silence) },
    calls_after_silence_max: Math.max(...after),
  }, null, 2));
} finally {
  await s.close();
}
