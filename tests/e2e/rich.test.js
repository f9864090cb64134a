// Rich answers (issue 36, part 1): in a private chat an answer with a table, maths or a long
// structure of headings goes as one rich message (sendRichMessage, drafted with
// sendRichMessageDraft) within the rich limits; everything else, groups, `/rich off` and
// RICH_MESSAGES=off stay today's HTML messages; Telegram refusing the method or a payload gets
// today's HTML message, exactly once. The fake Telegram enforces the rich tags and limits.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, groupText, mention, cmd, uniqueId, sleep } from "../support/stack.js";

let s;
before(async () => {
  s = await startStack({ vars: { DRAFT_INTERVAL_MS: "200", RETRY_BASE_MS: "300" } });
  s.gemini.streamMs = 1200;
});
after(async () => {
  await s?.close();
});

const TABLE = "Here are the prices:\n\n| item | price |\n|---|---|\n| tea & cake | 3 € |\n| <b>coffee</b> | 2 € |\n\nEnjoy!";
const rich = (chat) => s.tg.calls("sendRichMessage", chat);
const richOk = (chat) => rich(chat).filter((r) => r.rich !== undefined);
const systemOf = (call) => JSON.stringify(call.body.systemInstruction ?? "");

async function exchange(uid, text, answer) {
  s.gemini.script(uid, [{ text: answer }]);
  const before = s.tg.requests.length;
  await s.webhook(privateText(uid, text));
  await s.tg.waitFor(() => s.tg.requests.slice(before).some((r) => (r.method === "sendMessage" || r.method === "sendRichMessage") && r.text !== undefined), 20_000, "the answer");
  await sleep(800);
}

test("a table answer in a private chat is one rich message, drafted rich; the model was told about tables", async () => {
  const uid = uniqueId();
  await exchange(uid, "what does it cost?", TABLE);
  const sent = richOk(uid);
  assert.equal(sent.length, 1, "one rich message");
  assert.equal(s.finalSent(uid).length, 0, "no ordinary message besides");
  const body = sent[0].body;
  assert.equal(body.rich_message.skip_entity_detection, true);
  assert.match(body.rich_message.html, /<table><tr><th>item<\/th><th>price<\/th><\/tr><tr><td>tea &amp; cake<\/td>/);
  assert.match(body.rich_message.html, /&lt;b&gt;coffee&lt;\/b&gt;/, "raw HTML the model wrote stays text");
  assert.equal(body.link_preview_options, undefined, "sendRichMessage has no such field");
  const drafts = s.tg.calls("sendRichMessageDraft", uid).filter((r) => r.draft !== undefined);
  assert.ok(drafts.length >= 1, "the answer streamed in as a rich draft");
  assert.match(systemOf(s.gemini.calls(uid)[0]), /Rich answers/);
  const [row] = await s.sql("SELECT method, status FROM outbox WHERE chat_id = ?", uid);
  assert.deepEqual(row, { method: "sendRichMessage", status: "sent" });
  const [stored] = await s.sql("SELECT text FROM history WHERE chat_id = ? AND role = 'bot'", uid);
  assert.match(stored.text, /\| tea & cake \| 3 € \|/, "history keeps the answer's own Markdown");
});

test("an answer without a table stays an ordinary message", async () => {
  const uid = uniqueId();
  await exchange(uid, "hi", "Hello **there**, tea costs $3 and cake $5.");
  assert.equal(rich(uid).length, 0);
  assert.equal(s.tg.calls("sendRichMessageDraft", uid).length, 0);
  assert.deepEqual(s.finalSent(uid).map((r) => r.text), ["Hello there, tea costs $3 and cake $5."]);
});

