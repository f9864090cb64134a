// Topics in private chats (issue 36, part 3): in a private chat with topics (Bot API 9.3/9.4)
// each topic is its own conversation, answered and drafted in the topic; a topic whose name
// Telegram marks as implicit gets a short name from its first message (editForumTopic), once;
// a rename Telegram refuses is not tried again and holds up nothing.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, uniqueId, sleep, cmd, privateText, TOKEN, inTopic } from "../support/stack.js";

let s;
before(async () => {
  s = await startStack();
  // The bot's topics in private chats are on (BotFather), as getMe says from the first update.
  s.tg.setPrivateTopics({ enabled: true });
});
after(async () => {
  await s?.close();
});

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
  // The chat's tokens of the day (its budget) and its usage count every topic's turns: each
  // topic's turns are read by their own key range, from the chat's conversations.
  const [all] = await s.sql("SELECT SUM(total_tokens) AS t, COUNT(*) AS n FROM calls WHERE chat_id = ?", uid);
  assert.equal(all.n, 3);
  const r = await s.api("GET", `costs?period=today&chat_id=${uid}`);
  assert.equal(r.status, 200);
  assert.equal(r.json.budgets.chat_tokens_today, all.t, "the budget's figure is every topic's");
  assert.equal(r.json.rows.filter((x) => x.chat_id === uid).reduce((n, x) => n + x.calls, 0), 3, "the costs count every topic's calls");
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

const created = (uid) => s.tg.calls("createForumTopic", uid);
const greetings = (uid) => s.finalSent(uid).filter((r) => /fresh conversation: what shall we talk about/.test(r.text));

test("/new in a private chat with topics opens a fresh topic, greets the person in it once, leaves the conversation as it was; the topic is named from its first message", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "Noted: you like jazz." }, { text: "Jazz, as you said." }, { text: "Soup ideas." }]);
  await s.webhook(privateText(uid, "I like jazz"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 1, 15_000, "the first answer");
  const fresh = cmd(uid, "/new");
  await s.webhook(fresh);
  await s.tg.waitFor(() => greetings(uid).length === 1 && s.finalSent(uid).length === 3, 10_000, "the greeting and the reply");
  assert.equal(created(uid).length, 1);
  assert.equal(created(uid)[0].body.name, "💬 New conversation");
  const thread = greetings(uid)[0].body.message_thread_id;
  assert.ok(thread, "the greeting goes into the new topic");
  assert.ok(s.tg.topic(uid, thread), "Telegram has the topic");
  const reply = s.finalSent(uid).find((r) => /Opened a new topic/.test(r.text));
  assert.ok(reply && reply.body.message_thread_id === undefined, "/new is answered where it was sent");
  // Telegram redelivers /new: no second topic, no second greeting.
  await s.webhook(fresh);
  await sleep(800);
  assert.equal(created(uid).length, 1);
  assert.equal(greetings(uid).length, 1);
  // The old conversation is left as it is: its next model call still sees what came before.
  await s.webhook(privateText(uid, "what music do I like?"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 4, 15_000, "the answer in the old conversation");
  assert.match(JSON.stringify(s.gemini.calls(uid).at(-1).body.contents), /I like jazz/);
  // The first message in the new topic names it.
  await s.webhook(inTopic(uid, { thread, service: s.tg.topic(uid, thread).service }, "Soup recipes for winter evenings"));
  await s.tg.waitFor(() => renames(uid).length === 1, 15_000, "the rename");
  assert.equal(s.tg.topic(uid, thread).name, "Soup recipes for winter evenings");
});

test("createForumTopic refused (topics off in this chat): /new resets the conversation as before and says so, once", async () => {
  const uid = uniqueId();
  s.tg.setPrivateTopics({ refuse: uid });
  const fresh = cmd(uid, "/new");
  await s.webhook(fresh);
  await s.tg.waitFor(() => s.finalSent(uid).length === 1, 10_000, "the reply");
  assert.match(s.finalSent(uid)[0].text, /starting a new conversation here \(I couldn.t open a new topic\)/);
  assert.equal(created(uid).length, 1, "tried once");
  await s.webhook(fresh);
  await sleep(800);
  assert.equal(created(uid).length, 1, "a redelivery tries nothing more");
  assert.equal(s.finalSent(uid).length, 1, "and says nothing more");
  assert.equal(greetings(uid).length, 0);
  const [row] = await s.sql("SELECT status FROM outbox WHERE key = ?", `newtopic:${uid}:${fresh.message.message_id}/create`);
  assert.equal(row.status, "failed");
});

test("the fake refuses createForumTopic as Telegram does: topics off, a name of 0 or over 128 characters", async () => {
  const create = (body) => fetch(`${s.tg.base}/bot${TOKEN}/createForumTopic`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }).then((r) => r.json());
  const uid = uniqueId();
  assert.equal((await create({ chat_id: uid, name: "" })).description, "Bad Request: TOPIC_TITLE_EMPTY");
  assert.equal((await create({ chat_id: uid, name: "x".repeat(129) })).description, "Bad Request: TOPIC_NAME_INVALID");
  assert.equal((await create({ chat_id: uid, name: "x".repeat(128) })).ok, true);
  s.tg.setPrivateTopics({ enabled: false });
  try {
    const off = await create({ chat_id: uid, name: "Trips" });
    assert.equal(off.error_code, 400);
    assert.equal(off.description, "Bad Request: the chat is not a forum");
  } finally {
    s.tg.setPrivateTopics({ enabled: true });
  }
});
