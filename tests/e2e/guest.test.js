// Guest mode (issue 36, part 5; Bot API 10.0): with supports_guest_queries in getMe, a person
// summons the bot into a chat it is not a member of. The `guest_message` is answered once with
// answerGuestQuery: a placeholder at once, the model's answer edited in through the returned
// inline_message_id. The answer sees the update alone (no history, no memories, no tools), the
// caller's access and budgets apply (GROUP_ALLOWLIST to the host chat), and nothing of the host
// chat is stored.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, uniqueId, sleep, TOKEN } from "../support/stack.js";
import { GUEST_QUERY_WINDOW_MS } from "../../tools/telegram-emulator.js";

const ALLOWED_GROUP = -1009000000001;
let s;
before(async () => {
  s = await startStack({ vars: { DM_POLICY: "open", GROUP_ALLOWLIST: String(ALLOWED_GROUP), USER_TURNS_PER_HOUR: "5" } });
});
after(async () => {
  await s?.close();
});

const answers = () => s.tg.requests.filter((r) => r.method === "answerGuestQuery");
const answersTo = (u) => answers().filter((r) => r.body.guest_query_id === u.guest_message.guest_query_id);
const editsOf = (id) => s.tg.requests.filter((r) => r.method === "editMessageText" && r.body.inline_message_id === id);
const inlineIdOf = (u) => s.tg.guestMessages(u.guest_message.chat.id).find((m) => m.query === u.guest_message.guest_query_id)?.inline_message_id;

test("guest mode follows getMe: off, a guest message is acknowledged and ignored; on, it is answered", async () => {
  const u = s.tg.guestMessage(ALLOWED_GROUP, uniqueId(), "@edge_test_bot hello");
  assert.equal((await s.webhook(u)).status, 200);
  await sleep(800);
  assert.equal(answersTo(u).length, 0);
  // BotFather's switch turned on; a new isolate reads getMe again.
  s.tg.setGuestMode(true);
  await s.restart();
  const on = s.tg.guestMessage(ALLOWED_GROUP, uniqueId(), "@edge_test_bot hello");
  assert.equal((await s.webhook(on)).status, 200);
  assert.equal(answersTo(on).length, 1);
  assert.equal(answersTo(on)[0].text, "Thinking…");
});

test("a model error and a failed edit are retried by the queued job: the answer is edited in once", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ status: 503 }, { text: "Second time lucky." }]);
  const fault = s.tg.fault({ method: "editMessageText", status: 500 });
  const u = s.tg.guestMessage(ALLOWED_GROUP, uid, "@edge_test_bot retry please");
  await s.webhook(u);
  const inline = inlineIdOf(u);
  await s.tg.waitFor(() => s.tg.guestSent(inline).edits === 1, 30_000, "the answer after retries");
  assert.equal(fault.times, 0, "the first edit failed");
  assert.equal(s.tg.guestSent(inline).text, "Second time lucky.");
  await sleep(1500);
  assert.equal(s.tg.guestSent(inline).edits, 1);
  assert.equal(answersTo(u).length, 1);
  assert.equal(s.gemini.calls(uid).length, 2, "the 503 and the answer: a failed edit does not ask the model again");
  const rows = await s.sql("SELECT status, body FROM outbox WHERE key = ?", `guest:${u.guest_message.guest_query_id}/answer/0`);
  assert.deepEqual(rows, [{ status: "sent", body: "" }], "the answer is not kept once sent");
});

