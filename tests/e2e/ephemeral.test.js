// Private answers in groups (issue 36, part 4): a command marked ephemeral in the menu (/usage,
// /memory, ...) sent in a group arrives as a message only its sender and the bot see
// (message_id 0, ephemeral_message_id). Its answer goes to that person alone (Bot API 10.3
// ephemeral_message_parameters, replying within Telegram's 15 s window); past the window, or
// refused, it goes as today's group answer, once. Nothing of it enters the group's history.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, groupText, uniqueId, sleep, TOKEN, BOT_ID } from "../support/stack.js";

let s;
before(async () => {
  s = await startStack();
});
after(async () => {
  await s?.close();
});

const group = () => -1000000000000 - uniqueId();
/** An ephemeral command update: message_id 0, the emulator's ephemeral id, sent `agoS` ago. */
function ephemeralCommand(chat, uid, text, { agoMs = 0, dateAgoS = 0 } = {}) {
  const eid = s.tg.ephemeralMessage(chat, uid, { agoMs });
  const u = groupText(chat, uid, text, { message_id: 0, entities: [{ type: "bot_command", offset: 0, length: text.split(" ")[0].length }] });
  u.message.ephemeral_message_id = eid;
  u.message.date -= dateAgoS;
  return { u, eid };
}
const ephemeralSent = (chat) => s.tg.calls("sendMessage", chat).filter((r) => r.ephemeral !== undefined);
const groupSent = (chat) => s.tg.calls("sendMessage", chat).filter((r) => r.text !== undefined && r.ephemeral === undefined);

test("an ephemeral /usage in a group: the answer goes to its sender alone, once, and nothing enters the group's history", async () => {
  const chat = group();
  const uid = uniqueId();
  const { u, eid } = ephemeralCommand(chat, uid, "/usage");
  assert.equal((await s.webhook(u)).status, 200);
  await s.tg.waitFor(() => ephemeralSent(chat).length === 1, 10_000, "the ephemeral answer");
  const [answer] = ephemeralSent(chat);
  assert.deepEqual(answer.body.ephemeral_message_parameters, { receiver_user_id: uid });
  assert.equal(answer.body.reply_parameters.ephemeral_message_id, eid);
  assert.match(answer.text, /usage|tokens|cost/i);
  // Telegram redelivers the update: nothing goes twice. A second ephemeral command (message_id
  // 0 again) is answered too.
  await s.webhook(u);
  const second = ephemeralCommand(chat, uid, "/whoami");
  await s.webhook(second.u);
  await s.tg.waitFor(() => ephemeralSent(chat).length === 2, 10_000, "the second ephemeral answer");
  await sleep(500);
  assert.equal(ephemeralSent(chat).length, 2);
  assert.equal(groupSent(chat).length, 0, "nothing shown to the group");
  const stored = await s.sql("SELECT COUNT(*) AS n FROM messages WHERE chat_id = ?", chat);
  assert.equal(stored[0].n, 0, "neither the command nor the answer is in the group's history");
  const rows = await s.sql("SELECT status, tg_message_id FROM outbox WHERE chat_id = ?", chat);
  assert.deepEqual(rows, [{ status: "sent", tg_message_id: 0 }, { status: "sent", tg_message_id: 0 }], "Telegram's message_id 0, recorded as sent");
});

test("Telegram refusing the ephemeral answer (its 15 s window passed on its side): today's group answer, once", async () => {
  const chat = group();
  const uid = uniqueId();
  const { u } = ephemeralCommand(chat, uid, "/usage", { agoMs: 16_000 });
  await s.webhook(u);
  await s.tg.waitFor(() => groupSent(chat).length === 1, 10_000, "the group answer");
  const tried = s.tg.calls("sendMessage", chat).filter((r) => r.body.ephemeral_message_parameters);
  assert.equal(tried.length, 1, "the ephemeral answer was tried once");
  assert.equal(tried[0].ephemeral, undefined, "and refused");
  await s.webhook(u);
  await sleep(800);
  assert.equal(groupSent(chat).length, 1, "a redelivery sends nothing more");
  assert.match(groupSent(chat)[0].text, /usage|tokens|cost/i, "the same answer as today's, no more");
});

test("a webhook later than the window: no ephemeral attempt, today's group answer", async () => {
  const chat = group();
  const uid = uniqueId();
  const { u } = ephemeralCommand(chat, uid, "/usage", { agoMs: 30_000, dateAgoS: 30 });
  await s.webhook(u);
  await s.tg.waitFor(() => groupSent(chat).length === 1, 10_000, "the group answer");
  assert.equal(s.tg.calls("sendMessage", chat).filter((r) => r.body.ephemeral_message_parameters).length, 0);
});

test("an ephemeral message that is not a private-answer command is acknowledged, unanswered and not stored", async () => {
  const chat = group();
  const uid = uniqueId();
  const { u } = ephemeralCommand(chat, uid, "/new");
  const plain = ephemeralCommand(chat, uid, "hello @edge_test_bot").u;
  delete plain.message.entities;
  assert.equal((await s.webhook(u)).status, 200);
  assert.equal((await s.webhook(plain)).status, 200);
  await sleep(1500);
  assert.equal(s.tg.calls("sendMessage", chat).length, 0);
  const stored = await s.sql("SELECT COUNT(*) AS n FROM messages WHERE chat_id = ?", chat);
  assert.equal(stored[0].n, 0);
});

test("past the window, a bot that is an admin of the group still answers the person alone (any time), not the group", async () => {
  const chat = group();
  const uid = uniqueId();
  s.tg.setAdmin(chat);
  const { u } = ephemeralCommand(chat, uid, "/usage", { agoMs: 30_000, dateAgoS: 30 });
  await s.webhook(u);
  await s.tg.waitFor(() => ephemeralSent(chat).length === 1, 10_000, "the ephemeral answer");
  const [answer] = ephemeralSent(chat);
  assert.deepEqual(answer.body.ephemeral_message_parameters, { receiver_user_id: uid });
  assert.equal(answer.body.reply_parameters, undefined, "no reply: the window is closed, an admin needs none");
  await s.webhook(u);
  await sleep(800);
  assert.equal(ephemeralSent(chat).length, 1, "once");
  assert.equal(groupSent(chat).length, 0);
});

test("the fake refuses ephemeral messages as Telegram would: to a bot, to someone not in the group, from a bot without admin rights and no reply", async () => {
  const chat = group();
  const send = (receiver, extra = {}) =>
    fetch(`${s.tg.base}/bot${TOKEN}/sendMessage`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ chat_id: chat, text: "hi", ephemeral_message_parameters: { receiver_user_id: receiver }, ...extra }) }).then((r) => r.json());
  const person = uniqueId();
  assert.equal((await send(person)).description, "Bad Request: EPHEMERAL_REPLY_REQUIRED", "not an admin, no reply");
  s.tg.setAdmin(chat);
  assert.equal((await send(person)).ok, true, "an admin: any time");
  assert.equal((await send(BOT_ID)).description, "Bad Request: USER_IS_BOT");
  const gone = uniqueId();
  s.tg.setMember(chat, gone, "left");
  assert.equal((await send(gone)).description, "Bad Request: USER_NOT_PARTICIPANT");
  const status = await fetch(`${s.tg.base}/bot${TOKEN}/getChatMember`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ chat_id: chat, user_id: BOT_ID }) }).then((r) => r.json());
  assert.equal(status.result.status, "administrator");
});