test("/rich off: tables come as today's monospace message and the model is not told; /rich on brings them back", async () => {
  const uid = uniqueId();
  await s.webhook(cmd(uid, "/rich off"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the command's reply");
  assert.match(s.tg.sent(uid)[0], /Rich answers off/);
  await exchange(uid, "prices?", TABLE);
  assert.equal(rich(uid).length, 0, "no rich message");
  assert.equal(s.tg.calls("sendRichMessageDraft", uid).length, 0, "no rich draft");
  const last = s.finalSent(uid).at(-1);
  assert.match(last.body.text, /<pre>/, "the table as aligned monospace");
  assert.doesNotMatch(systemOf(s.gemini.calls(uid).at(-1)), /Rich answers/);
  await s.webhook(cmd(uid, "/rich on"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 3, 10_000, "the second command's reply");
  await exchange(uid, "and now?", TABLE);
  assert.equal(richOk(uid).length, 1);
  const [u] = await s.sql("SELECT rich_off FROM users WHERE user_id = ?", uid);
  assert.equal(u.rich_off, 0);
});

test("in a group a table answer stays an ordinary message (one person's setting cannot speak for every client)", async () => {
  const chat = -1000000000000 - uniqueId();
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: TABLE }]);
  const t = "@edge_test_bot prices?";
  await s.webhook(groupText(chat, uid, t, { entities: mention(t, "edge_test_bot") }));
  await s.tg.waitFor(() => s.tg.sent(chat).length === 1, 15_000, "the group answer");
  assert.equal(rich(chat).length, 0);
  assert.doesNotMatch(systemOf(s.gemini.calls(uid)[0]), /Rich answers/);
});

test("a model-written link: the answer goes as today's message, previews off (a rich message cannot turn them off)", async () => {
  const uid = uniqueId();
  await exchange(uid, "prices?", `${TABLE}\n\nSource: [the shop](https://shop.example/prices)`);
  assert.equal(rich(uid).length, 0);
  const [m] = s.finalSent(uid);
  assert.deepEqual(m.body.link_preview_options, { is_disabled: true });
});

test("Telegram refusing the rich payload (over a limit): today's HTML message, exactly once", async () => {
  const uid = uniqueId();
  s.tg.setRich({ limits: { columns: 1 } });
  try {
    await exchange(uid, "prices?", TABLE);
  } finally {
    s.tg.setRich({ limits: { columns: 20 } });
  }
  const tried = rich(uid);
  assert.equal(tried.length, 1, "the rich message was tried once");
  assert.equal(tried[0].rich, undefined, "Telegram refused it");
  const final = s.finalSent(uid);
  assert.equal(final.length, 1, "one ordinary message");
  assert.match(final[0].body.text, /<pre>/);
  await sleep(500);
  assert.equal(s.finalSent(uid).length, 1, "and nothing more");
  const rows = await s.sql("SELECT key, method, status FROM sends WHERE chat_id = ? ORDER BY key", uid);
  assert.deepEqual(rows.map((r) => [r.method, r.status]), [["sendMessage", "sent"], ["sendRichMessage", "failed"]]);
});

test("a long rich answer is split at blocks within the rich limits; a refusal mid-way sends the rest as HTML, nothing twice", async () => {
  const uid = uniqueId();
  const para = (i) => `Paragraph ${i}: ` + "word ".repeat(900);
  const long = `| a | b |\n|---|---|\n| 1 | 2 |\n\n${Array.from({ length: 16 }, (_, i) => para(i)).join("\n\n")}`;
  // Three rich messages; Telegram refuses the second.
  s.tg.fault({ method: "sendRichMessage", chatId: uid, skip: 1, status: 400, description: "Bad Request: RICH_MESSAGE_TOO_MANY_BLOCKS" });
  s.gemini.script(uid, [{ text: long }]);
  await s.webhook(privateText(uid, "write a lot"));
  const shownNow = () => [...richOk(uid).map((r) => r.text), ...s.finalSent(uid).map((r) => r.text)].join("\n");
  await s.tg.waitFor(() => shownNow().includes("Paragraph 15:"), 40_000, "the whole answer");
  await sleep(1500);
  const sentRich = richOk(uid);
  assert.equal(sentRich.length, 1, "the first chunk as a rich message");
  assert.ok(sentRich[0].text.length <= 32768);
  assert.equal(rich(uid).length, 2, "the second tried once, refused, not again");
  const shown = [...sentRich.map((r) => r.text), ...s.finalSent(uid).map((r) => r.text)].join("\n");
  for (let i = 0; i < 16; i++) assert.equal(shown.split(`Paragraph ${i}:`).length - 1, 1, `paragraph ${i} once`);
  assert.ok(s.finalSent(uid).every((r) => [...r.text].length <= 4096));
});

