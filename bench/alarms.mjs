// The alarm under a forced race (issue 35, item 15): a private chat's long answer is committed
// (its first chunk went out while it streamed) and its plan runs in the retry job's invocation
// (the first model call failed), its next two sendMessage calls answered 4 s late by the fake
// Telegram while the person writes every half second. The chat object's alarm count (its
// `alarm` metrics lines, METRICS_LOG) grows by how many alarms ran while that one delivery
// did; before the re-check alarm it grew by hundreds (the alarm fired every millisecond).
// Part of `npm run bench` (bench/worker.mjs); `node bench/alarms.mjs` runs it alone.
import { startStack, privateText, sleep } from "../tests/support/stack.js";

const PARAGRAPHS = Array.from({ length: 42 }, (_, i) =>
  `Paragraph ${i + 1} of the long answer: **step ${i + 1}** is where we look at the details once more, weigh each option with care, write down what we learnt, and then move on to the next part of the plan without rushing anything at all today.`,
);

export async function alarmRace() {
  const s = await startStack({ vars: { RETRY_BASE_MS: "300", DRAFT_INTERVAL_MS: "300", METRICS_LOG: "true" } });
  try {
    const uid = 88_000_001;
    const finals = () => s.tg.calls("sendMessage", uid).filter((r) => r.text !== undefined).length;
    // Alarm invocations, from the worker's metrics lines (this chat is the only busy one).
    const alarms = async () => s.metricsSince(0).filter((m) => m.kind === "alarm").length;
    s.gemini.script(uid, [{ status: 503 }, { text: PARAGRAPHS.join("\n\n"), streamMs: 1500 }, { text: "And the second question." }]);
    await s.webhook(privateText(uid, "tell me everything"));
    await s.tg.waitFor(() => finals() >= 1, 60_000, "the first chunk");
    const slow = s.tg.delay({ method: "sendMessage", chatId: uid, times: 2, ms: 4000 });
    const t0 = Date.now();
    const before = await alarms();
    let messages = 0;
    while (finals() < 3 && messages < 60) {
      await s.webhook(privateText(uid, `and a second question (${messages++})`));
      await sleep(500);
    }
    const during = (await alarms()) - before;
    const deliveryMs = Date.now() - t0;
    slow.times = 0;
    await s.tg.waitFor(() => finals() >= 4, 60_000, "the second answer");
    return { alarms_during_delivery: during, delivery_ms: deliveryMs, messages_meanwhile: messages };
  } finally {
    await s.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(JSON.stringify(await alarmRace()));
}
