// Paths where the bot could go silent for good or storm: a lost retry job, a model call slower
// than the watchdog, a plan step cancelled while it is at Telegram, and an apology that could
// not go out at the moment the bot gave up. Each test failed on the version before the fix.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, reaction, uniqueId, sleep, log } from "../support/stack.js";

let s;
before(async () => {
  s = await startStack({ vars: { RETRY_BASE_MS: "300", MAX_TURN_ATTEMPTS: "4", TURN_WATCHDOG_MS: "400", JOB_GRACE_MS: "1500", METRICS_LOG: "true" } });
});
after(async () => {
  await s?.close();
});

test("a model call slower than the watchdog does not make the alarm fire in a loop", async () => {
  const uid = uniqueId();
  // The first attempt fails, so the slow one runs from a retry job (outside any alarm).
  s.gemini.script(uid, [{ status: 503 }, { text: "slow but sure", delayMs: 3000 }]);
  const from = s.logs().length;
  await s.webhook(privateText(uid, "take your time"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 20_000, "the reply");
  await sleep(500);
  // Alarm invocations, from the metrics lines an operator reads (this test's chat is the only busy one).
  const alarms = s.metricsSince(from).filter((m) => m.kind === "alarm").length;
  log(`alarms handled for a 3 s model call with a 400 ms watchdog: ${alarms}`);
  assert.equal(s.tg.sent(uid)[0], "slow but sure");
  assert.ok(alarms >= 2, `the alarm ran (${alarms})`);
  // Debounce, the first attempt, the watchdog about every 400 ms over 3 s, the plan: a dozen
  // or so. Armed in the past in a loop it would be thousands.
  assert.ok(alarms <= 25, `alarms: ${alarms}`);
});

test("a plan step cancelled while its first chunk is at Telegram: the rest is never sent", async () => {
  const uid = uniqueId();
  const para = (tag) => `${tag} ` + "lorem ipsum dolor sit amet ".repeat(120);
  s.gemini.script(uid, [{ text: `${para("FIRST")}\n\n${para("SECOND")}` }]);
  s.tg.delay({ method: "sendMessage", chatId: uid, ms: 2500 });
  await s.webhook(privateText(uid, "tell me a long story"));
  await s.tg.waitFor(() => s.tg.calls("sendMessage", uid).length === 1, 15_000, "the first chunk at Telegram");
  await s.webhook(privateText(uid, "stop, never mind"));
  await s.tg.waitFor(() => s.tg.sent(uid).some((t) => t.startsWith("Echo:")), 20_000, "the answer to the new message");
  await sleep(1500);
  const texts = s.tg.calls("sendMessage", uid).map((c) => c.body.text);
  log(`sendMessage texts: ${texts.map((t) => t.slice(0, 12)).join(" | ")}`);
  assert.ok(texts[0].startsWith("FIRST"), "the first chunk was already at Telegram");
  assert.ok(!texts.some((t) => t.includes("SECOND")), "the cancelled rest of the step is not sent");
  assert.equal(s.tg.sent(uid).at(-1), "Echo: stop, never mind");
});

test("the apology is not lost when Telegram fails at the moment the bot gives up", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ status: 400, message: "Request contains an invalid argument." }]);
  // The first two sends to this chat (the apology's first tries) fail.
  s.tg.fault({ method: "sendMessage", chatId: uid, status: 502, description: "Bad Gateway", times: 2 });
  await s.webhook(privateText(uid, "hello?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 20_000, "the apology, eventually");
  await sleep(2000);
  assert.equal(s.tg.sent(uid).length, 1, "exactly one apology");
  assert.match(s.tg.sent(uid)[0], /technical problem/);
  assert.equal(s.tg.calls("sendMessage", uid).length, 3, "two failures, then the apology");
  // Nothing owed any more: no further attempt comes (retries were ~300 ms apart).
  await sleep(2000);
  assert.equal(s.tg.calls("sendMessage", uid).length, 3, "nothing sent or tried after the apology");
});

