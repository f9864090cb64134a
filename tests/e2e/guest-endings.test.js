// A guest placeholder always ends as an answer or an apology (issue 47, item 12): a guest job
// that runs out of attempts (dead-lettered) edits its apology in; a placeholder whose answer
// never went out (a crash between the placeholder's record and its job) is ended by the cron.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, uniqueId, sleep, TOKEN } from "../support/stack.js";

const ALLOWED_GROUP = -1009000000003;
const FAILED_TEXT = "Sorry, I couldn't answer this one. Please try again.";
const LATE_TEXT = "Sorry, this took too long. Please ask again.";
let s;
before(async () => {
  s = await startStack({ vars: { DM_POLICY: "open", GROUP_ALLOWLIST: String(ALLOWED_GROUP), RETRY_BASE_MS: "200" } });
  s.tg.setGuestMode(true);
});
after(async () => {
  await s?.close();
});

const inlineIdOf = (u) => s.tg.guestMessages(u.guest_message.chat.id).find((m) => m.query === u.guest_message.guest_query_id)?.inline_message_id;

test("a guest job whose edits keep failing is dead-lettered and its placeholder still ends with the apology, once", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "An answer that never gets through." }]);
  const fault = s.tg.fault({ method: "editMessageText", status: 500, times: 4 });
  const u = s.tg.guestMessage(ALLOWED_GROUP, uid, "@edge_test_bot hello?");
  await s.webhook(u);
  const inline = inlineIdOf(u);
  assert.ok(inline, "the placeholder went out");
  await s.tg.waitFor(() => s.tg.guestSent(inline).edits === 1, 60_000, "the apology after the dead letter");
  assert.equal(fault.times, 0, "four edits failed: the job ran out of attempts");
  assert.equal(s.tg.guestSent(inline).text, FAILED_TEXT);
  const dead = async () => (await s.sql("SELECT COUNT(*) AS n FROM failures WHERE kind = 'dead_letter' AND job_key = ?", `guest:${u.guest_message.guest_query_id}`))[0].n;
  for (let i = 0; i < 50 && (await dead()) === 0; i++) await sleep(100);
  assert.equal(await dead(), 1, "the dead letter is recorded for the operator");
  await sleep(1500);
  assert.equal(s.tg.guestSent(inline).edits, 1);
});

test("a placeholder whose job was never queued (a crash after its record) is ended by the cron with an apology, once", async () => {
  const uid = uniqueId();
  const u = s.tg.guestMessage(ALLOWED_GROUP, uid, "@edge_test_bot are you there?");
  const qid = u.guest_message.guest_query_id;
  // What the webhook did before the crash: the placeholder answered and recorded, nothing queued.
  const r = await fetch(`${s.tg.base}/bot${TOKEN}/answerGuestQuery`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ guest_query_id: qid, result: { type: "article", id: "answer", title: "Answer", input_message_content: { message_text: "Thinking…", parse_mode: "HTML" } } }),
  });
  const inline = (await r.json()).result.inline_message_id;
  const at = Date.now() - 16 * 60_000;
  await s.sql(
    "INSERT INTO outbox (key, step_key, conv, chat_id, method, body, status, created_at, sent_at) VALUES (?, ?, ?, ?, 'answerGuestQuery', ?, 'sent', ?, ?)",
    `guest:${qid}/placeholder/0`, `guest:${qid}/placeholder`, String(uid), uid, inline, at, at,
  );
  assert.equal(s.tg.guestSent(inline).text, "Thinking…");
  await s.scheduled();
  await s.tg.waitFor(() => s.tg.guestSent(inline).edits === 1, 15_000, "the apology");
  assert.equal(s.tg.guestSent(inline).text, LATE_TEXT);
  await s.scheduled();
  await sleep(800);
  assert.equal(s.tg.guestSent(inline).edits, 1, "ended once");
});
