// Private answers in groups, the rest (issue 36, part 4): a refusal, a pairing message and a
// budget notice about one person go to that person alone as an ephemeral message where the
// bot is an admin of the group (Bot API 10.2: any time, to any non-bot member); elsewhere as
// today (a refusal in a group: silence; a budget notice: the group message). A bot demoted
// meanwhile (the fake refuses the send) falls back to today's answer, once. Nothing of it
// enters the group's history.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, askInGroup, uniqueId, sleep, BOT_ID } from "../support/stack.js";

let s;
const allowed = [uniqueId(), uniqueId(), uniqueId(), uniqueId()];
before(async () => {
  s = await startStack({ vars: { DM_POLICY: "pairing", DM_ALLOWLIST: allowed.join(","), USER_TURNS_PER_HOUR: "1" } });
});
after(async () => {
  await s?.close();
});

const group = () => -1000000000000 - uniqueId();
const ephemeralTo = (chat, uid) => s.tg.calls("sendMessage", chat).filter((r) => r.ephemeral === uid);
const triedEphemeral = (chat) => s.tg.calls("sendMessage", chat).filter((r) => r.body.ephemeral_message_parameters);
const groupSent = (chat) => s.tg.calls("sendMessage", chat).filter((r) => r.text !== undefined && r.ephemeral === undefined);
const botRows = async (chat) => (await s.sql("SELECT COUNT(*) AS n FROM history WHERE chat_id = ? AND role = 'bot'", chat))[0].n;

test("a stranger in a group where the bot is an admin gets their pairing code alone; the group sees nothing; the approval reaches them alone too", async () => {
  const chat = group();
  const stranger = uniqueId();
  s.tg.setAdmin(chat);
  assert.equal((await s.webhook(askInGroup(chat, stranger, "hello?"))).status, 200);
  await s.tg.waitFor(() => ephemeralTo(chat, stranger).length === 1, 10_000, "the ephemeral pairing code");
  const [sent] = ephemeralTo(chat, stranger);
  assert.deepEqual(sent.body.ephemeral_message_parameters, { receiver_user_id: stranger });
  assert.equal(sent.body.reply_parameters, undefined, "an admin's ephemeral message, no reply window needed");
  const code = /pairing code is ([A-Z0-9]+)/.exec(sent.text)?.[1];
  assert.ok(code, sent.text);
  assert.equal(s.tg.calls("getChatMember", chat).filter((r) => r.body.user_id === BOT_ID).length, 1, "the bot asked for its own status once");
  // A second message within the notice interval: nothing more.
  await s.webhook(askInGroup(chat, stranger, "anyone?"));
  await sleep(800);
  assert.equal(ephemeralTo(chat, stranger).length, 1);
  assert.equal(groupSent(chat).length, 0, "the group sees nothing");
  assert.equal(await botRows(chat), 0, "nothing of it in the group's history");
  const approved = await s.api("POST", `pairings/${code}/approve`);
  assert.equal(approved.status, 200);
  await s.tg.waitFor(() => ephemeralTo(chat, stranger).length === 2, 10_000, "the ephemeral welcome");
  assert.match(ephemeralTo(chat, stranger)[1].text, /approved/i);
  assert.equal(groupSent(chat).length, 0, "the welcome is not shown to the group either");
});

test("where the bot is no admin a refused stranger gets silence, as before, and no pairing code is made", async () => {
  const chat = group();
  const stranger = uniqueId();
  await s.webhook(askInGroup(chat, stranger, "hello?"));
  await s.tg.waitFor(() => s.tg.calls("getChatMember", chat).length === 1, 10_000, "the status asked");
  await sleep(800);
  assert.equal(s.tg.calls("sendMessage", chat).length, 0, "nothing sent, ephemeral or not");
  const pairings = await s.sql("SELECT COUNT(*) AS n FROM pairings WHERE user_id = ?", stranger);
  assert.equal(pairings[0].n, 0);
});

test("a person over their hourly budget in a group where the bot is an admin is told alone; the group sees only the answer", async () => {
  const chat = group();
  const [person] = allowed;
  s.tg.setAdmin(chat);
  s.gemini.script(person, [{ text: "Here you go." }]);
  await s.webhook(askInGroup(chat, person, "first question"));
  await s.tg.waitFor(() => groupSent(chat).length === 1, 15_000, "the answer");
  await s.webhook(askInGroup(chat, person, "second question"));
  await s.tg.waitFor(() => ephemeralTo(chat, person).length === 1, 10_000, "the ephemeral budget notice");
  assert.match(ephemeralTo(chat, person)[0].text, /this hour/);
  await sleep(500);
  assert.equal(groupSent(chat).length, 1, "only the answer in the group");
  assert.equal(await botRows(chat), 1, "the notice is not in the group's history");
});

test("without admin rights the budget notice is today's group message", async () => {
  const chat = group();
  const [, person] = allowed;
  s.gemini.script(person, [{ text: "Here you go." }]);
  await s.webhook(askInGroup(chat, person, "first question"));
  await s.tg.waitFor(() => groupSent(chat).length === 1, 15_000, "the answer");
  await s.webhook(askInGroup(chat, person, "second question"));
  await s.tg.waitFor(() => groupSent(chat).length === 2, 10_000, "the group notice");
  assert.match(groupSent(chat)[1].text, /this hour/);
  assert.equal(triedEphemeral(chat).length, 0, "no ephemeral try without admin rights");
  assert.equal(s.tg.calls("getChatMember", chat).filter((r) => r.body.user_id === BOT_ID).length, 1, "the bot asked once whether it is an admin");
});

test("a bot demoted since it learnt its status: the refused ephemeral send falls back to today's answer once", async () => {
  const chat = group();
  const [, , first, second] = allowed;
  s.tg.setAdmin(chat);
  s.gemini.script(first, [{ text: "One." }]);
  s.gemini.script(second, [{ text: "Two." }]);
  await s.webhook(askInGroup(chat, first, "a question"));
  await s.tg.waitFor(() => groupSent(chat).length === 1, 15_000, "the first answer");
  await s.webhook(askInGroup(chat, first, "another"));
  await s.tg.waitFor(() => ephemeralTo(chat, first).length === 1, 10_000, "the ephemeral notice while an admin");
  // Demoted: the bot still believes it is an admin (its status is kept for ten minutes).
  s.tg.setAdmin(chat, false);
  await s.webhook(askInGroup(chat, second, "a question"));
  await s.tg.waitFor(() => groupSent(chat).length === 2, 15_000, "the second person's answer");
  const notice = askInGroup(chat, second, "another");
  await s.webhook(notice);
  await s.tg.waitFor(() => groupSent(chat).length === 3, 10_000, "today's group notice");
  assert.match(groupSent(chat)[2].text, /this hour/);
  const refused = triedEphemeral(chat).filter((r) => r.body.ephemeral_message_parameters.receiver_user_id === second);
  assert.equal(refused.length, 1, "the ephemeral notice was tried once");
  assert.equal(refused[0].ephemeral, undefined, "and refused");
  await s.webhook(notice);
  await sleep(800);
  assert.equal(groupSent(chat).length, 3, "a redelivery sends nothing more");
  assert.equal(triedEphemeral(chat).length, 2);
});