test("a guest query is answered once from the update alone: placeholder, then the answer edited in; nothing of the host chat stored", async () => {
  const uid = uniqueId();
  // The caller's own private chat has history the guest answer must not see.
  s.gemini.script(uid, [{ text: "Noted." }]);
  await s.webhook(privateText(uid, "my secret word is PINEAPPLE"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 1, 15_000, "the private answer");
  s.gemini.script(uid, [{ text: "It is **4**." }]);
  const u = s.tg.guestMessage(ALLOWED_GROUP, uid, "@edge_test_bot what is 2+2?", { replyTo: "we were counting apples" });
  const sentAt = Date.now();
  assert.equal((await s.webhook(u)).status, 200);
  await s.tg.waitFor(() => answersTo(u).some((r) => r.text), 5_000, "the placeholder");
  const [placeholder] = answersTo(u);
  assert.equal(placeholder.text, "Thinking…");
  assert.ok(placeholder.at - sentAt < GUEST_QUERY_WINDOW_MS);
  const inline = inlineIdOf(u);
  await s.tg.waitFor(() => s.tg.guestSent(inline).edits === 1, 15_000, "the answer edited in");
  assert.equal(s.tg.guestSent(inline).text, "It is 4.");
  assert.equal(s.tg.guestSent(inline).html, "It is <b>4</b>.");
  // What the model got: the message and what it replies to, nothing else.
  const calls = s.gemini.calls(uid);
  const req = calls.at(-1).body;
  const all = JSON.stringify(req);
  assert.match(all, /what is 2\+2/);
  assert.match(all, /we were counting apples/);
  assert.doesNotMatch(all, /PINEAPPLE/, "no history of any chat");
  assert.equal(req.contents.length, 1, "one turn: no history");
  assert.ok(!req.tools?.length && !req.toolConfig, "no tools offered, so none that write");
  assert.doesNotMatch(all, /memor(y|ies) about/i);
  // Nothing of the host chat stored; the caller is charged.
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM messages WHERE chat_id = ?", ALLOWED_GROUP))[0].n, 0);
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM outbox WHERE chat_id = ? OR body LIKE ?", ALLOWED_GROUP, `%${ALLOWED_GROUP}%`))[0].n, 0);
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM chats WHERE chat_id = ?", ALLOWED_GROUP))[0].n, 0);
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM calls WHERE chat_id = ? AND purpose = 'guest'", uid))[0].n, 1, "the usage record is the caller's");
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM charges WHERE user_id = ?", uid))[0].n, 2, "the private message and the guest call");
  // Telegram redelivers the update: nothing goes twice, no second model call.
  await s.webhook(u);
  await sleep(2500);
  assert.equal(answersTo(u).length, 1);
  assert.equal(editsOf(inline).length, 1);
  assert.equal(s.gemini.calls(uid).length, calls.length);
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM charges WHERE user_id = ?", uid))[0].n, 2, "charged once");
});

test("a slow model: the placeholder goes out at once, within Telegram's window, and the answer comes later", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "Slow but here.", delayMs: 3000 }]);
  const u = s.tg.guestMessage(uid + 7, uid, "@edge_test_bot take your time", { chatType: "private" });
  const sentAt = Date.now();
  assert.equal((await s.webhook(u)).status, 200);
  const acked = Date.now();
  assert.ok(acked - sentAt < 2500, `the webhook answered in ${acked - sentAt} ms`);
  const [placeholder] = answersTo(u);
  assert.ok(placeholder && placeholder.text === "Thinking…", "the placeholder was answered before the webhook returned");
  const inline = inlineIdOf(u);
  assert.equal(s.tg.guestSent(inline).edits, 0, "the answer is not there yet");
  await s.tg.waitFor(() => s.tg.guestSent(inline).edits === 1, 20_000, "the slow answer");
  assert.equal(s.tg.guestSent(inline).text, "Slow but here.");
  assert.ok(editsOf(inline)[0].at - sentAt >= 3000);
});

