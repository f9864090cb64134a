// Telegram Business, away and auto modes (issue 49): with the right to reply, the bot answers a
// contact itself: in auto mode after the quiet window, in away mode once the owner has said
// nothing in that chat for BUSINESS_AWAY_SECONDS after the contact's last message (a message
// the owner writes there first cancels it); then it marks the contact's messages read where
// can_read_messages allows (never in draft mode). Without can_reply both fall back to
// suggestions without Send; a send Telegram refuses is told to the owner in one line, once.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, cmd, uniqueId, sleep } from "../support/stack.js";

let s;
before(async () => {
  s = await startStack({ vars: { BUSINESS_AWAY_SECONDS: "8" } });
});
after(async () => {
  await s?.close();
});

async function post(update) {
  const r = await s.webhook(update);
  assert.equal(r.status, 200);
}

/** Connects a fresh owner in `mode`; returns {owner, id}. */
async function connect(mode, opts = {}) {
  const owner = uniqueId();
  const id = `bc-${owner}`;
  await post(s.tg.connectBusiness(owner, { id, name: "Ada", ...opts }));
  if (mode !== "draft") {
    await post(cmd(owner, `/business ${mode}`));
    await s.tg.waitFor(() => s.tg.sent(owner).some((t) => t.startsWith(`Business mode set to ${mode}`)), 15_000, "the mode");
  }
  return { owner, id };
}

const toContact = (contact) => s.tg.calls("sendMessage", contact).filter((r) => r.body.business_connection_id !== undefined);
const suggestions = (owner) => s.tg.calls("sendMessage", owner).filter((r) => r.body.reply_markup && r.text !== undefined);

test("auto: the bot answers the contact itself after the quiet window, once, and marks the burst read", async () => {
  const { owner, id } = await connect("auto");
  const contact = uniqueId();
  s.gemini.script(contact, [{ text: "We open at **9** tomorrow." }]);
  const first = s.tg.businessMessage(id, contact, "hi");
  await post(first);
  const last = s.tg.businessMessage(id, contact, "when do you open tomorrow?");
  await post(last);
  await s.tg.waitFor(() => toContact(contact).some((r) => r.text), 30_000, "the answer to the contact");
  await sleep(6500);
  const sent = toContact(contact).filter((r) => r.text);
  assert.equal(sent.length, 1, "answered once");
  assert.equal(sent[0].text, "We open at 9 tomorrow.");
  assert.equal(sent[0].body.business_connection_id, id);
  assert.equal(s.gemini.calls(contact).length, 1);
  assert.equal(suggestions(owner).length, 0, "no suggestion in auto mode");
  assert.equal(s.tg.businessRead(id, contact), last.business_message.message_id, "the burst marked read");
  const typing = s.tg.calls("sendChatAction", contact).filter((r) => r.body.business_connection_id === id);
  assert.equal(typing.length, 1, "the contact saw the typing action, through the connection");
  assert.ok(typing[0].at <= sent[0].at, "before the answer");
  assert.equal(s.tg.calls("sendMessageDraft", contact).length, 0, "no draft streamed for a business chat");
  // A redelivered contact message changes nothing.
  await post(last);
  await sleep(6500);
  assert.equal(toContact(contact).filter((r) => r.text).length, 1);
});

test("away: the owner answering within the window cancels the answer; staying silent, the bot answers after it", async () => {
  const { id } = await connect("away");
  const quick = uniqueId();
  await post(s.tg.businessMessage(id, quick, "are you there?"));
  await sleep(3000);
  await post(s.tg.businessMessage(id, quick, "yes, here!", { fromOwner: true }));
  const silent = uniqueId();
  s.gemini.script(silent, [{ text: "Ada is away right now and will get back to you soon." }]);
  const asked = Date.now();
  await post(s.tg.businessMessage(id, silent, "hello, a question about my order"));
  await s.tg.waitFor(() => toContact(silent).some((r) => r.text), 30_000, "the away answer");
  const answered = toContact(silent).find((r) => r.text);
  assert.ok(answered.at - asked >= 7500, `answered after the away window (${answered.at - asked} ms)`);
  await sleep(3000);
  assert.equal(s.gemini.calls(quick).length, 0, "the owner answered first: no model call");
  assert.equal(toContact(quick).length, 0, "nothing sent to that contact");
});

test("away and auto without can_reply: a suggestion without Send, no read receipt", async () => {
  const { owner, id } = await connect("auto", { rights: { can_read_messages: true } });
  const contact = uniqueId();
  s.gemini.script(contact, [{ text: "Sure." }]);
  await post(s.tg.businessMessage(id, contact, "can I book for Friday?"));
  await s.tg.waitFor(() => suggestions(owner).length === 1, 30_000, "the suggestion");
  assert.deepEqual(suggestions(owner)[0].body.reply_markup.inline_keyboard.flat().map((b) => b.text), ["Skip"]);
  assert.equal(toContact(contact).length, 0);
  assert.equal(s.tg.calls("readBusinessMessage").filter((r) => r.body.chat_id === contact).length, 0);
});

test("draft mode never marks a contact's messages read", async () => {
  const { owner, id } = await connect("draft");
  const contact = uniqueId();
  s.gemini.script(contact, [{ text: "Hello!" }]);
  await post(s.tg.businessMessage(id, contact, "hello"));
  await s.tg.waitFor(() => suggestions(owner).length === 1, 30_000, "the suggestion");
  assert.equal(s.tg.calls("readBusinessMessage").filter((r) => r.body.chat_id === contact).length, 0);
  assert.equal(s.tg.calls("sendChatAction", contact).length, 0, "no typing action in draft mode");
});

test("auto: an answer Telegram refuses (past 24 hours) is told to the owner in one line and not tried again", async () => {
  const { owner, id } = await connect("auto");
  const contact = uniqueId();
  s.gemini.script(contact, [{ text: "Sorry for the wait!" }]);
  await post(s.tg.businessMessage(id, contact, "hello from yesterday", { agoMs: 25 * 3600 * 1000 }));
  await s.tg.waitFor(() => s.tg.sent(owner).some((t) => /^I could not answer/.test(t)), 30_000, "the owner told");
  await sleep(6000);
  const told = s.tg.sent(owner).filter((t) => /^I could not answer/.test(t));
  assert.equal(told.length, 1, "told once");
  assert.match(told[0], /I could not answer Contact\d+ for you\. Not sent: Telegram refused it \(.*BUSINESS_PEER_USAGE_MISSING.*\)/);
  assert.equal(s.tg.calls("sendMessage", contact).length, 1, "tried once");
});
