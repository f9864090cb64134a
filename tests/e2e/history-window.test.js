// A turn's window of messages as D1 gives it (storage::turns::SELECT_RECENT_MESSAGES): a window
// of long messages (over 600 KB) comes back whole, in order, each message once; a message whose
// stored parts are not JSON stands as unreadable and costs no other message.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, groupText, mention, uniqueId, sleep } from "../support/stack.js";
import { allText } from "../support/prompt.js";

let s;
before(async () => {
  // A budget that shows the whole window (the default cuts it to about 48 KB of text).
  s = await startStack({ vars: { HISTORY_TOKEN_BUDGET: "1000000" } });
});
after(async () => {
  await s?.close();
});

async function ask(chat, uid, text) {
  const before = s.gemini.calls(uid).length;
  const t = `@edge_test_bot ${text}`;
  await s.webhook(groupText(chat, uid, t, { entities: mention(t, "edge_test_bot") }));
  await s.gemini.waitFor(() => s.gemini.calls(uid).length > before, 60_000, "the model call");
  return allText(s.gemini.calls(uid).at(-1));
}

test("a window of 160 of the longest texts (over 600 KB) reaches the model whole, in order, each message once", async () => {
  const chat = -1000000000000 - uniqueId();
  const uid = uniqueId();
  // 160 messages of Telegram's longest text: about 650 KB stored.
  const filler = "x".repeat(3980);
  for (let i = 0; i < 160; i++) await s.webhook(groupText(chat, uid, `marker-${String(i).padStart(3, "0")} ${filler}`));
  const [{ bytes }] = await s.sql("SELECT SUM(length(parts)) AS bytes FROM messages WHERE chat_id = ?", chat);
  assert.ok(bytes > 600_000, `the window is over 600 KB: ${bytes} bytes`);
  const prompt = await ask(chat, uid, "what did I say first?");
  const shown = [...prompt.matchAll(/marker-(\d{3})/g)].map((m) => Number(m[1]));
  assert.deepEqual(shown, Array.from({ length: 160 }, (_, i) => i), "every message once, oldest first");
});

test("a message whose stored parts are not JSON is shown as unreadable; the messages around it are not lost", async () => {
  const chat = -1000000000000 - uniqueId();
  const uid = uniqueId();
  for (const text of ["before the broken one", "this one breaks", "after the broken one"]) await s.webhook(groupText(chat, uid, text));
  await s.sql("UPDATE messages SET parts = 'not json at all' WHERE chat_id = ? AND text = 'this one breaks'", chat);
  await sleep(100);
  const prompt = await ask(chat, uid, "what happened?");
  assert.match(prompt, /before the broken one[\s\S]*unreadable[\s\S]*after the broken one/);
  assert.doesNotMatch(prompt, /this one breaks/);
});