test("refused callers get one short answer and no model call: blocked, over budget, a group off GROUP_ALLOWLIST", async () => {
  const blocked = uniqueId();
  await s.sql("INSERT INTO users (user_id, name, access, updated_at) VALUES (?, 'B', 'blocked', 0)", blocked);
  const busy = uniqueId();
  for (let i = 0; i < 5; i++) await s.sql("INSERT INTO budget_charges (chat_id, user_id, created_at) VALUES (?, ?, ?)", busy, busy, Date.now());
  const stranger = uniqueId();
  const cases = [
    [s.tg.guestMessage(ALLOWED_GROUP, blocked, "@edge_test_bot hi"), /can't answer here/],
    [s.tg.guestMessage(ALLOWED_GROUP, busy, "@edge_test_bot hi"), /this hour/],
    [s.tg.guestMessage(-1009000000002, stranger, "@edge_test_bot hi"), /can't answer here/],
  ];
  for (const [u, text] of cases) {
    assert.equal((await s.webhook(u)).status, 200);
    assert.equal(answersTo(u).length, 1);
    assert.match(answersTo(u)[0].text, text);
  }
  await sleep(1500);
  for (const uid of [blocked, busy, stranger]) assert.equal(s.gemini.calls(uid).length, 0);
  assert.equal(s.tg.requests.filter((r) => r.method === "editMessageText" && cases.some(([u]) => r.body.inline_message_id === inlineIdOf(u))).length, 0);
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM outbox WHERE chat_id IN (?, ?, ?)", blocked, busy, stranger))[0].n, 0, "nothing stored");
});

test("an expired guest query: Telegram refuses the placeholder, no model call, nothing edited", async () => {
  const uid = uniqueId();
  const u = s.tg.guestMessage(ALLOWED_GROUP, uid, "@edge_test_bot late?", { agoMs: GUEST_QUERY_WINDOW_MS + 1000 });
  assert.equal((await s.webhook(u)).status, 200);
  assert.equal(answersTo(u).length, 1);
  assert.equal(answersTo(u)[0].text, undefined, "refused");
  await sleep(1500);
  assert.equal(s.gemini.calls(uid).length, 0);
  const rows = await s.sql("SELECT status, error FROM outbox WHERE key LIKE ?", `guest:${u.guest_message.guest_query_id}/%`);
  assert.equal(rows.length, 1);
  assert.equal(rows[0].status, "failed");
  assert.match(rows[0].error, /too old/);
});

test("the fake Telegram refuses as Telegram does: a second answer, bad results, edits of unknown or unchanged messages", async () => {
  const call = async (method, body) => (await fetch(`${s.tg.base}/bot${TOKEN}/${method}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })).json();
  const u = s.tg.guestMessage(ALLOWED_GROUP, uniqueId(), "x");
  const q = u.guest_message.guest_query_id;
  const article = (extra) => ({ type: "article", id: "a", title: "t", input_message_content: { message_text: "hi" }, ...extra });
  assert.match((await call("answerGuestQuery", { guest_query_id: q, result: article({ id: "x".repeat(65) }) })).description, /RESULT_ID_INVALID/);
  assert.match((await call("answerGuestQuery", { guest_query_id: q, result: article({ input_message_content: undefined }) })).description, /input_message_content/);
  assert.match((await call("answerGuestQuery", { guest_query_id: q, result: article({ input_message_content: { message_text: "y".repeat(4097) } }) })).description, /MESSAGE_TOO_LONG/);
  const first = await call("answerGuestQuery", { guest_query_id: q, result: article() });
  assert.equal(first.ok, true);
  const id = first.result.inline_message_id;
  assert.ok(id);
  const second = await call("answerGuestQuery", { guest_query_id: q, result: article() });
  assert.equal(second.error_code, 400);
  assert.equal(second.description, "Bad Request: query is too old and response timeout expired or query ID is invalid");
  assert.equal((await call("answerGuestQuery", { guest_query_id: "nope", result: article() })).error_code, 400);
  assert.match((await call("editMessageText", { inline_message_id: "nope", text: "z" })).description, /MESSAGE_ID_INVALID/);
  assert.match((await call("editMessageText", { inline_message_id: id, text: "hi" })).description, /message is not modified/);
  assert.match((await call("editMessageText", { inline_message_id: id, text: "z".repeat(4097) })).description, /MESSAGE_TOO_LONG/);
  const edited = await call("editMessageText", { inline_message_id: id, text: "<b>new</b>", parse_mode: "HTML" });
  assert.deepEqual(edited, { ok: true, result: true });
  assert.equal(s.tg.guestSent(id).text, "new");
});
