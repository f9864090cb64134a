// Telegram Business (issue 49), the connection: the bot keeps the connections people make to
// it from their business accounts, looks an unknown one up with getBusinessConnection, tells an
// owner the access policy refuses why (once), lets an owner pick a mode with /business, and
// caps an owner's suggestions a day (BUSINESS_DAILY_LIMIT). A refused owner's contacts get
// nothing; a contact's business messages are never taken for their own private chat with the
// bot. The fake Telegram answers getBusinessConnection as the Bot API server does (an unknown
// id: "business connection not found"). Draft mode: business-draft.test.js.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, cmd, uniqueId, sleep, TOKEN } from "../support/stack.js";

const OWNER = 7_100_000_001;
const OWNER_LOOKED_UP = 7_100_000_002;
const CONTACT = 7_100_000_003; // also talks to the bot directly
const REFUSED = 7_100_000_010;
const REFUSED_RETRIED = 7_100_000_011;
const REFUSED_LOOKED_UP = 7_100_000_012;
const OWNER_LIMITED = 7_100_000_004;

let s;
before(async () => {
  s = await startStack({ vars: { DM_POLICY: "allowlist", DM_ALLOWLIST: [OWNER, OWNER_LOOKED_UP, CONTACT, OWNER_LIMITED].join(","), BUSINESS_DAILY_LIMIT: "1" } });
});
after(async () => {
  await s?.close();
});

/** Sends `/business …` in the owner's private chat and returns the bot's answer. */
async function business(owner, args = "") {
  // The bot's answers in the owner's chat, not its suggestions (those carry buttons).
  const answers = () => s.tg.calls("sendMessage", owner).filter((r) => r.text !== undefined && !r.body.reply_markup);
  const before = answers().length;
  const r = await s.webhook(cmd(owner, `/business${args ? ` ${args}` : ""}`));
  assert.equal(r.status, 200);
  await s.tg.waitFor(() => answers().length > before, 15_000, `the answer to /business ${args}`);
  return answers().at(-1).text;
}

async function post(update) {
  const r = await s.webhook(update);
  assert.equal(r.status, 200, "Telegram always gets 200 for a business update");
}

const refusalsTo = (chat) => s.tg.sent(chat).filter((t) => /cannot act for you/.test(t));

test("an admitted owner connects: /business shows the connection, its rights and the mode; modes are kept; changes apply, older ones do not", async () => {
  assert.match(await business(OWNER), /No Telegram Business account is connected/);
  const connected = s.tg.connectBusiness(OWNER, { id: "bc-owner" });
  await post(connected);
  let status = await business(OWNER);
  assert.match(status, /Mode: draft/, "draft by default");
  assert.match(status, /I may reply in your chats, and may mark messages as read/);
  assert.match(status, /I suggest a reply to each contact here/);
  assert.match(await business(OWNER, "away"), /^Business mode set to away\.[\s\S]*Mode: away \(I answer a contact myself when you have not answered them within 5 minutes\)/);
  assert.match(await business(OWNER), /Mode: away/, "the mode is kept");
  assert.match(await business(OWNER, "sometimes"), /^Use \/business draft/);
  assert.match(await business(OWNER), /Mode: away/, "an unclear argument changes nothing");

  // Rights taken away (no can_reply), then the connection turned off.
  await post(s.tg.connectBusiness(OWNER, { id: "bc-owner", rights: { can_read_messages: true } }));
  status = await business(OWNER);
  assert.match(status, /may not reply \(only suggestions, without Send, in every mode\)/);
  await post(s.tg.connectBusiness(OWNER, { id: "bc-owner", rights: null, enabled: false }));
  assert.match(await business(OWNER), /connection is turned off/);
  // A late redelivery of an older update (the first, by its update id) changes nothing.
  await post(connected);
  assert.match(await business(OWNER), /connection is turned off/, "an older update does not switch it back on");
  assert.equal(refusalsTo(OWNER).length, 0, "an admitted owner is not told they are refused");
  assert.equal(s.gemini.calls(OWNER).length, 0, "no model call for any of it");
});

