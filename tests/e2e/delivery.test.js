// Delivery that never mangles, loses or duplicates a reply, against a fake Telegram that
// enforces the real rules (HTML parser, 4096 limit, 429, 403).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, groupText, mention, uniqueId, sleep } from "../support/stack.js";

let s;
before(async () => {
  s = await startStack();
});
after(async () => {
  await s?.close();
});

function longAnswer() {
  let md = "# Trip plan\n\n";
  for (let i = 0; i < 45; i++) {
    md += `## Day ${i}\n\nWalk **${i * 3} km** with *friends* & family <3, then rest. See [map](https://maps.example/${i}).\n\n`;
    md += "```python\n";
    for (let j = 0; j < 5; j++) md += `print("day ${i} step ${j}: a < b && c > d")\n`;
    md += "```\n\n";
  }
  return md;
}

test("a 10,000-character answer with code arrives as valid chunks, each at most 4096, code blocks intact", async () => {
  const uid = uniqueId();
  const md = longAnswer();
  assert.ok(md.length > 10_000);
  s.gemini.script(uid, [{ text: md }]);
  await s.webhook(privateText(uid, "plan the trip"));
  await s.tg.waitFor(() => s.tg.calls("sendMessage", uid).length >= 3 && s.tg.sent(uid).length === s.tg.calls("sendMessage", uid).length, 15_000, "all chunks");
  await sleep(500);
  const calls = s.tg.calls("sendMessage", uid);
  assert.ok(calls.every((c) => c.text !== undefined), "Telegram accepted every chunk");
  for (const c of calls) {
    assert.ok([...c.text].length <= 4096);
    assert.equal(c.body.parse_mode, "HTML");
    assert.equal((c.body.text.match(/<pre>/g) ?? []).length, (c.body.text.match(/<\/pre>/g) ?? []).length);
  }
  const shown = calls.map((c) => c.text).join("\n");
  for (let i = 0; i < 45; i++) assert.match(shown, new RegExp(`Day ${i}\\b`));
  assert.equal((shown.match(/print\(/g) ?? []).length, 225, "no code line lost");
  assert.match(shown, /a < b && c > d/);
  const stored = await s.sql("SELECT COUNT(*) AS n FROM history WHERE chat_id = ? AND role = 'bot'", uid);
  assert.equal(stored[0].n, calls.length, "every chunk is stored as the bot's message");
});

test("Telegram refusing the HTML gets the chunk again as plain text, once", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "Some **bold** claim & a `snippet`" }]);
  s.tg.fault({ method: "sendMessage", chatId: uid, status: 400, description: 'Bad Request: can\'t parse entities: Unsupported start tag "foo" at byte offset 0' });
  await s.webhook(privateText(uid, "hi"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the plain-text reply");
  const calls = s.tg.calls("sendMessage", uid);
  assert.equal(calls.length, 2);
  assert.equal(calls[0].body.parse_mode, "HTML");
  assert.equal(calls[1].body.parse_mode, undefined);
  assert.equal(calls[1].body.text, "Some bold claim & a snippet");
  await sleep(300);
  const rows = await s.sql("SELECT status FROM sends WHERE chat_id = ?", uid);
  assert.deepEqual(rows, [{ status: "sent" }], "recorded as sent once");
});

test("a reply whose target is gone is sent without the reply", async () => {
  const chat = -1000000000000 - uniqueId();
  const uid = uniqueId();
  s.tg.fault({ method: "sendMessage", chatId: chat, status: 400, description: "Bad Request: message to be replied not found" });
  const t = "@edge_test_bot hello";
  await s.webhook(groupText(chat, uid, t, { entities: mention(t, "edge_test_bot") }));
  await s.tg.waitFor(() => s.tg.sent(chat).length === 1, 10_000, "the reply");
  const calls = s.tg.calls("sendMessage", chat);
  assert.equal(calls.length, 2);
  assert.ok(calls[0].body.reply_parameters);
  assert.equal(calls[1].body.reply_parameters, undefined);
});

