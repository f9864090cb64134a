// Topics in private chats (issue 36, part 3): in a private chat with topics (Bot API 9.3/9.4)
// each topic is its own conversation, answered and drafted in the topic; a topic whose name
// Telegram marks as implicit gets a short name from its first message (editForumTopic), once;
// a rename Telegram refuses is not tried again and holds up nothing.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, user, uniqueId, messageId, updateId, sleep } from "../support/stack.js";

let s;
before(async () => {
  s = await startStack();
});
after(async () => {
  await s?.close();
});

/** A message in topic `t` (from privateTopic) of the private chat `uid`. */
function inTopic(uid, t, text) {
  const message = { message_id: messageId(), from: user(uid), chat: { id: uid, type: "private", first_name: `User${uid}` }, date: Math.floor(Date.now() / 1000), text, message_thread_id: t.thread, is_topic_message: true, reply_to_message: t.service };
  return { update_id: updateId(), message };
}
const renames = (uid) => s.tg.calls("editForumTopic", uid);

test("each private topic is its own conversation, answered in the topic; an implicitly named topic is named from its first message, once", async () => {
  const uid = uniqueId();
  const trips = s.tg.privateTopic(uid);
  const other = s.tg.privateTopic(uid, { name: "Recipes", implicit: false });
  s.gemini.script(uid, [{ text: "Lisbon in May is lovely." }, { text: "Yes, trams too." }, { text: "Soup it is." }]);
  await s.webhook(inTopic(uid, trips, "Plan a trip to Lisbon in May, please"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 1, 15_000, "the first answer");
  assert.equal(s.finalSent(uid)[0].body.message_thread_id, trips.thread, "the answer goes to the topic");
  assert.deepEqual(renames(uid).map((r) => r.body), [{ chat_id: uid, message_thread_id: trips.thread, name: "Plan a trip to Lisbon in" }]);
  assert.equal(s.tg.topic(uid, trips.thread).name, "Plan a trip to Lisbon in");
  await s.webhook(inTopic(uid, trips, "and the trams?"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 2, 15_000, "the second answer");
  await s.webhook(inTopic(uid, other, "what shall I cook?"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 3, 15_000, "the answer in the other topic");
  await sleep(300);
  assert.equal(renames(uid).length, 1, "named once; a topic named by its creator is left alone");
  assert.equal(s.finalSent(uid)[2].body.message_thread_id, other.thread);
  assert.ok(s.tg.calls("sendMessageDraft", uid).every((d) => d.body.message_thread_id === trips.thread || d.body.message_thread_id === other.thread), "drafts go to the topic too");
  const convs = await s.sql("SELECT conv FROM conversations WHERE conv LIKE ? ORDER BY conv", `${uid}%`);
  assert.equal(convs.length, 2, "two conversations, one per topic");
  // The other topic's model call saw none of the first topic's messages.
  const third = JSON.stringify(s.gemini.calls(uid)[2].body.contents);
  assert.doesNotMatch(third, /Lisbon/);
});

test("a rename Telegram refuses (the topic is gone) is not tried again; the answer still comes", async () => {
  const uid = uniqueId();
  const t = s.tg.privateTopic(uid);
  const gone = { ...t, thread: t.thread + 100000, service: { ...t.service, message_id: t.thread + 100000, message_thread_id: t.thread + 100000 } };
  s.gemini.script(uid, [{ text: "First." }, { text: "Second." }]);
  await s.webhook(inTopic(uid, gone, "Something to talk about"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 1, 15_000, "the answer");
  await s.webhook(inTopic(uid, gone, "more"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 2, 15_000, "the second answer");
  assert.equal(renames(uid).length, 1, "tried once");
  const [row] = await s.sql("SELECT status FROM outbox WHERE key = ?", `topic:${uid}:${gone.thread}/name`);
  assert.equal(row.status, "failed");
});
