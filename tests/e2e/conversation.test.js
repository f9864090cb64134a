// Who said what, where, and whether the bot answers: group gating, mentions, replies to the
// bot, reactions, bursts, replanning mid-plan, commands, sessions, forum topics, redelivery.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, groupText, mention, reaction, uniqueId, sleep, BOT_ID } from "../support/stack.js";
import { promptText as systemText, allText } from "../support/prompt.js";

let s;
before(async () => {
  s = await startStack();
});
after(async () => {
  await s?.close();
});

test("group chatter is stored as context and not answered", async () => {
  const chat = -1000000000000 - uniqueId();
  const uid = uniqueId();
  await s.webhook(groupText(chat, uid, "just chatting with friends"));
  await s.webhook(groupText(chat, uid, "nobody asked the bot anything"));
  await sleep(1200);
  assert.equal(s.gemini.calls(uid).length, 0);
  assert.equal(s.tg.calls("sendMessage", chat).length, 0);
  const rows = await s.sql("SELECT text FROM messages WHERE chat_id = ? ORDER BY seq", chat);
  assert.deepEqual(rows.map((r) => r.text), ["just chatting with friends", "nobody asked the bot anything"]);
});

test("a mention is answered in the group, threaded to the message, with earlier chatter as context", async () => {
  const chat = -1000000000000 - uniqueId();
  const alice = uniqueId();
  const bob = uniqueId();
  await s.webhook(groupText(chat, alice, "I think pizza is best", { name: "Alice" }));
  const text = "@edge_test_bot what do you think?";
  const u = groupText(chat, bob, text, { name: "Bob", entities: mention(text, "edge_test_bot") });
  await s.webhook(u);
  await s.tg.waitFor(() => s.tg.sent(chat).length === 1, 10_000, "the group reply");
  const req = s.gemini.calls(bob)[0];
  assert.match(allText(req), /I think pizza is best/);
  assert.match(allText(req), /name="Alice"/);
  const sendCall = s.tg.calls("sendMessage", chat)[0];
  assert.equal(sendCall.body.reply_parameters.message_id, u.message.message_id, "the reply threads to the question");
  assert.equal(sendCall.body.parse_mode, "HTML");
});

test("a reply to one of the bot's messages is answered; a reply to someone else is not", async () => {
  const chat = -1000000000000 - uniqueId();
  const uid = uniqueId();
  const t = "@edge_test_bot hello";
  await s.webhook(groupText(chat, uid, t, { entities: mention(t, "edge_test_bot") }));
  await s.tg.waitFor(() => s.tg.sent(chat).length === 1, 10_000, "the first reply");
  await sleep(300);
  const botMessage = (await s.sql("SELECT message_id FROM history WHERE chat_id = ? AND role = 'bot'", chat))[0].message_id;
  const other = uniqueId();
  await s.webhook(groupText(chat, other, "a reply to a person", {
    reply_to_message: { message_id: 1, from: { id: uid, is_bot: false, first_name: "U" }, chat: { id: chat, type: "supergroup" }, date: 1, text: "hello" },
  }));
  await s.webhook(groupText(chat, other, "and this replies to the bot", {
    reply_to_message: { message_id: botMessage, from: { id: BOT_ID, is_bot: true, first_name: "Edge", username: "edge_test_bot" }, chat: { id: chat, type: "supergroup" }, date: 1, text: "Echo" },
  }));
  await s.tg.waitFor(() => s.tg.sent(chat).length === 2, 10_000, "the reply to the reply");
  assert.equal(s.gemini.calls(other).length, 1);
  assert.match(allText(s.gemini.calls(other)[0]), /reply_to_message_id=\d+/);
  // The bot's answer is kept apart from the people's messages (migration 0041): the reply still
  // shows what it replies to.
  assert.match(allText(s.gemini.calls(other)[0]), new RegExp(`reply_to_message_id=${botMessage} reply_to_user_id=${BOT_ID} .*reply_excerpt="Echo"`));
});

