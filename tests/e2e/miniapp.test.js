// The Mini App's refusals and its person API end to end: identity only from Telegram's
// signed init data (tampered, stale, another bot's, missing: 401; a user id in a body is
// ignored), another person's memory or reminder finds nothing, oversized bodies are refused,
// the page is served under a strict CSP with no inline script; and what a person changes goes
// through the commands' own rules (/memory shows the new wording, /forget's scope, the
// schedule tool's limits).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, groupText, uniqueId, TOKEN, bodyOf } from "../support/stack.js";
import { initDataFor, signInitData } from "../support/miniapp.js";

let s;
before(async () => {
  s = await startStack({ vars: { MINIAPP_URL: "https://edge.example/app" } });
});
after(async () => {
  await s?.close();
});

async function call(method, path, initData, body) {
  const headers = {};
  if (initData !== null) headers.authorization = `tma ${initData}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const r = await s.fetch(`/app/api/${path}`, { method, headers, body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body) });
  return { status: r.status, json: await bodyOf(r), headers: r.headers };
}

async function memoryOf(chat, about, value) {
  const [row] = await s.sql(
    `INSERT INTO memories (kind, chat_id, conv, about_user_id, entity, attribute, value, confidence, created_at, updated_at, supplied_by)
     VALUES ('fact', ?, ?, ?, 'someone', 'likes', ?, 0.9, 0, 0, ?) RETURNING id`,
    chat, String(chat), about, value, about,
  );
  return `m${row.id}`;
}

async function reminderOf(uid, text) {
  const now = Date.now();
  const [row] = await s.sql(
    "INSERT INTO schedules (chat_id, conv, creator_user_id, text, timezone, repeat, next_run_ms, created_at, updated_at) VALUES (?, ?, ?, ?, 'Europe/Berlin', NULL, ?, ?, ?) RETURNING id",
    uid, String(uid), uid, text, now + 86_400_000, now, now,
  );
  return row.id;
}

function people() {
  const alice = { id: uniqueId(), first_name: "Alice" };
  const bob = { id: uniqueId(), first_name: "Bob" };
  return { alice, bob, aliceData: initDataFor(alice, TOKEN), bobData: initDataFor(bob, TOKEN) };
}

test("the page is served with a strict CSP, no inline script or style, and no outside origin", async () => {
  const r = await s.fetch("/app");
  assert.equal(r.status, 200);
  const csp = r.headers.get("content-security-policy");
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /script-src 'self';/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:\/\/(?!web\.telegram\.org)/);
  assert.equal(r.headers.get("x-content-type-options"), "nosniff");
  assert.equal(r.headers.get("referrer-policy"), "no-referrer");
  // The page's files come from the JavaScript entry, the API's answers from the wasm: one policy.
  const api = await s.fetch("/app/api/me");
  assert.equal(api.headers.get("content-security-policy"), csp);
  assert.equal(api.headers.get("x-content-type-options"), "nosniff");
  const html = await r.text();
  assert.doesNotMatch(html, /<script(?![^>]*\ssrc=)[^>]*>/, "no inline script");
  assert.doesNotMatch(html, /\son[a-z]+=|\sstyle=|<style/i, "no inline handlers or styles");
  assert.doesNotMatch(html, /https?:\/\//, "nothing from another origin");
  for (const f of ["/app/app.js", "/app/app.css"]) assert.equal((await s.fetch(f)).status, 200, f);
  const js = await (await s.fetch("/app/app.js")).text();
  assert.doesNotMatch(js, /innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(/, "output is set as text");
});

test("identity only from signed init data: tampered, stale, another bot's, or missing is refused", async () => {
  const { alice, aliceData } = people();
  await memoryOf(alice.id, alice.id, "green tea");
  const ok = await call("GET", "me", aliceData);
  assert.equal(ok.status, 200, JSON.stringify(ok.json));
  assert.equal(ok.json.user.id, alice.id);
  assert.equal(ok.headers.get("cache-control"), "no-store");

  const tampered = aliceData.replace(encodeURIComponent(`"id":${alice.id}`).replace(/%22/g, "%22"), encodeURIComponent(`"id":${alice.id + 1}`));
  assert.notEqual(tampered, aliceData);
  const stale = initDataFor(alice, TOKEN, { authDate: Math.floor(Date.now() / 1000) - 86_401 });
  const otherBot = initDataFor(alice, "987654321:another-bot-token");
  const noHash = aliceData.replace(/&hash=[0-9a-f]+/, "");
  for (const [what, data] of [["tampered", tampered], ["stale", stale], ["another bot's", otherBot], ["without a hash", noHash], ["missing", null], ["empty", ""]]) {
    const r = await call("GET", "me", data);
    assert.equal(r.status, 401, `${what} init data: ${r.status}`);
    assert.equal(JSON.stringify(r.json).includes("green tea"), false);
  }
  // A valid one just inside the limit still passes.
  assert.equal((await call("GET", "me", initDataFor(alice, TOKEN, { authDate: Math.floor(Date.now() / 1000) - 86_000 }))).status, 200);
});

test("another person's memory id finds nothing; a user id in the body is never trusted", async () => {
  const { alice, bob, aliceData, bobData } = people();
  const bobs = await memoryOf(bob.id, bob.id, "bob's secret hobby");
  const alices = await memoryOf(alice.id, alice.id, "alice likes jazz");
  const me = await call("GET", "me", aliceData);
  assert.deepEqual(me.json.memories.map((m) => m.id), [alices]);
  assert.equal(JSON.stringify(me.json).includes("bob's secret"), false);
  // Alice edits and forgets Bob's id, claiming in the body to be Bob: nothing happens.
  assert.equal((await call("PUT", `memories/${bobs}`, aliceData, { text: "pwned", user_id: bob.id })).status, 404);
  assert.equal((await call("DELETE", `memories/${bobs}`, aliceData, undefined)).status, 404);
  const [still] = await s.sql("SELECT value FROM memories WHERE id = ?", Number(bobs.slice(1)));
  assert.equal(still.value, "bob's secret hobby");
  // Bob sees his, unchanged.
  assert.deepEqual((await call("GET", "me", bobData)).json.memories.map((m) => m.text), ["bob's secret hobby"]);
  // Export holds Alice's only.
  const ex = await call("GET", "export", aliceData);
  assert.equal(ex.status, 200);
  assert.equal(JSON.stringify(ex.json).includes("bob's secret"), false);
  assert.equal(JSON.stringify(ex.json).includes("alice likes jazz"), true);
});

test("an edit shows in /memory and the search index; forget one and forget all use /forget's scope", async () => {
  const { alice, aliceData } = people();
  const id = await memoryOf(alice.id, alice.id, "likes coffee");
  const second = await memoryOf(alice.id, alice.id, "plays chess");
  const r = await call("PUT", `memories/${id}`, aliceData, { text: "likes tea, not coffee" });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  const fts = await s.sql("SELECT ref FROM memory_fts WHERE memory_fts MATCH 'tea' AND ref = ?", id);
  assert.equal(fts.length, 1, "the search index follows the edit");
  assert.equal((await call("PUT", `memories/${id}`, aliceData, { text: "" })).status, 400);
  assert.equal((await call("PUT", `memories/${id}`, aliceData, { text: "x".repeat(501) })).status, 400);
  await s.webhook(privateText(alice.id, "/memory", { entities: [{ type: "bot_command", offset: 0, length: 7 }] }));
  await s.tg.waitFor(() => s.tg.sent(alice.id).length >= 1, 10_000, "the /memory reply");
  const listed = s.tg.sent(alice.id).at(-1);
  assert.match(listed, /likes tea, not coffee/);
  assert.doesNotMatch(listed, /likes coffee\b/);
  assert.equal((await call("DELETE", `memories/${second}`, aliceData)).status, 200);
  assert.equal((await call("DELETE", `memories/${second}`, aliceData)).status, 404, "gone once");
  const all = await call("DELETE", "memories", aliceData);
  assert.equal(all.status, 200);
  assert.match(all.json.done, /forgot 1 things/);
  assert.deepEqual((await call("GET", "me", aliceData)).json.memories, []);
});

test("reminders: another person's is not found; a change follows the schedule tool's rules", async () => {
  const { alice, bob, aliceData } = people();
  const mine = await reminderOf(alice.id, "call mum");
  const bobs = await reminderOf(bob.id, "bob's dentist");
  const me = await call("GET", "me", aliceData);
  assert.deepEqual(me.json.reminders.map((r) => r.id), [mine]);
  assert.match(me.json.reminders[0].next_run_local, /CES?T/, "shown in the reminder's zone");
  assert.equal((await call("DELETE", `reminders/${bobs}`, aliceData)).status, 404);
  assert.equal((await call("PUT", `reminders/${bobs}`, aliceData, { at: "2030-01-01 09:00" })).status, 404);
  const [b] = await s.sql("SELECT status FROM schedules WHERE id = ?", bobs);
  assert.equal(b.status, "active");
  // The tool's refusals: too often, in the past, too far ahead.
  const year = new Date().getUTCFullYear() + 1;
  const often = await call("PUT", `reminders/${mine}`, aliceData, { at: `${year}-01-01 09:00`, repeat: "*/5 * * * *" });
  assert.equal(often.status, 400);
  assert.match(often.json.error, /too often/);
  assert.match((await call("PUT", `reminders/${mine}`, aliceData, { at: "2001-01-01 09:00" })).json.error, /past/);
  assert.match((await call("PUT", `reminders/${mine}`, aliceData, { at: `${year + 5}-01-01 09:00` })).json.error, /too far/);
  const ok = await call("PUT", `reminders/${mine}`, aliceData, { at: `${year}-07-01 09:00`, repeat: "daily" });
  assert.equal(ok.status, 200, JSON.stringify(ok.json));
  const [row] = await s.sql("SELECT next_run_ms, repeat FROM schedules WHERE id = ?", mine);
  assert.equal(row.next_run_ms, Date.UTC(year, 6, 1, 7, 0), "09:00 in Berlin's summer time");
  assert.equal(row.repeat, "0 9 * * *");
  // A new time alone keeps the rule; "none" makes it run once.
  assert.equal((await call("PUT", `reminders/${mine}`, aliceData, { at: `${year}-07-02 10:30` })).status, 200);
  assert.equal((await s.sql("SELECT repeat FROM schedules WHERE id = ?", mine))[0].repeat, "30 10 * * *", "daily, anchored at the new time");
  assert.equal((await call("PUT", `reminders/${mine}`, aliceData, { at: `${year}-07-03 10:30`, repeat: "none" })).status, 200);
  assert.equal((await s.sql("SELECT repeat FROM schedules WHERE id = ?", mine))[0].repeat, null);
  assert.equal((await call("DELETE", `reminders/${mine}`, aliceData)).status, 200);
  assert.deepEqual((await call("GET", "me", aliceData)).json.reminders, []);
});

test("a body over the cap is refused; the export has the person's own messages, not others'", async () => {
  const { alice, aliceData } = people();
  const big = await call("PUT", "memories/m1", aliceData, JSON.stringify({ text: "x".repeat(20_000) }));
  assert.equal(big.status, 413);
  await s.webhook(privateText(alice.id, "remember my umbrella"));
  await s.tg.waitFor(() => s.tg.sent(alice.id).length >= 1, 15_000, "a reply");
  const ex = await call("GET", "export", aliceData);
  assert.equal(ex.status, 200);
  assert.match(ex.headers.get("content-disposition"), /attachment/);
  const texts = ex.json.messages_in_private_chat.map((m) => m.text);
  assert.ok(texts.some((t) => t.includes("remember my umbrella")), JSON.stringify(texts));
  const [botRows] = await s.sql("SELECT COUNT(*) AS n FROM history WHERE chat_id = ? AND role = 'bot'", alice.id);
  assert.ok(botRows.n >= 1, "the bot answered");
  assert.equal(ex.json.messages_in_private_chat.length, 1, "the bot's words are not exported as hers");
  // A signed init data with a forged field added after signing fails.
  const forged = `${aliceData}&start_param=gAAAAAAAAAAAAAAAAAAAAAAAA`;
  assert.equal((await call("GET", "me", forged)).status, 401);
  void signInitData;
});

test("the fake Telegram refuses a menu button whose Web App URL is not HTTPS, as Telegram does", async () => {
  const call = (menu_button) => fetch(`${s.tg.base}/bot${TOKEN}/setChatMenuButton`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ menu_button }) }).then((r) => r.json());
  const refused = await call({ type: "web_app", text: "Memories", web_app: { url: "http://example.com/app" } });
  assert.equal(refused.ok, false);
  assert.equal(refused.error_code, 400);
  assert.match(refused.description, /Only HTTPS links are allowed/);
  assert.equal((await call({ type: "web_app", text: "Memories", web_app: { url: "https://example.com/app" } })).ok, true);
  assert.equal(s.tg.menuButton.web_app.url, "https://example.com/app");
});

test("/memory and /reminders in a private chat carry the Mini App's button; in a group they do not", async () => {
  const uid = uniqueId();
  const cmd = (text) => ({ entities: [{ type: "bot_command", offset: 0, length: text.length }] });
  await s.webhook(privateText(uid, "/memory", cmd("/memory")));
  await s.tg.waitFor(() => s.tg.calls("editMessageReplyMarkup", uid).length >= 1, 10_000, "the button");
  const [edit] = s.tg.calls("editMessageReplyMarkup", uid);
  assert.deepEqual(s.tg.markupOf(uid, edit.body.message_id), { inline_keyboard: [[{ text: "Open to edit", web_app: { url: "https://edge.example/app" } }]] });
  await s.webhook(privateText(uid, "/reminders", cmd("/reminders")));
  await s.tg.waitFor(() => s.tg.calls("editMessageReplyMarkup", uid).length >= 2, 10_000, "the second button");
  const group = -1000000000000 - uniqueId();
  await s.webhook(groupText(group, uid, "/memory", cmd("/memory")));
  await s.tg.waitFor(() => s.tg.sent(group).length >= 1, 10_000, "the group's /memory reply");
  assert.equal(s.tg.calls("editMessageReplyMarkup", group).length, 0, "Telegram takes Web App buttons only in private chats");
});

test("a group's shared memories: members see them, only admins edit; a forged or foreign start parameter shows nothing", async () => {
  const member = { id: uniqueId(), first_name: "Mia" };
  const admin = { id: uniqueId(), first_name: "Ada" };
  const outsider = { id: uniqueId(), first_name: "Otto" };
  const G = -1000000000000 - uniqueId();
  const H = -1000000000000 - uniqueId();
  const cmd = { entities: [{ type: "bot_command", offset: 0, length: 7 }] };
  // The bot issues the group's link under /memory there.
  for (const g of [G, H]) {
    await s.webhook(groupText(g, member.id, "/memory", cmd));
    await s.tg.waitFor(() => s.tg.sent(g).length >= 1, 10_000, "the group's /memory reply");
  }
  const [{ token }] = await s.sql("SELECT token FROM miniapp_links WHERE chat_id = ?", G);
  const [{ token: tokenH }] = await s.sql("SELECT token FROM miniapp_links WHERE chat_id = ?", H);
  assert.match(s.tg.sent(G)[0], new RegExp(`\\?startapp=${token}`));
  assert.notEqual(token, tokenH);
  s.tg.setMember(G, member.id, "member");
  s.tg.setMember(G, admin.id, "administrator");
  s.tg.setMember(H, admin.id, "left");
  const [shared] = await s.sql(
    "INSERT INTO memories (kind, chat_id, conv, about_user_id, value, confidence, created_at, updated_at) VALUES ('episode', ?, ?, NULL, 'the group hikes on Sundays', 0.9, 0, 0) RETURNING id", G, String(G));
  await s.sql(
    "INSERT INTO memories (kind, chat_id, conv, about_user_id, value, confidence, created_at, updated_at, supplied_by) VALUES ('fact', ?, ?, ?, 'mia is vegetarian', 0.9, 0, 0, ?)", G, String(G), member.id, member.id);
  const as = (user, param) => initDataFor(user, TOKEN, { extra: { start_param: param } });

  const seen = await call("GET", "group", as(member, token));
  assert.equal(seen.status, 200, JSON.stringify(seen.json));
  assert.deepEqual(seen.json.memories.map((m) => m.text), ["the group hikes on Sundays"], "shared only, nothing about a member");
  assert.equal(seen.json.admin, false);
  // A member who is not an admin may not edit or forget.
  assert.equal((await call("PUT", `group/memories/m${shared.id}`, as(member, token), { text: "changed" })).status, 403);
  assert.equal((await call("DELETE", `group/memories/m${shared.id}`, as(member, token))).status, 403);
  // An outsider, a forged parameter, a foreign group's parameter, no parameter: nothing.
  for (const [what, data] of [
    ["an outsider", as(outsider, token)],
    ["a forged parameter", as(member, "g" + "A".repeat(24))],
    ["a parameter of another form", as(member, String(G))],
    ["another group's parameter (not a member there)", as(admin, tokenH)],
    ["no parameter", initDataFor(member, TOKEN)],
  ]) {
    const r = await call("GET", "group", data);
    assert.equal(r.status, 404, `${what}: ${r.status}`);
    assert.equal(JSON.stringify(r.json).includes("hikes"), false, what);
  }
  // A start parameter added to init data after signing is refused as tampered.
  assert.equal((await call("GET", "group", `${initDataFor(member, TOKEN)}&start_param=${token}`)).status, 401);
  // The admin edits.
  const edit = await call("PUT", `group/memories/m${shared.id}`, as(admin, token), { text: "the group hikes on Saturdays" });
  assert.equal(edit.status, 200, JSON.stringify(edit.json));
  const [row] = await s.sql("SELECT value FROM memories WHERE id = ?", shared.id);
  assert.equal(row.value, "the group hikes on Saturdays");
  assert.ok(s.tg.calls("getChatMember").some((c) => c.body.chat_id === G && c.body.user_id === admin.id), "membership asked of Telegram");
});

test("Business settings in the Mini App: the person's own, the commands' rules, refusals said", async () => {
  const { alice, aliceData, bob, bobData } = people();
  const shown = await call("GET", "me", aliceData);
  assert.equal(shown.status, 200);
  assert.deepEqual(shown.json.business, { mode: "draft", notes: "", connected: false, enabled: false, can_reply: false });
  const set = await call("PUT", "business", aliceData, { mode: "away", notes: "  Open 9-5.  ", user_id: bob.id });
  assert.equal(set.status, 200, JSON.stringify(set.json));
  assert.equal(set.json.mode, "away");
  assert.equal(set.json.notes, "Open 9-5.");
  assert.equal((await call("GET", "me", bobData)).json.business.mode, "draft", "a user id in the body is ignored");
  await s.webhook(privateText(alice.id, "/business notes"));
  await s.tg.waitFor(() => s.tg.sent(alice.id).some((t) => t.includes("Open 9-5.")), 15_000, "/business notes shows the page's notes");
  for (const [body, error] of [
    [{ mode: "sometimes" }, /mode is draft, away, auto or off/],
    [{ notes: "x".repeat(2001) }, /at most 2,000 characters/],
    [{ notes: 5 }, /notes are a text/],
    [{}, /nothing to change/],
  ]) {
    const r = await call("PUT", "business", aliceData, body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.match(r.json.error, error);
  }
  const cleared = await call("PUT", "business", aliceData, { notes: null });
  assert.equal(cleared.json.notes, "");
  assert.equal(cleared.json.mode, "away", "a change of the notes keeps the mode");
  assert.equal((await call("PUT", "business", null, { mode: "off" })).status, 401);
});
