// Guest mode (issue 36, part 5): a person summons the bot into a chat it is not a member of.
// Measures, over GUEST_RUNS runs (default 5), with a model that answers after 0.3 s: from the
// webhook request to the placeholder (answerGuestQuery, answered inside the webhook) and to the
// answer edited in (editMessageText with the inline_message_id, from the queued job). Prints one
// JSON object (npm run bench writes it to .tmp/bench/guest.json for bench/report.mjs). Needs a
// bundle in .tmp/bundle.
// The runtime's queue info lines stay off stdout (progress.mjs sets WRANGLER_LOG=warn).
import "./progress.mjs";
import { startStack, uniqueId } from "../tests/support/stack.js";

const RUNS = Math.max(1, Number(process.env.GUEST_RUNS ?? 5));
const MODEL_MS = 300;
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};

const s = await startStack({ vars: { DM_POLICY: "open" } });
s.tg.setGuestMode(true);
try {
  const placeholder = [], edited = [];
  for (let i = 0; i < RUNS; i++) {
    process.stderr.write(`guest: run ${i + 1} of ${RUNS}\n`);
    const uid = uniqueId();
    s.gemini.script(uid, [{ text: `Answer number ${i + 1}.`, delayMs: MODEL_MS }]);
    const u = s.tg.guestMessage(-1009100000000 - i, uid, "@edge_test_bot a quick question");
    const q = u.guest_message.guest_query_id;
    const sent = Date.now();
    await s.webhook(u);
    const answer = () => s.tg.requests.find((r) => r.method === "answerGuestQuery" && r.body.guest_query_id === q && r.text);
    await s.tg.waitFor(() => answer(), 15_000, "the placeholder");
    placeholder.push(answer().at - sent);
    const inline = s.tg.guestMessages(u.guest_message.chat.id)[0].inline_message_id;
    const edit = () => s.tg.requests.find((r) => r.method === "editMessageText" && r.body.inline_message_id === inline && r.text);
    await s.tg.waitFor(() => edit(), 20_000, "the answer edited in");
    edited.push(edit().at - sent);
  }
  console.log(JSON.stringify({
    runs: RUNS,
    model_ms: MODEL_MS,
    webhook_to_placeholder_ms: { p50: pct(placeholder, 0.5), max: Math.max(...placeholder) },
    webhook_to_final_edit_ms: { p50: pct(edited, 0.5), max: Math.max(...edited) },
  }, null, 2));
} finally {
  await s.close();
}
