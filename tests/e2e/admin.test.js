// The admin API: bearer token, status, sessions and history (paged), reset, costs, memories,
// operator notes, pairings, user access, a chat's model, notify, and synchronous chat.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, uniqueId, sleep, ADMIN_TOKEN } from "../support/stack.js";
import { promptText } from "../support/prompt.js";

let s;
before(async () => {
  s = await startStack();
});
after(async () => {
  await s?.close();
});

async function chatWith(uid, text) {
  const n = s.tg.sent(uid).length;
  await s.webhook(privateText(uid, text));
  await s.tg.waitFor(() => s.tg.sent(uid).length === n + 1, 10_000, `the reply to ${text}`);
}

test("without the right bearer token: 401 and nothing else", async () => {
  for (const token of [null, "wrong", ADMIN_TOKEN + "x", ""]) {
    const r = await s.api("GET", "status", undefined, token);
    assert.equal(r.status, 401);
    assert.equal(r.json, "unauthorized");
  }
  const r = await s.api("POST", "notify", { chat_id: 1, text: "hi" }, "nope");
  assert.equal(r.status, 401);
  await sleep(200);
  assert.equal(s.tg.calls("sendMessage", 1).length, 0);
});

test("status, sessions, history, reset", async () => {
  const a = uniqueId();
  const b = uniqueId();
  await chatWith(a, "hello from a");
  await chatWith(b, "hello from b");
  await chatWith(a, "again from a");
  await sleep(500); // the last reply is stored just after Telegram accepts it
  const st = await s.api("GET", "status");
  assert.equal(st.status, 200);
  assert.equal(st.json.version, "0.1.0");
  assert.ok(st.json.counts.messages >= 6);
  const page1 = await s.api("GET", "sessions?limit=1");
  assert.equal(page1.json.sessions.length, 1);
  assert.ok(page1.json.next_cursor);
  const page2 = await s.api("GET", `sessions?limit=1&cursor=${encodeURIComponent(page1.json.next_cursor)}`);
  assert.notEqual(page2.json.sessions[0].conv, page1.json.sessions[0].conv);
  const hist = await s.api("GET", `sessions/${a}/messages?limit=2`);
  assert.deepEqual(hist.json.messages.map((m) => m.text), ["again from a", "Echo: again from a"]);
  const older = await s.api("GET", `sessions/${a}/messages?limit=2&before=${hist.json.next_before}`);
  assert.deepEqual(older.json.messages.map((m) => m.text), ["hello from a", "Echo: hello from a"]);
  const reset = await s.api("POST", `sessions/${a}/reset`);
  assert.equal(reset.json.reset, true);
  await chatWith(a, "fresh start");
  const req = s.gemini.calls(a).at(-1);
  const text = req.body.contents.flatMap((c) => c.parts).map((p) => p.text ?? "").join("\n");
  assert.doesNotMatch(text, /again from a/);
});

test("costs per chat, day and model, priced", async () => {
  const uid = uniqueId();
  await chatWith(uid, "how much do I cost?");
  for (const period of ["today", "week", "all"]) {
    const r = await s.api("GET", `costs?period=${period}`);
    assert.equal(r.status, 200);
    const row = r.json.rows.find((x) => x.chat_id === uid);
    assert.ok(row, period);
    assert.equal(row.model, "gemini-3.8-flash");
    assert.ok(row.prompt_tokens > 0 && row.cost_usd > 0);
    assert.equal(row.day, new Date().toISOString().slice(0, 10));
  }
  assert.equal((await s.api("GET", "costs?period=year")).status, 400);
});

