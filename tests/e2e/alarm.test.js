// The chat object's alarm and its liveness (issue 35, items 5, 15, 16, 17, 18): an invocation
// never spends past its subrequest budget (work that does not fit waits for the next one), the
// alarm does not spin while a delivery runs, a reminder falls back to its own text within a
// couple of minutes when the model keeps failing, Telegram's retry_after holds for every call
// to the chat, and work in flight when the runtime restarts is taken over within seconds, not
// at the watchdog.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, uniqueId, sleep, log, LONG } from "../support/stack.js";

let s;
before(async () => {
  // The default watchdog (120 s): a restart must not wait for it.
  s = await startStack({ vars: { RETRY_BASE_MS: "300", METRICS_LOG: "true", DRAFT_INTERVAL_MS: "300", SCHEDULE_FALLBACK_SECONDS: "5" } });
});
after(async () => {
  await s?.close();
});

/** The `metrics` lines of invocations started at or after `since` (ms; METRICS_LOG). */
function metrics(since = 0) {
  return s
    .logs()
    .map((l) => String(l.message ?? l))
    .filter((m) => m.startsWith("metrics "))
    .map((m) => JSON.parse(m.slice(8)))
    .filter((m) => m.started_ms >= since);
}

test("a runtime restart mid-turn: the answer comes within seconds, not at the 2-minute watchdog", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "too late", delayMs: 5000 }, { text: "Answered after the restart." }]);
  await s.webhook(privateText(uid, "a question"));
  await s.gemini.waitFor(() => s.gemini.calls(uid).length === 1, 10_000, "the slow model call");
  await s.restart(); // the instance running the turn dies; storage stays; nobody writes again
  const t0 = Date.now();
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 20_000, "the answer after the restart");
  log(`answer ${Date.now() - t0} ms after the restart`);
  await sleep(3000);
  assert.deepEqual(s.tg.sent(uid), ["Answered after the restart."], "exactly one answer");
  assert.equal(s.gemini.calls(uid).length, 2, "taken over once");
});

test("a 429 on the second chunk of a long answer: no call to that chat before its retry_after", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: LONG, streamMs: 3000 }]);
  s.tg.fault({ method: "sendMessage", chatId: uid, skip: 1, status: 429, retry_after: 2 });
  await s.webhook(privateText(uid, "tell me everything"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 3, 40_000, "the three messages");
  await sleep(1000);
  const calls = s.tg.requests.filter((r) => r.body?.chat_id === uid);
  const limited = calls.find((r) => r.fault === 429);
  assert.ok(limited, "the second chunk was refused with 429");
  const next = calls.filter((r) => r.at > limited.at);
  log(`after the 429: ${next.map((r) => `${r.method} +${r.at - limited.at} ms`).join(", ")}`);
  assert.ok(next.length >= 2, "the rest went out");
  assert.ok(next.every((r) => r.at - limited.at >= 2000), "nothing to the chat before retry_after (2 s)");
  assert.equal(new Set(s.finalSent(uid).map((r) => r.text)).size, 3, "every chunk once");
});

test("a reminder whose model keeps failing sends its own text within the fallback window, and no model version follows", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ calls: [{ name: "schedule_message", args: { text: "take the pills", in_minutes: 0.05 } }] }, { text: "Okay." }]);
  await s.webhook(privateText(uid, "remind me to take the pills"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 15_000, "the confirmation");
  const [row] = await s.sql("SELECT next_run_ms FROM schedules WHERE chat_id = ?", uid);
  // Gemini fails for a while, then would answer: the retry budget (ten attempts) is minutes.
  s.gemini.script(uid, [...Array.from({ length: 6 }, () => ({ status: 503 })), { text: "Model-written reminder." }]);
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 25_000, "the reminder's own text");
  const at = s.tg.calls("sendMessage", uid).filter((r) => r.text !== undefined)[1].at;
  log(`the fallback went out ${at - row.next_run_ms} ms after the due time`);
  assert.equal(s.tg.sent(uid)[1], "⏰ take the pills");
  assert.ok(at - row.next_run_ms <= 5000 + 8000, "within the fallback window (5 s here) and a retry");
  const calls = s.gemini.calls(uid).length;
  await sleep(12_000);
  assert.deepEqual(s.tg.sent(uid).slice(1), ["⏰ take the pills"], "no model-written version after it");
  assert.equal(s.gemini.calls(uid).length, calls, "the model is not asked again");
});