test("an owner the access policy refuses is told why exactly once; their contacts get nothing", async () => {
  const contact = uniqueId();
  const update = s.tg.connectBusiness(REFUSED, { id: "bc-refused" });
  await post(update);
  await s.tg.waitFor(() => refusalsTo(REFUSED).length === 1, 15_000, "the refused owner is told");
  // Redelivered, changed, and a contact writing: nothing more to the owner, nothing to anyone.
  await post(update);
  await post(s.tg.connectBusiness(REFUSED, { id: "bc-refused", rights: { can_reply: true } }));
  await post(s.tg.businessMessage("bc-refused", contact, "hello, are you open today?"));
  await sleep(1500);
  assert.deepEqual(s.tg.sent(REFUSED), refusalsTo(REFUSED), "nothing but the one notice");
  assert.equal(refusalsTo(REFUSED).length, 1, "told once");
  assert.match(refusalsTo(REFUSED)[0], /only works for the people its operator admits/);
  assert.equal(s.tg.sent(contact).length, 0, "the contact gets nothing");
  assert.equal(s.gemini.calls(contact).length + s.gemini.calls(REFUSED).length, 0, "no model call");
});

test("a notice Telegram refused is tried again by the owner's next business update", async () => {
  s.tg.fault({ method: "sendMessage", chatId: REFUSED_RETRIED, status: 500, times: 1 });
  await post(s.tg.connectBusiness(REFUSED_RETRIED, { id: "bc-retried" }));
  await s.tg.waitFor(() => s.tg.calls("sendMessage", REFUSED_RETRIED).length === 1, 15_000, "the first try");
  assert.equal(refusalsTo(REFUSED_RETRIED).length, 0, "the first try failed");
  await post(s.tg.businessMessage("bc-retried", uniqueId(), "hi"));
  await s.tg.waitFor(() => refusalsTo(REFUSED_RETRIED).length === 1, 15_000, "the notice, on the next update");
  await post(s.tg.businessMessage("bc-retried", uniqueId(), "hi again"));
  await sleep(1000);
  assert.equal(refusalsTo(REFUSED_RETRIED).length, 1, "and only once");
});

test("a business message naming a connection the bot never heard of is looked up with getBusinessConnection; an id Telegram does not know is ignored", async () => {
  // Connected while the bot's webhook was elsewhere: only the contact's message arrives.
  s.tg.connectBusiness(OWNER_LOOKED_UP, { id: "bc-looked-up", rights: { can_reply: true } });
  s.tg.connectBusiness(REFUSED_LOOKED_UP, { id: "bc-refused-looked-up" });
  await post(s.tg.businessMessage("bc-looked-up", uniqueId(), "hello"));
  await post(s.tg.businessMessage("bc-refused-looked-up", uniqueId(), "hello"));
  await s.tg.waitFor(() => refusalsTo(REFUSED_LOOKED_UP).length === 1, 15_000, "the looked-up refused owner is told");
  assert.match(await business(OWNER_LOOKED_UP), /I may reply in your chats, and may not mark messages as read/, "the looked-up connection is kept");
  const lookups = s.tg.calls("getBusinessConnection").length;
  await post(s.tg.businessMessage("bc-looked-up", uniqueId(), "hello again"));
  await sleep(500);
  assert.equal(s.tg.calls("getBusinessConnection").length, lookups, "a known connection is not looked up again");

  const before = s.tg.requests.length;
  const contact = uniqueId();
  await post(s.tg.businessMessage("bc-nobody-knows", contact, "hello"));
  await sleep(500);
  const after = s.tg.requests.slice(before);
  assert.deepEqual(after.map((r) => [r.method, r.fault]), [["getBusinessConnection", undefined]], "one lookup, nothing sent");
  assert.equal(s.tg.sent(contact).length, 0);
});

