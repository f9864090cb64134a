// The flow of one message (the walking skeleton), end to end: webhook → D1 → chat object →
// debounce alarm → Gemini → sendMessage → D1, under workerd with the fakes.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, uniqueId, updateId, sleep, WEBHOOK_SECRET } from "../support/stack.js";
import { systemText, turnContext } from "../support/prompt.js";

let s;
before(async () => {
  s = await startStack();
});
after(async () => {
  await s?.close();
});

test("health answers", async () => {
  const r = await s.fetch("/health");
  assert.equal(r.status, 200);
  assert.equal((await r.json()).ok, true);
});

test("a DM gets a reply, and both sides are stored in D1", async () => {
  const uid = uniqueId();
  const r = await s.webhook(privateText(uid, "Hello there, bot!"));
  assert.equal(r.status, 200);
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the reply");
  assert.equal(s.tg.sent(uid)[0], "Echo: Hello there, bot!");
  await s.tg.waitFor(() => true);
  await sleep(200);
  const rows = await s.sql("SELECT role, text, turn_id FROM history WHERE chat_id = ? ORDER BY seq, apart", uid);
  assert.deepEqual(rows.map((r) => r.role), ["user", "bot"]);
  assert.equal(rows[0].text, "Hello there, bot!");
  assert.equal(rows[1].text, "Echo: Hello there, bot!");
  assert.ok(rows[1].turn_id, "the bot message names its turn");
  const calls = await s.sql("SELECT purpose, status, prompt_tokens FROM calls WHERE chat_id = ?", uid);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].status, 200);
  assert.ok(calls[0].prompt_tokens > 0, "usage is recorded");
});

test("the Gemini request carries the system instruction, the user's text, and the key only in a header", async () => {
  const uid = uniqueId();
  await s.webhook(privateText(uid, "What is the capital of Peru?", { name: "Ana" }));
  await s.gemini.waitFor(() => s.gemini.calls(uid).length === 1, 10_000, "the model call");
  const req = s.gemini.calls(uid)[0];
  // A private chat's answer is streamed (issue 19): streamGenerateContent with alt=sse.
  assert.equal(req.path, "/v1beta/models/gemini-3.8-flash:streamGenerateContent");
  assert.equal(req.query, "?alt=sse", "no key in the URL");
  assert.equal(req.headers["x-goog-api-key"], "test-gemini-key");
  const system = systemText(req);
  assert.match(system, /You are Edge, an AI agent that lives in Telegram/);
  assert.match(turnContext(req), /## Situation\nAnswer message #\d+/);
  assert.ok(!req.body.contents.some((c) => c.role === "system"), "no system role in contents");
  const text = req.body.contents.flatMap((c) => c.parts).map((p) => p.text).join("\n");
  assert.match(text, /What is the capital of Peru\?/);
  assert.match(text, new RegExp(`\\[meta\\] message_id=\\d+ user_id=${uid} name="Ana"`));
  assert.ok(req.body.tools[0].functionDeclarations.some((d) => d.name === "send_message"));
});

test("a redelivered update gets no second reply", async () => {
  const uid = uniqueId();
  const update = privateText(uid, "only once please");
  assert.equal((await s.webhook(update)).status, 200);
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the first reply");
  for (let i = 0; i < 3; i++) assert.equal((await s.webhook(update)).status, 200);
  await sleep(1500);
  assert.equal(s.tg.sent(uid).length, 1);
  assert.equal(s.gemini.calls(uid).length, 1);
  const rows = await s.sql("SELECT COUNT(*) AS n FROM messages WHERE chat_id = ? AND role = 'user'", uid);
  assert.equal(rows[0].n, 1);
});

test("a wrong or missing secret gets 401 and nothing is stored", async () => {
  const uid = uniqueId();
  const update = privateText(uid, "let me in");
  for (const secret of ["wrong-secret", null, WEBHOOK_SECRET + "x", ""]) {
    const r = await s.webhook(update, { secret });
    assert.equal(r.status, 401, `secret ${secret}`);
  }
  await sleep(500);
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM updates WHERE update_id = ?", update.update_id))[0].n, 0);
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM messages WHERE chat_id = ?", uid))[0].n, 0);
  assert.equal(s.tg.sent(uid).length, 0);
});

test("malformed JSON and an unknown update kind get 200 and nothing else", async () => {
  const before = (await s.sql("SELECT COUNT(*) AS n FROM updates"))[0].n;
  const sentBefore = s.tg.requests.length;
  for (const raw of ["{not json", "[]", "null", '{"update_id": "x"}', '{"update_id": 5, "message": {"text": "no chat"}}']) {
    const r = await s.webhook(null, { raw });
    assert.equal(r.status, 200, raw);
  }
  const unknown = { update_id: updateId(), new_update_kind: { some_field_idk: 1 } };
  assert.equal((await s.webhook(unknown)).status, 200);
  await sleep(500);
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM updates"))[0].n, before);
  assert.equal(s.tg.requests.length, sentBefore, "nothing was sent");
});

test("three messages 100 ms apart give one Gemini call that contains all three", async () => {
  const uid = uniqueId();
  for (const text of ["first part", "second part", "third part"]) {
    await s.webhook(privateText(uid, text));
    await sleep(100);
  }
  await s.tg.waitFor(() => s.tg.sent(uid).length >= 1, 10_000, "the reply");
  await sleep(800);
  const calls = s.gemini.calls(uid);
  assert.equal(calls.length, 1);
  const text = calls[0].body.contents.flatMap((c) => c.parts).map((p) => p.text).join("\n");
  for (const t of ["first part", "second part", "third part"]) assert.match(text, new RegExp(t));
  assert.equal(s.tg.sent(uid).length, 1);
});