test("a reaction that needs no answer: silence on purpose is recorded, never an apology", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "Here is a joke." }]);
  await s.webhook(privateText(uid, "tell me a joke"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the joke");
  await sleep(300);
  const [{ message_id: joke }] = await s.sql("SELECT message_id FROM history WHERE chat_id = ? AND role = 'bot' ORDER BY seq DESC, apart DESC LIMIT 1", uid);
  // The model answers the reaction with nothing at all, then (second reaction) with no_reply.
  s.gemini.script(uid, [{ finishReason: "STOP" }, { calls: [{ name: "no_reply" }] }]);
  await s.webhook(reaction(uid, uid, joke, "👍"));
  await s.gemini.waitFor(() => s.gemini.calls(uid).length === 2, 10_000, "the reaction's turn");
  await sleep(1200);
  await s.webhook(reaction(uid, uid, joke, "🔥"));
  await s.gemini.waitFor(() => s.gemini.calls(uid).length === 3, 10_000, "the second reaction's turn");
  await sleep(1500);
  assert.deepEqual(s.tg.sent(uid), ["Here is a joke."], "nothing sent for either reaction");
  const turns = await s.sql("SELECT status, empty_reason FROM turns WHERE chat_id = ? ORDER BY created_at", uid);
  assert.equal(turns.length, 3);
  for (const t of turns.slice(1)) {
    assert.equal(t.status, "done");
    assert.match(t.empty_reason, /no reply, on purpose/);
  }
  const declared = s.gemini.calls(uid)[1].body.tools[0].functionDeclarations.map((d) => d.name);
  assert.ok(declared.includes("no_reply"));
});

test("a model that calls tools without end: the turn stays within its subrequest budget and still answers", async () => {
  const uid = uniqueId();
  const searches = (n) => ({ calls: Array.from({ length: n }, (_, i) => ({ name: "search_memory", args: { query: `thing ${i}` } })) });
  s.gemini.script(uid, [searches(12), searches(12), searches(12), searches(12), { text: "Found nothing, sorry." }]);
  await s.webhook(privateText(uid, "what do you remember?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 20_000, "the answer");
  assert.equal(s.tg.sent(uid)[0], "Found nothing, sorry.");
  const [turn] = await s.sql("SELECT subrequests FROM turns WHERE chat_id = ?", uid);
  log(`a turn with 48 requested memory searches used ${turn.subrequests} subrequests`);
  // 48 searches unbounded would be 3 D1 + 5 model calls + 48 = 56+, over the platform's 50.
  assert.ok(turn.subrequests <= 35, `subrequests: ${turn.subrequests}`);
  const last = s.gemini.calls(uid).at(-2).body.contents.at(-1).parts.map((p) => JSON.stringify(p.functionResponse?.response ?? {}));
  assert.ok(last.some((r) => r === "{\"results\":[]}"), "searches past the budget find nothing");
});

test("a retry job that is lost (runtime restarted while it waited): the chat answers by itself", async () => {
  // A stack of its own: the retry waits seconds, long enough to lose it in a restart.
  const t = await startStack({ vars: { RETRY_BASE_MS: "5000", MAX_TURN_ATTEMPTS: "4", JOB_GRACE_MS: "1000" } });
  try {
    const uid = uniqueId();
    t.gemini.script(uid, [{ status: 503 }, { text: "back again" }]);
    await t.webhook(privateText(uid, "still there?"));
    await t.gemini.waitFor(() => t.gemini.calls(uid).length === 1, 10_000, "the failing call");
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline) {
      const [turn] = await t.sql("SELECT status FROM turns WHERE chat_id = ?", uid);
      if (turn?.status === "retrying") break;
      await sleep(50);
    }
    await t.restart(); // local queues lose what they hold: the retry job is gone
    await t.tg.waitFor(() => t.tg.sent(uid).length === 1, 30_000, "a reply without the lost job");
    await sleep(4000);
    assert.deepEqual(t.tg.sent(uid), ["back again"], "exactly one reply");
    assert.equal(t.gemini.calls(uid).length, 2, "one more model call, not two");
    const logs = JSON.stringify(t.logs?.() ?? "");
    log(`takeover logged: ${/retry job is overdue/.test(logs)}`);
  } finally {
    await t.close();
  }
});