test("a contact who also talks to the bot directly: their business messages never reach their private chat with the bot, and a command there is just text", async () => {
  s.gemini.script(CONTACT, [{ text: "Hello there." }]);
  await post(privateText(CONTACT, "hi bot"));
  await s.tg.waitFor(() => s.tg.sent(CONTACT).length === 1, 20_000, "the answer in the contact's own chat");
  await sleep(500);
  const calls = s.gemini.calls(CONTACT).length;
  const [stored] = await s.sql("SELECT COUNT(*) AS n FROM messages WHERE chat_id = ?", CONTACT);
  // The contact writes to the owner's business account (connected, may reply): a
  // command-looking text too, and the owner answers there.
  await post(s.tg.connectBusiness(OWNER, { id: "bc-owner-live" }));
  await post(s.tg.businessMessage("bc-owner-live", CONTACT, "/forget all"));
  await post(s.tg.businessMessage("bc-owner-live", CONTACT, "what are your opening hours?"));
  await post(s.tg.businessMessage("bc-owner-live", CONTACT, "we open at 9", { fromOwner: true }));
  await sleep(1500);
  assert.equal(s.tg.sent(CONTACT).length, 1, "nothing more reaches the contact");
  assert.equal(s.gemini.calls(CONTACT).length, calls, "no model call");
  const [now] = await s.sql("SELECT COUNT(*) AS n FROM messages WHERE chat_id = ?", CONTACT);
  assert.equal(now.n, stored.n, "the contact's private conversation with the bot (what its model reads) is as it was");
});

test("BUSINESS_DAILY_LIMIT caps an owner's suggestions a day: past it, contacts ask the model nothing", async () => {
  await post(s.tg.connectBusiness(OWNER_LIMITED, { id: "bc-limited" }));
  const first = uniqueId();
  const second = uniqueId();
  s.gemini.script(first, [{ text: "Hello!" }]);
  await post(s.tg.businessMessage("bc-limited", first, "hi"));
  await s.tg.waitFor(() => s.tg.calls("sendMessage", OWNER_LIMITED).some((r) => r.body.reply_markup), 30_000, "the day's one suggestion");
  await post(s.tg.businessMessage("bc-limited", second, "hi too"));
  await sleep(8000);
  assert.equal(s.gemini.calls(second).length, 0, "the limit (1) is reached: no model call");
  assert.equal(s.tg.calls("sendMessage", OWNER_LIMITED).filter((r) => r.body.reply_markup).length, 1);
});

test("getBusinessConnection failing in a way that may pass: the message is not acknowledged, so Telegram's redelivery finds the connection", async () => {
  const owner = 7_100_000_005;
  s.tg.connectBusiness(owner, { id: "bc-flaky" }); // made while the webhook was elsewhere
  s.tg.fault({ method: "getBusinessConnection", status: 502, times: 1 });
  const update = s.tg.businessMessage("bc-flaky", uniqueId(), "hello?");
  const first = await s.webhook(update);
  assert.ok(first.status >= 500, `Telegram redelivers (${first.status})`);
  assert.equal((await s.webhook(update)).status, 200);
  // The owner is refused by the allowlist: the redelivery found the connection, so they are told.
  await s.tg.waitFor(() => refusalsTo(owner).length === 1, 15_000, "the connection found on the redelivery");
});