test("a 5xx on the rich message is retried: one rich message in the end", async () => {
  const uid = uniqueId();
  s.tg.fault({ method: "sendRichMessage", chatId: uid, status: 500 });
  s.gemini.script(uid, [{ text: TABLE }]);
  await s.webhook(privateText(uid, "prices?"));
  await s.tg.waitFor(() => richOk(uid).length === 1, 20_000, "the retried rich message");
  await sleep(1000);
  assert.equal(richOk(uid).length, 1);
  assert.equal(rich(uid).length, 2);
  assert.equal(s.finalSent(uid).length, 0);
});

test("a Bot API server without the rich methods (404 method not found): today's message once, and the token is not taken for wrong", async () => {
  const uid = uniqueId();
  s.tg.setRich({ available: false });
  await exchange(uid, "prices?", TABLE);
  // The first rich call (the streamed draft's, here) was answered 404; nothing rich was tried
  // after it.
  const tried = [...rich(uid), ...s.tg.calls("sendRichMessageDraft", uid)];
  assert.equal(tried.length, 1, "tried once");
  assert.ok(s.tg.calls("sendMessageDraft", uid).some((r) => r.draft), "the answer still streamed, as an ordinary draft");
  const final = s.finalSent(uid);
  assert.equal(final.length, 1);
  assert.match(final[0].body.text, /<pre>/);
  // The isolate now knows: the next table answer goes straight as an ordinary message, and
  // ordinary answers keep working.
  const other = uniqueId();
  await exchange(other, "prices?", TABLE);
  assert.equal(rich(other).length + s.tg.calls("sendRichMessageDraft", other).length, 0, "not tried again for a while");
  assert.equal(s.finalSent(other).length, 1);
  await exchange(other, "hi", "Hello!");
  assert.equal(s.finalSent(other).at(-1).text, "Hello!");
});

test("sendRichMessage itself answered 404 method not found (after a rich draft went through): today's message, once", async () => {
  s.tg.setRich({ available: true });
  await s.restart(); // a new isolate: it has not heard the 404 of the test above
  const uid = uniqueId();
  s.tg.fault({ method: "sendRichMessage", chatId: uid, status: 404, description: "Not Found: method not found" });
  await exchange(uid, "prices?", TABLE);
  assert.ok(s.tg.calls("sendRichMessageDraft", uid).some((r) => r.draft !== undefined), "the rich draft went through");
  assert.equal(rich(uid).length, 1, "the rich message tried once");
  const final = s.finalSent(uid);
  assert.equal(final.length, 1, "one ordinary message");
  assert.match(final[0].body.text, /<pre>/);
  const [chat] = await s.sql("SELECT blocked_at FROM chats WHERE chat_id = ?", uid);
  assert.equal(chat?.blocked_at ?? null, null, "a missing method does not mark anything wrong");
});

test("RICH_MESSAGES=off: never rich, the model never told", async () => {
  const b = await startStack({ vars: { RICH_MESSAGES: "off" } });
  try {
    const uid = uniqueId();
    b.gemini.script(uid, [{ text: TABLE }]);
    await b.webhook(privateText(uid, "prices?"));
    await b.tg.waitFor(() => b.finalSent(uid).length === 1, 20_000, "the answer");
    await sleep(500);
    assert.equal(b.tg.calls("sendRichMessage", uid).length, 0);
    assert.equal(b.tg.calls("sendRichMessageDraft", uid).length, 0);
    assert.doesNotMatch(JSON.stringify(b.gemini.calls(uid)[0].body.systemInstruction), /Rich answers/);
  } finally {
    await b.close();
  }
});
