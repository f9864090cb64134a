// Early start (issue 40, "The first words"): in a private chat with the adaptive quiet window
// (no DEBOUNCE_MS, as deployed by default), a burst's first message starts its turn at once, so
// its first words come as soon as from a bot that never waits. A second message within the
// quiet window abandons that early start: its model call is stopped and charged, nothing of it
// reaches the chat as a message, and the burst gets one answer that saw every message. The
// contract: one answer per burst, at most one abandoned early start.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, uniqueId, sleep, ADMIN_TOKEN } from "../support/stack.js";

/** The private chat's quiet window with nothing learnt (`core::chat::debounce::PRIVATE_QUIET_MS`). */
const PRIVATE_QUIET_MS = 400;

let s;
before(async () => {
  s = await startStack({ vars: { DEBOUNCE_MS: "", DRAFT_INTERVAL_MS: "200" } });
});
after(async () => {
  await s?.close();
});

const drafts = (chat) => s.tg.calls("sendMessageDraft", chat).filter((r) => r.draft !== undefined);

async function post(update) {
  const r = await s.webhook(update);
  assert.equal(r.status, 200);
  return Date.now();
}

const turnsOf = (uid) => s.sql("SELECT turn_id, status, error FROM turns WHERE chat_id = ? ORDER BY created_at", uid);

test("a lone private message calls the model at once, before its quiet window is over; one answer", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "Hello there, nice to meet you.", streamMs: 300 }]);
  const sent = Date.now();
  await post(privateText(uid, "hello"));
  await s.gemini.waitFor(() => s.gemini.calls(uid).length === 1, 10_000, "the model call");
  const call = s.gemini.calls(uid)[0];
  assert.ok(call.at - sent < PRIVATE_QUIET_MS, `the model was asked ${call.at - sent} ms after sending, within the ${PRIVATE_QUIET_MS} ms window`);
  await s.tg.waitFor(() => s.finalSent(uid).length === 1, 20_000, "the answer");
  await sleep(800);
  assert.deepEqual(s.finalSent(uid).map((r) => r.text), ["Hello there, nice to meet you."]);
  assert.equal(s.gemini.calls(uid).length, 1, "a lone message costs one call, as before");
  const text = drafts(uid).find((r) => r.draft !== "");
  assert.ok(text && text.at < s.finalSent(uid)[0].at, "its first words showed as a draft before the final message");
  assert.deepEqual((await turnsOf(uid)).map((t) => t.status), ["done"]);
});

test("a burst: at most one abandoned early start, charged; one final answer that saw every message; nothing of the early start sent", async () => {
  const uid = uniqueId();
  // The early start streams slowly: it is cut mid-stream by the second message.
  s.gemini.script(uid, [{ text: "EARLY half answer that must never be sent as a message, only shown while it streams.", streamMs: 3000 }, { text: "One answer to the whole burst." }]);
  for (let i = 1; i <= 5; i++) {
    await post(privateText(uid, `burst part ${i}`));
    await sleep(100);
  }
  await s.tg.waitFor(() => s.finalSent(uid).length >= 1, 30_000, "the burst's answer");
  await sleep(1500);
  const calls = s.gemini.calls(uid);
  assert.ok(calls.length <= 2, `one answer per burst, at most one abandoned early start: ${calls.length} calls`);
  assert.equal(calls.length, 2, "the first message started at once, and was abandoned");
  const last = JSON.stringify(calls.at(-1).body.contents);
  for (let i = 1; i <= 5; i++) assert.match(last, new RegExp(`burst part ${i}`), "the answer saw every message");
  assert.deepEqual(s.finalSent(uid).map((r) => r.text), ["One answer to the whole burst."], "one final message");
  assert.ok(!s.tg.calls("sendMessage", uid).some((r) => /EARLY/.test(JSON.stringify(r.body))), "nothing of the early start was sent as a message");
  // Whatever draft the early start showed was taken back before the burst's own call.
  const before = drafts(uid).filter((r) => r.at < calls[1].at);
  assert.equal(before.at(-1).draft, "", "the placeholder, not a half answer, stays up while the burst's turn waits");
  // The abandoned start is a stale turn whose call is recorded with its tokens.
  const turns = await turnsOf(uid);
  assert.deepEqual(turns.map((t) => t.status), ["stale", "done"]);
  assert.match(turns[0].error, /abandoned early start/);
  const rows = await s.sql("SELECT turn_id, prompt_tokens, candidates_tokens, total_tokens, error FROM calls WHERE chat_id = ? ORDER BY created_at, n", uid);
  assert.equal(rows.length, 2);
  const abandoned = rows.find((r) => r.turn_id === turns[0].turn_id);
  assert.ok(abandoned.prompt_tokens > 0 && abandoned.total_tokens >= abandoned.prompt_tokens, `the abandoned call's tokens are charged: ${JSON.stringify(abandoned)}`);
  assert.match(abandoned.error, /abandoned/);
  // The costs API (what the budgets and /usage add up) counts them.
  const r = await s.fetch(`/api/v1/costs?period=today&chat_id=${uid}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  const mine = (await r.json()).rows.find((row) => row.chat_id === uid);
  assert.equal(mine.prompt_tokens, rows.reduce((a, x) => a + x.prompt_tokens, 0), "the costs include the abandoned start");
});

test("an abandoned early start runs no writing tool: its schedule_message never happens", async () => {
  const uid = uniqueId();
  // The early start asks at once for a reminder; the second message comes within the window.
  s.gemini.script(uid, [
    { calls: [{ name: "schedule_message", args: { text: "EARLY reminder", in_minutes: 60 } }] },
    { text: "Noted both." },
  ]);
  await post(privateText(uid, "remind me in an hour"));
  await sleep(120);
  await post(privateText(uid, "actually, never mind"));
  await s.tg.waitFor(() => s.finalSent(uid).length >= 1, 30_000, "the answer");
  await sleep(1000);
  assert.equal(s.gemini.calls(uid).length, 2);
  const schedules = await s.sql("SELECT id FROM schedules WHERE chat_id = ?", uid);
  assert.equal(schedules.length, 0, "the early start's tool did not run before its window was over");
  assert.deepEqual(s.finalSent(uid).map((r) => r.text), ["Noted both."]);
  assert.deepEqual((await turnsOf(uid)).map((t) => t.status), ["stale", "done"]);
});

test("an instance reset during an early start: one answer, nothing twice", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "Cut off.", delayMs: 1500 }, { text: "Answered once after the reset." }]);
  await post(privateText(uid, "a question"));
  await s.gemini.waitFor(() => s.gemini.calls(uid).length === 1, 10_000, "the early start's call");
  await s.restart(); // the instance running the early start dies; storage stays
  await s.tg.waitFor(() => s.finalSent(uid).length >= 1, 40_000, "the answer after the reset");
  await sleep(2000);
  assert.deepEqual(s.finalSent(uid).map((r) => r.text), ["Answered once after the reset."], "exactly one final message");
  assert.equal(s.gemini.calls(uid).length, 2, "the turn was taken over once");
});
