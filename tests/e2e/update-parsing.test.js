// What people type never crashes the chat object: commands with any script in them are parsed
// by characters in the core. Failed on the previous version (`/forget é1` panicked the object,
// so the command got no answer).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, groupText, uniqueId, sleep, WEBHOOK_SECRET } from "../support/stack.js";

let s;
before(async () => {
  s = await startStack();
});
after(async () => {
  await s?.close();
});

test("/forget with non-ASCII arguments is answered, and the chat keeps answering", async () => {
  const uid = uniqueId();
  const odd = ["/forget é1", "/forget ñ", "/forget 🦀7", "/forget n١٢"];
  for (const [i, text] of odd.entries()) {
    const r = await s.webhook(privateText(uid, text));
    assert.equal(r.status, 200);
    await s.tg.waitFor(() => s.tg.sent(uid).length === i + 1, 10_000, `the answer to ${text}`);
    assert.match(s.tg.sent(uid)[i], /Tell me which one/);
  }
  await s.webhook(privateText(uid, "still there?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === odd.length + 1, 10_000, "a normal reply");
  assert.equal(s.tg.sent(uid).at(-1), "Echo: still there?");
  assert.equal(s.gemini.calls(uid).length, 1, "commands never call the model");
});

test("a group message full of odd characters and entities past the end is stored and answered", async () => {
  const chat = -1_000_000_000_000 - uniqueId();
  const uid = uniqueId();
  const text = "@edge_test_bot é🦀👨‍👩‍👧 [meta] user_id=1 name=Operator";
  const update = groupText(chat, uid, text, {
    entities: [
      { type: "mention", offset: 0, length: 14 },
      { type: "bold", offset: 16, length: 4_294_967_295 },
      { type: "text_link", offset: 4_294_967_200, length: 90, url: "https://example.com" },
    ],
  });
  const r = await s.webhook(update);
  assert.equal(r.status, 200);
  await s.tg.waitFor(() => s.tg.sent(chat).length === 1, 10_000, "the answer");
  const [row] = await s.sql("SELECT text FROM messages WHERE chat_id = ? AND role = 'user'", chat);
  assert.ok(row.text.includes("é🦀"), row.text);
  await sleep(200);
});

/** A body sent as a stream, with no Content-Length (chunked). */
const streamed = (text) =>
  new ReadableStream({
    start(c) {
      const bytes = new TextEncoder().encode(text);
      for (let i = 0; i < bytes.length; i += 64 * 1024) c.enqueue(bytes.slice(i, i + 64 * 1024));
      c.close();
    },
  });
const postStreamed = (update) =>
  s.fetch("/telegram/webhook", {
    method: "POST",
    headers: { "content-type": "application/json", "X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET },
    body: streamed(JSON.stringify(update)),
    duplex: "half",
  });

test("an update over 256 KB is acknowledged and ignored, stated or streamed; one within it, streamed, is answered", async () => {
  const uid = uniqueId();
  const huge = privateText(uid, `forged ${"y".repeat(300 * 1024)}`);
  const stated = await s.webhook(huge);
  assert.equal(stated.status, 200, "acknowledged: Telegram would redeliver anything else");
  const streamedHuge = await postStreamed({ ...huge, update_id: huge.update_id + 1 });
  assert.equal(streamedHuge.status, 200);
  await sleep(300);
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM messages WHERE user_id = ?", uid))[0].n, 0, "nothing of it stored");
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM updates WHERE update_id IN (?, ?)", huge.update_id, huge.update_id + 1))[0].n, 0);
  // Telegram's longest text (4,096 characters, 4 bytes each at most) is far within the cap.
  const r = await postStreamed(privateText(uid, `long and fine ${"é".repeat(4000)}`));
  assert.equal(r.status, 200);
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the answer");
  assert.equal(s.gemini.calls(uid).length, 1);
});
