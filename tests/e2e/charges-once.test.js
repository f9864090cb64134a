// Charges that hold under concurrency and crashes (issue 47, items 9 and 13): the daily picture
// limit is checked and charged in one step, so one person drawing in several private topics at
// once (each its own chat object) gets no more than the limit.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, user, uniqueId, messageId, updateId, sleep } from "../support/stack.js";
import { makePng } from "../../tools/png.js";

const PERSON_LIMIT_LINE = "You've reached today's picture limit; you can ask for more pictures tomorrow (UTC).";

let s;
before(async () => {
  s = await startStack({ vars: { IMAGE_MODEL: "on", IMAGE_DAILY_LIMIT: "1", IMAGE_CHAT_DAILY_LIMIT: "10" } });
  s.tg.setPrivateTopics({ enabled: true });
});
after(async () => {
  await s?.close();
});

function inTopic(uid, t, text) {
  const message = { message_id: messageId(), from: user(uid), chat: { id: uid, type: "private", first_name: `User${uid}` }, date: Math.floor(Date.now() / 1000), text, message_thread_id: t.thread, is_topic_message: true, reply_to_message: t.service };
  return { update_id: updateId(), message };
}

test("drawing in three private topics at once passes IMAGE_DAILY_LIMIT by nothing: one picture, the others the limit line", async () => {
  const uid = uniqueId();
  const prompts = ["a fox", "a cat", "an owl"];
  const topics = prompts.map((p) => s.tg.privateTopic(uid, { name: p, implicit: false }));
  s.gemini.script(uid, prompts.map((prompt) => ({ text: "Coming up.", calls: [{ name: "generate_image", args: { prompt } }] })));
  s.gemini.scriptImage(prompts.map((_, i) => ({ png: makePng(20, 20, i + 1), delayMs: 300 })));
  await Promise.all(topics.map((t, i) => s.webhook(inTopic(uid, t, `draw ${prompts[i]}`))));
  const photos = () => s.tg.calls("sendPhoto", uid).filter((r) => r.photo);
  const lines = () => s.tg.sent(uid).filter((t) => t === PERSON_LIMIT_LINE);
  await s.tg.waitFor(() => photos().length + lines().length >= prompts.length, 40_000, "an answer in every topic");
  await sleep(1000);
  assert.equal(photos().length, 1, "one picture");
  assert.equal(lines().length, prompts.length - 1, "the limit line in the other topics");
});