test("a 429 on a multi-chunk reply: every chunk arrives once, in order, after retry_after", async () => {
  const uid = uniqueId();
  const parts = Array.from({ length: 3 }, (_, i) => `Part ${i}: ` + "word ".repeat(600));
  s.gemini.script(uid, [{ text: parts.join("\n\n") }]);
  s.tg.fault({ method: "sendMessage", chatId: uid, skip: 1, status: 429, retry_after: 1 });
  await s.webhook(privateText(uid, "long one please"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 3, 20_000, "three chunks");
  await sleep(1500);
  const sent = s.tg.sent(uid);
  assert.equal(sent.length, 3);
  sent.forEach((text, i) => assert.match(text, new RegExp(`^Part ${i}:`)));
  const calls = s.tg.calls("sendMessage", uid);
  const limited = calls.find((c) => c.fault === 429);
  const after429 = calls[calls.indexOf(limited) + 1];
  assert.ok(after429.at - limited.at >= 1000, `retried after ${after429.at - limited.at} ms`);
});

test("a step retried after a server error sends nothing twice", async () => {
  const uid = uniqueId();
  const parts = ["Alpha " + "a ".repeat(1900), "Beta " + "b ".repeat(1900), "Gamma " + "c ".repeat(1900)];
  s.gemini.script(uid, [{ text: parts.join("\n\n") }]);
  s.tg.fault({ method: "sendMessage", chatId: uid, skip: 1, status: 502, description: "Bad Gateway" });
  await s.webhook(privateText(uid, "three parts"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 3, 20_000, "all parts");
  await sleep(2000);
  const sent = s.tg.sent(uid);
  assert.deepEqual(sent.map((t) => t.split(" ")[0]), ["Alpha", "Beta", "Gamma"]);
  const rows = await s.sql("SELECT key, status FROM sends WHERE chat_id = ? ORDER BY key", uid);
  assert.equal(rows.length, 3);
  assert.ok(rows.every((r) => r.status === "sent"));
  // Telegram was asked four times: the second part twice (the 502, then its retry), no other again.
  const asked = s.tg.calls("sendMessage", uid).map((c) => c.body.text.split(" ")[0]);
  assert.deepEqual(asked, ["Alpha", "Beta", "Beta", "Gamma"]);
});

test("a chat that blocked the bot is marked and not retried", async () => {
  const uid = uniqueId();
  s.tg.block(uid);
  await s.webhook(privateText(uid, "hello before blocking"));
  await s.tg.waitFor(() => s.tg.calls("sendMessage", uid).length === 1, 10_000, "the attempt");
  await sleep(2500);
  assert.equal(s.tg.calls("sendMessage", uid).length, 1, "403 is not retried");
  const [chat] = await s.sql("SELECT blocked_at, blocked_reason FROM chats WHERE chat_id = ?", uid);
  assert.ok(chat.blocked_at);
  assert.match(chat.blocked_reason, /blocked by the user/);
});

test("the typing indicator is refreshed about every 4 seconds while the model works", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "done thinking", delayMs: 9000 }]);
  await s.webhook(privateText(uid, "think hard"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 20_000, "the reply");
  const typing = s.tg.calls("sendChatAction", uid);
  assert.ok(typing.length >= 3, `${typing.length} typing calls`);
  assert.equal(typing[0].body.action, "typing");
  const gaps = typing.slice(1).map((t, i) => t.at - typing[i].at);
  assert.ok(gaps.every((g) => g >= 3500 && g <= 5000), `gaps ${gaps}`);
  const reply = s.tg.calls("sendMessage", uid)[0];
  assert.ok(typing.every((t) => t.at < reply.at), "no typing after the reply");
});

test("a very long reply is sent across invocations, inside the subrequest limit, each chunk once", async () => {
  const uid = uniqueId();
  const paragraphs = Array.from({ length: 20 }, (_, i) => `Chunk ${String(i).padStart(2, "0")} ` + "lorem ipsum ".repeat(330));
  s.gemini.script(uid, [{ text: paragraphs.join("\n\n") }]);
  await s.webhook(privateText(uid, "tell me everything"));
  await s.tg.waitFor(() => s.tg.sent(uid).length >= 20, 30_000, "twenty chunks");
  await sleep(1000);
  const sent = s.tg.sent(uid);
  assert.equal(sent.length, 20);
  sent.forEach((t, i) => assert.ok(t.startsWith(`Chunk ${String(i).padStart(2, "0")}`), `chunk ${i} in order`));
  assert.ok(s.logs().some((l) => /continuing in the next invocation/.test(l.message)), "the work was split");
});