test("the alarm does not spin while a delivery runs: a slow sendMessage while new messages arrive", async () => {
  const uid = uniqueId();
  // The first attempt fails, so the retried turn (and its plan) run in the queue's job, not in
  // the alarm: the alarm then races the running delivery.
  s.gemini.script(uid, [{ status: 503 }, { text: LONG, streamMs: 1500 }, { text: "And the second question." }]);
  await s.webhook(privateText(uid, "tell me everything"));
  // The first chunk went out while the answer streamed (the turn is committed): the rest is
  // slow to send, and people keep writing meanwhile (the committed plan goes on; each message
  // arms the alarm).
  await s.tg.waitFor(() => s.finalSent(uid).length >= 1, 30_000, "the first chunk");
  const slow = s.tg.delay({ method: "sendMessage", chatId: uid, times: 2, ms: 4000 });
  // Alarm invocations (the metrics lines an operator reads; this test's chat is the only busy one).
  const since = Date.now();
  for (let i = 0; s.finalSent(uid).length < 3 && i < 40; i++) {
    await s.webhook(privateText(uid, `and a second question (${i})`));
    await sleep(500);
  }
  const until = Date.now();
  const during = metrics(since).filter((m) => m.kind === "alarm" && m.started_ms <= until).length;
  slow.times = 0;
  log(`alarms while one delivery ran: ${during}`);
  await s.tg.waitFor(() => s.finalSent(uid).length === 4, 30_000, "the second answer");
  assert.ok(during <= 5, `${during} alarms while one delivery ran`);
  assert.equal(s.finalSent(uid).at(-1).text, "And the second question.");
});

test("owed apologies and a recovered turn in one chat: no invocation past the budget, and everything still goes out", async () => {
  const uid = uniqueId();
  const n = 14;
  // Telegram answers the chat 429 (retry after 12 s) while n turns fail for good: n apologies
  // owed, each due about 12 s after its turn.
  const down = s.tg.fault({ method: "sendMessage", chatId: uid, status: 429, retry_after: 12, times: 100_000 });
  s.gemini.script(uid, Array.from({ length: n }, () => ({ status: 400, message: "Request contains an invalid argument." })));
  const t0 = Date.now();
  for (let i = 0; i < n; i++) {
    await s.webhook(privateText(uid, `message ${i}`));
    await s.gemini.waitFor(() => s.gemini.calls(uid).length === i + 1, 20_000, `turn ${i}`).catch(async (e) => {
      // What the chat was doing, for a failure on a loaded machine.
      log(`telegram ${s.tg.requests.filter((r) => r.body?.chat_id === uid).map((r) => `${r.method}${r.fault ?? ""}@${r.at - t0}`).join(" ")}`);
      throw e;
    });
    await sleep(150);
  }
  // Every turn given up (the operator's record of turns), so n apologies are owed; none went out.
  const given = async () => (await s.sql("SELECT COUNT(*) AS n FROM turns WHERE chat_id = ? AND status = 'dead'", uid))[0].n;
  for (let t = 0; t < 50 && (await given()) !== n; t++) await sleep(200);
  assert.equal(await given(), n, "n turns given up");
  assert.equal(s.tg.sent(uid).length, 0, "no apology past Telegram's 429 yet");
  // A slow turn runs while they all come due; then it dies with the runtime. Its taken-over
  // attempt calls tools for four rounds.
  const rounds = Array.from({ length: 4 }, (_, i) => ({ calls: [{ name: "search_memory", args: { query: `round ${i}` } }] }));
  s.gemini.script(uid, [{ text: "never sent", delayMs: 20_000 }, ...rounds, { text: "The answer, at last." }]);
  await s.webhook(privateText(uid, "the last question"));
  await s.gemini.waitFor(() => s.gemini.calls(uid).length === n + 1, 10_000, "the slow call");
  const tLast = Date.now();
  await sleep(Math.max(0, t0 + 13_000 - Date.now()) + (tLast - t0));
  const from = Date.now();
  down.times = 0;
  await s.restart();
  await s.tg.waitFor(() => s.tg.sent(uid).length === n + 1, 60_000, "every apology and the answer");
  await sleep(2000);
  const sent = s.tg.sent(uid);
  assert.equal(sent.filter((t) => /technical problem/.test(t)).length, n, "every apology once");
  assert.equal(sent.filter((t) => t === "The answer, at last.").length, 1, "the answer once");
  const all = metrics(from);
  log(`after the restart: ${all.map((m) => `${m.kind} ${m.subrequests}`).join(", ")}`);
  const alarms = all.filter((m) => m.kind === "alarm");
  assert.ok(alarms.length >= 2, "the work was split over invocations");
  assert.ok(all.every((m) => m.subrequests <= 40), "every invocation within the meter's budget (35) and its bookkeeping");
});