test("operator notes are shown first; memories are listed and deleted", async () => {
  const uid = uniqueId();
  const note = await s.api("POST", "notes", { chat_id: uid, about_user_id: uid, content: "Operator says: call them Captain" });
  assert.equal(note.status, 200);
  await s.env.DB.prepare("INSERT INTO memories (kind, chat_id, about_user_id, entity, attribute, value, created_at, updated_at) VALUES ('fact', ?, ?, 'me', 'color', 'teal', 0, 0)").bind(uid, uid).run();
  await chatWith(uid, "hi");
  const sys = promptText(s.gemini.calls(uid).at(-1));
  assert.ok(sys.indexOf("call them Captain") < sys.indexOf("color = teal"), "curated notes come first");
  const list = await s.api("GET", `memories?user_id=${uid}`);
  assert.equal(list.json.memories.length, 2);
  const m = list.json.memories.find((x) => x.id.startsWith("m"));
  assert.equal((await s.api("DELETE", `memories/${m.id}`)).status, 200);
  assert.equal((await s.api("DELETE", `memories/${m.id}`)).status, 404);
  const all = await s.api("DELETE", `memories?user_id=${uid}`);
  assert.equal(all.json.deleted, 1);
  assert.equal((await s.api("GET", `memories?user_id=${uid}`)).json.memories.length, 0);
});

test("pairings are approved through the API; users can be blocked", async () => {
  const uid = uniqueId();
  await s.env.DB.prepare("INSERT INTO pairings (code, user_id, chat_id, name, created_at, expires_at) VALUES ('ABCD2345', ?, ?, 'P', ?, ?)").bind(uid, uid, Date.now(), Date.now() + 60_000).run();
  const list = await s.api("GET", "pairings");
  assert.ok(list.json.pairings.some((p) => p.code === "ABCD2345"));
  const ok = await s.api("POST", "pairings/abcd-2345/approve");
  assert.deepEqual(ok.json, { approved: true, user_id: uid });
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the welcome");
  assert.equal((await s.api("POST", "pairings/ABCD2345/approve")).status, 404, "codes are single-use");
  const blocked = uniqueId();
  assert.equal((await s.api("PUT", `users/${blocked}/access`, { access: "blocked" })).status, 200);
  assert.equal((await s.api("PUT", `users/${blocked}/access`, { access: "maybe" })).status, 400);
  await s.webhook(privateText(blocked, "hello?"));
  await sleep(1000);
  assert.equal(s.gemini.calls(blocked).length, 0);
});

test("a chat's model can be set; notify sends as the bot, once per idempotency key", async () => {
  const uid = uniqueId();
  await chatWith(uid, "hi");
  assert.equal((await s.api("PUT", `chats/${uid}/model`, { model: "gemini-3.6-flash" })).status, 200);
  assert.equal((await s.api("PUT", "chats/999/model", { model: "x" })).status, 404);
  await chatWith(uid, "again");
  assert.equal(s.gemini.calls(uid).at(-1).model, "gemini-3.6-flash");
  const n1 = await s.api("POST", "notify", { chat_id: uid, text: "Maintenance at **noon**", idempotency_key: "m1" });
  const n2 = await s.api("POST", "notify", { chat_id: uid, text: "Maintenance at **noon**", idempotency_key: "m1" });
  assert.equal(n1.json.sent, true);
  assert.deepEqual(n2.json.message_ids, n1.json.message_ids);
  assert.equal(s.tg.sent(uid).filter((t) => t === "Maintenance at noon").length, 1);
  assert.equal((await s.api("POST", "notify", { chat_id: uid })).status, 400);
});

test("chat: text in, the bot's reply out, nothing sent to Telegram", async () => {
  const chatId = 2 ** 52 + uniqueId(); // the API conversation range
  const before = s.tg.requests.length;
  const r = await s.api("POST", "chat", { chat_id: chatId, text: "integration says hello", name: "CRM" });
  assert.equal(r.status, 200);
  assert.equal(r.json.reply, "Echo: integration says hello");
  const r2 = await s.api("POST", "chat", { chat_id: chatId, text: "second" });
  assert.equal(r2.json.reply, "Echo: second");
  const req = s.gemini.requests.at(-1);
  const text = req.body.contents.flatMap((c) => c.parts).map((p) => p.text ?? "").join("\n");
  assert.match(text, /integration says hello/, "the conversation continues");
  assert.equal(s.tg.requests.slice(before).filter((x) => x.body.chat_id === chatId).length, 0);
  const hist = await s.api("GET", `sessions/${chatId}/messages`);
  assert.deepEqual(hist.json.messages.map((m) => m.role), ["user", "bot", "user", "bot"]);
  assert.equal((await s.api("POST", "chat", { text: "no chat id" })).status, 400);
});
