// HISTORY_FORMAT=compact: the history is one plain-text user turn, a line per message,
// ending with the marker of the message to answer; message ids only on the lines the model may
// act on; the metadata never reaches users.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, groupText, mention, uniqueId } from "../support/stack.js";

let s;
before(async () => {
  s = await startStack({ vars: { HISTORY_FORMAT: "compact" } });
});
after(async () => {
  await s?.close();
});

test("compact history is one text turn with a line per message and the answer marker", async () => {
  const chat = -1000000000000 - uniqueId();
  const alice = uniqueId();
  const bob = uniqueId();
  const a = groupText(chat, alice, "lunch at noon?", { name: "Alice" });
  await s.webhook(a);
  const t = "@edge_test_bot agreed, book a table";
  const b = groupText(chat, bob, t, { name: "Bob", entities: mention(t, "edge_test_bot"), reply_to_message: { ...a.message } });
  await s.webhook(b);
  await s.tg.waitFor(() => s.tg.sent(chat).length === 1, 10_000, "the reply");
  const req = s.gemini.calls(bob)[0];
  assert.equal(req.body.contents.length, 1);
  assert.equal(req.body.contents[0].role, "user");
  const text = req.body.contents[0].parts[0].text;
  assert.equal(
    text,
    `#${a.message.message_id} Alice#${alice}: lunch at noon?\n` +
      `#${b.message.message_id} Bob#${bob} → Alice: ${t}\n` +
      `→ Answer #${b.message.message_id}`,
  );
  assert.match(req.body.systemInstruction.parts[0].text, /one line per message/);

  // The next turn: the lines before the bot's answer name who wrote them and whom they answer,
  // without ids; what came after it carries its id, for replies and reactions.
  const c = groupText(chat, alice, "@edge_test_bot and a table for 3?", { name: "Alice", entities: mention("@edge_test_bot and a table for 3?", "edge_test_bot") });
  await s.webhook(c);
  await s.tg.waitFor(() => s.tg.sent(chat).length === 2, 10_000, "the second reply");
  const next = s.gemini.calls(alice).at(-1).body.contents[0].parts[0].text;
  assert.equal(
    next,
    `Alice#${alice}: lunch at noon?\n` +
      `Bob#${bob} → Alice: ${t}\n` +
      `bot: ${s.tg.sent(chat)[0]}\n` +
      `#${c.message.message_id} Alice: @edge_test_bot and a table for 3?\n` +
      `→ Answer #${c.message.message_id}`,
  );
});

test("a model that echoes the line prefix or [meta] does not leak it to users", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "#77 bot: Sure thing" }]);
  await s.webhook(privateText(uid, "ok?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the reply");
  assert.equal(s.tg.sent(uid)[0], "Sure thing");
  const uid2 = uniqueId();
  s.gemini.script(uid2, [{ calls: [{ name: "send_message", args: { text: "[meta] message_id=1 user_id=2\nHello!" } }] }]);
  await s.webhook(privateText(uid2, "hi"));
  await s.tg.waitFor(() => s.tg.sent(uid2).length === 1, 10_000, "the reply");
  assert.equal(s.tg.sent(uid2)[0], "Hello!");
});