test("commands are answered without a model call", async () => {
  const uid = uniqueId();
  for (const cmd of ["/start", "/help", "/status", "/whoami"]) {
    await s.webhook(privateText(uid, cmd, { entities: [{ type: "bot_command", offset: 0, length: cmd.length }] }));
  }
  await s.tg.waitFor(() => s.tg.sent(uid).length === 4, 10_000, "four command replies");
  const [start, help, status, whoami] = s.tg.sent(uid);
  assert.match(start, /I'm Edge/);
  assert.match(help, /\/new/);
  assert.match(status, /Model: gemini-3\.8-flash/);
  assert.match(status, /History format: structured/);
  assert.match(whoami, new RegExp(`User id: ${uid}`));
  await sleep(600);
  assert.equal(s.gemini.calls(uid).length, 0);
});

test("a reaction to the bot's latest message asks for a reply; a reaction to an older one does not", async () => {
  const uid = uniqueId();
  await s.webhook(privateText(uid, "tell me a joke"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the joke");
  await sleep(300);
  const [{ message_id: latest }] = await s.sql("SELECT message_id FROM history WHERE chat_id = ? AND role = 'bot' ORDER BY seq DESC, apart DESC LIMIT 1", uid);
  await s.webhook(reaction(uid, uid, latest - 5, "👍"));
  await sleep(800);
  assert.equal(s.gemini.calls(uid).length, 1, "a reaction to an older message is context only");
  s.gemini.script(uid, [{ text: "Glad you liked it!" }]);
  await s.webhook(reaction(uid, uid, latest, "🔥"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 10_000, "the answer to the reaction");
  const req = s.gemini.calls(uid)[1];
  assert.match(systemText(req), new RegExp(`reacted 🔥 to your message #${latest}`));
  const events = await s.sql("SELECT text FROM messages WHERE chat_id = ? AND role = 'event'", uid);
  assert.equal(events.length, 2);
});

test("a new message mid-plan cancels the rest and the bot replans with it in view", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ calls: [
    { name: "send_message", args: { text: "one" } },
    { name: "wait", args: { seconds: 3 } },
    { name: "send_message", args: { text: "two" } },
  ] }]);
  await s.webhook(privateText(uid, "tell me two things"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the first message of the plan");
  assert.equal(s.tg.sent(uid)[0], "one");
  await s.webhook(privateText(uid, "wait, actually, something else"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 10_000, "the replanned answer");
  await sleep(3500);
  assert.deepEqual(s.tg.sent(uid), ["one", "Echo: wait, actually, something else"]);
  const second = s.gemini.calls(uid)[1];
  assert.match(allText(second), /wait, actually, something else/);
  // The earlier turn is replayed with what became of each action.
  const responses = second.body.contents.flatMap((c) => c.parts).filter((p) => p.functionResponse).map((p) => p.functionResponse);
  assert.deepEqual(responses.map((r) => r.name), ["send_message", "wait", "send_message"]);
  assert.equal(responses[0].response.ok, true);
  assert.match(responses[2].response.status, /cancelled/);
});

test("the same update delivered 20 times at once gives one reply", async () => {
  const uid = uniqueId();
  const update = privateText(uid, "storm");
  const results = await Promise.all(Array.from({ length: 20 }, () => s.webhook(update)));
  assert.ok(results.every((r) => r.status === 200));
  await s.tg.waitFor(() => s.tg.sent(uid).length >= 1, 10_000, "the reply");
  await sleep(1500);
  assert.equal(s.tg.sent(uid).length, 1);
  assert.equal(s.gemini.calls(uid).length, 1);
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM messages WHERE chat_id = ? AND role = 'user'", uid))[0].n, 1);
});

test("an edited message updates the stored one and asks for nothing", async () => {
  const uid = uniqueId();
  const u = privateText(uid, "tpyo");
  await s.webhook(u);
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the reply");
  const edited = { update_id: u.update_id + 500000, edited_message: { ...u.message, text: "typo", edit_date: u.message.date + 5 } };
  await s.webhook(edited);
  await sleep(800);
  const rows = await s.sql("SELECT text, edited_at FROM messages WHERE chat_id = ? AND role = 'user'", uid);
  assert.deepEqual(rows, [{ text: "typo", edited_at: u.message.date + 5 }]);
  assert.equal(s.gemini.calls(uid).length, 1);
});

test("/new starts a new session: the next prompt does not see the old messages", async () => {
  const uid = uniqueId();
  await s.webhook(privateText(uid, "my secret word is pineapple"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the reply");
  await s.webhook(privateText(uid, "/new", { entities: [{ type: "bot_command", offset: 0, length: 4 }] }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 10_000, "the /new reply");
  await s.webhook(privateText(uid, "what was my word?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 3, 10_000, "the answer");
  const req = s.gemini.calls(uid)[1];
  assert.doesNotMatch(allText(req), /pineapple/);
  assert.match(systemText(req), /start of a new conversation/);
  // Nothing is deleted: the old messages stay on record.
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM messages WHERE chat_id = ? AND role = 'user' AND text LIKE '%pineapple%'", uid))[0].n, 1);
});

test("an idle gap longer than the timeout starts a new session", async () => {
  const uid = uniqueId();
  const old = privateText(uid, "remember the blue door");
  old.message.date -= 3 * 86400; // three days ago
  await s.webhook(old);
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the first reply");
  await s.webhook(privateText(uid, "hi again"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 10_000, "the second reply");
  const req = s.gemini.calls(uid)[1];
  assert.doesNotMatch(allText(req), /blue door/);
  assert.match(systemText(req), /start of a new conversation/);
});

test("forum topics are separate conversations and replies stay in the topic", async () => {
  const chat = -1000000000000 - uniqueId();
  const uid = uniqueId();
  await s.webhook(groupText(chat, uid, "topic one chatter", { thread: 11 }));
  const t = "@edge_test_bot in topic two";
  await s.webhook(groupText(chat, uid, t, { thread: 22, entities: mention(t, "edge_test_bot") }));
  await s.tg.waitFor(() => s.tg.sent(chat).length === 1, 10_000, "the topic reply");
  const call = s.tg.calls("sendMessage", chat)[0];
  assert.equal(call.body.message_thread_id, 22);
  assert.doesNotMatch(allText(s.gemini.calls(uid)[0]), /topic one chatter/);
  const convs = await s.sql("SELECT DISTINCT conv FROM messages WHERE chat_id = ? ORDER BY conv", chat);
  assert.deepEqual(convs.map((c) => c.conv), [`${chat}:11`, `${chat}:22`]);
});

test("media messages reach the model as compact parts", async () => {
  const uid = uniqueId();
  const u = privateText(uid, undefined);
  delete u.message.text;
  u.message.photo = [{ file_id: "small", file_unique_id: "s1", width: 90, height: 60 }, { file_id: "big", file_unique_id: "b1", width: 1280, height: 853 }];
  u.message.caption = "look at this";
  await s.webhook(u);
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the reply");
  const text = allText(s.gemini.calls(uid)[0]);
  assert.match(text, /\[photo: 1280x853\]/);
  assert.match(text, /look at this/);
  const [row] = await s.sql("SELECT parts FROM messages WHERE chat_id = ? AND role = 'user'", uid);
  const parts = JSON.parse(row.parts);
  assert.equal(parts[0].file_id, "big");
  assert.equal(parts[0].file_unique_id, "b1");
});