test("the fake Telegram refuses Business calls as the Bot API does", async () => {
  const call = async (method, body) => (await fetch(`${s.tg.base}/bot${TOKEN}/${method}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })).json();
  const owner = uniqueId();
  const contact = uniqueId();
  s.tg.connectBusiness(owner, { id: "bc-fake", rights: { can_reply: true } });
  s.tg.connectBusiness(uniqueId(), { id: "bc-fake-off", enabled: false });
  const send = (extra) => call("sendMessage", { chat_id: contact, text: "hi", business_connection_id: "bc-fake", ...extra });
  assert.match((await call("getBusinessConnection", { business_connection_id: "nope" })).description, /^Bad Request: business connection not found$/);
  assert.match((await send({ business_connection_id: "nope" })).description, /business connection not found/);
  assert.match((await send({ business_connection_id: "bc-fake-off" })).description, /BOT_ACCESS_FORBIDDEN/);
  assert.match((await send()).description, /BUSINESS_PEER_USAGE_MISSING/, "the contact never wrote");
  assert.match((await call("sendChatAction", { chat_id: contact, action: "typing", business_connection_id: "bc-fake-off" })).description, /BOT_ACCESS_FORBIDDEN/);
  assert.match((await call("sendMessageDraft", { chat_id: contact, draft_id: 1, text: "x", business_connection_id: "bc-fake" })).description, /not available in business chats/);
  s.tg.businessMessage("bc-fake", contact, "hello");
  const sent = await send();
  assert.equal(sent.ok, true);
  assert.equal(sent.result.from.id, owner, "sent as the owner's account");
  assert.equal(sent.result.sender_business_bot.is_bot, true);
  assert.match((await call("readBusinessMessage", { business_connection_id: "bc-fake", chat_id: contact, message_id: 1 })).description, /BOT_ACCESS_FORBIDDEN/, "no can_read_messages");
  const button = (data) => ({ inline_keyboard: [[{ text: "b", callback_data: data }]] });
  assert.match((await call("sendMessage", { chat_id: owner, text: "x", reply_markup: button("d".repeat(65)) })).description, /BUTTON_DATA_INVALID/);
  const shown = await call("sendMessage", { chat_id: owner, text: "x", reply_markup: button("ok") });
  const press = s.tg.pressButton(owner, shown.result.message_id, owner, "ok").callback_query.id;
  assert.match((await call("answerCallbackQuery", { callback_query_id: press, text: "t".repeat(201) })).description, /MESSAGE_TOO_LONG/);
  assert.equal((await call("answerCallbackQuery", { callback_query_id: press })).ok, true);
  assert.match((await call("answerCallbackQuery", { callback_query_id: press })).description, /query is too old/, "answered once");
  assert.match((await call("answerCallbackQuery", { callback_query_id: "unknown" })).description, /query is too old/);
  assert.match((await call("editMessageText", { chat_id: owner, message_id: 999_999_999, text: "y" })).description, /message to edit not found/);
  assert.match((await call("editMessageText", { chat_id: owner, message_id: shown.result.message_id, text: "x", reply_markup: button("ok") })).description, /message is not modified/);
});

test("a malformed business_connection is acknowledged and ignored", async () => {
  const r = await s.webhook({ update_id: 1, business_connection: { id: "x", user_chat_id: 5, date: 1 } });
  assert.equal(r.status, 200);
  const [row] = await s.sql("SELECT COUNT(*) AS n FROM business_connections WHERE id = 'x'");
  assert.equal(row.n, 0);
});

test("BUSINESS=off: business updates are ignored and /business says so", async () => {
  const off = await startStack({ vars: { BUSINESS: "off", DM_POLICY: "allowlist", DM_ALLOWLIST: String(OWNER) } });
  try {
    const r = await off.webhook(off.tg.connectBusiness(REFUSED, { id: "bc-off" }));
    assert.equal(r.status, 200);
    await off.webhook(off.tg.businessMessage("bc-off", uniqueId(), "hello"));
    await off.webhook(cmd(OWNER, "/business auto"));
    await off.tg.waitFor(() => off.tg.sent(OWNER).length === 1, 15_000, "the answer to /business");
    assert.match(off.tg.sent(OWNER)[0], /turned off for this bot/);
    await sleep(500);
    assert.equal(off.tg.sent(REFUSED).length, 0, "nobody is told anything");
    assert.equal(off.tg.calls("getBusinessConnection").length, 0);
  } finally {
    await off.close();
  }
});
