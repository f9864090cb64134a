// Telegram Business, draft mode (issue 49): a contact writes to an owner's business account.
// Measures, over BUSINESS_RUNS runs (default 7), with a model that answers after 0.3 s: from the
// contact's webhook request to the suggestion shown in the owner's private chat (a queued job,
// after the quiet window `core::business::suggest::QUIET_SECS`, 5 s), and from the owner's
// Send press (its webhook request) to the message sent to the contact with
// business_connection_id. Prints one JSON object (npm run bench writes it to
// .tmp/bench/business.json for bench/report.mjs). Needs a bundle in .tmp/bundle.
import "./progress.mjs";
import { startStack, uniqueId } from "../tests/support/stack.js";

const RUNS = Math.max(1, Number(process.env.BUSINESS_RUNS ?? 7));
const MODEL_MS = 300;
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)];
};

const s = await startStack({ vars: { DM_POLICY: "open" } });
try {
  const owner = uniqueId();
  const id = `bc-bench-${owner}`;
  await s.webhook(s.tg.connectBusiness(owner, { id }));
  const shown = [], sent = [];
  for (let i = 0; i < RUNS; i++) {
    process.stderr.write(`business: run ${i + 1} of ${RUNS}\n`);
    const contact = uniqueId();
    s.gemini.script(contact, [{ text: `Suggested answer number ${i + 1}.`, delayMs: MODEL_MS }]);
    const start = Date.now();
    await s.webhook(s.tg.businessMessage(id, contact, "hello, a quick question"));
    const suggestion = () => s.tg.requests.find((r) => r.method === "sendMessage" && r.body.chat_id === owner && r.body.reply_markup && r.at >= start && r.message_id);
    await s.tg.waitFor(() => suggestion(), 30_000, "the suggestion");
    shown.push(suggestion().at - start);
    const data = suggestion().body.reply_markup.inline_keyboard.flat().find((b) => b.text === "Send").callback_data;
    const pressAt = Date.now();
    await s.webhook(s.tg.pressButton(owner, suggestion().message_id, owner, data));
    const out = () => s.tg.requests.find((r) => r.method === "sendMessage" && r.body.chat_id === contact && r.body.business_connection_id === id && r.message_id);
    await s.tg.waitFor(() => out(), 15_000, "the message to the contact");
    sent.push(out().at - pressAt);
  }
  console.log(JSON.stringify({
    runs: RUNS,
    model_ms: MODEL_MS,
    quiet_ms: 5000,
    webhook_to_suggestion_ms: { p50: pct(shown, 0.5), p99: pct(shown, 0.99) },
    send_press_to_message_ms: { p50: pct(sent, 0.5), p99: pct(sent, 0.99) },
  }, null, 2));
} finally {
  await s.close();
}
