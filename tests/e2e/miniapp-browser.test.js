// The Mini App in a real browser (Debian's Chromium driven by playwright-core, at a phone's
// width), opened as Telegram opens it: the signed init data and the theme in the URL fragment.
// A person edits and forgets a memory and /memory in the chat shows the change; exports their
// data; cancels a reminder; and cannot see or change another person's; a Telegram Business
// owner sets their mode and notes. Screenshots of each
// view go to docs/ for the README.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { chromium } from "playwright-core";
import { startStack, privateText, uniqueId, TOKEN, ROOT, ADMIN_TOKEN } from "../support/stack.js";
import { initDataFor } from "../support/miniapp.js";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const THEME = { bg_color: "#ffffff", text_color: "#222222", hint_color: "#8a8f98", link_color: "#2481cc", button_color: "#2481cc", button_text_color: "#ffffff", secondary_bg_color: "#f1f3f6" };
const OPERATOR = { id: 424_242_001, first_name: "Olga" };
let s;
let browser;

before(async () => {
  s = await startStack({ vars: { ADMIN_USER_IDS: String(OPERATOR.id) } });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
});
after(async () => {
  await browser?.close();
  await s?.close();
});

async function open(user, { urls, startParam } = {}) {
  const context = await browser.newContext({ viewport: { width: 390, height: 760 }, acceptDownloads: true });
  const page = await context.newPage();
  const errors = [];
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  if (urls) page.on("request", (r) => urls.push(r.url()));
  if (!user) {
    await page.goto(`${s.url.href.replace(/\/$/, "")}/app`);
    return { page, errors };
  }
  const hash = new URLSearchParams({ tgWebAppData: initDataFor(user, TOKEN, startParam ? { extra: { start_param: startParam } } : {}), tgWebAppVersion: "9.0", tgWebAppThemeParams: JSON.stringify(THEME) });
  await page.goto(`${s.url.href.replace(/\/$/, "")}/app#${hash}`);
  await page.waitForSelector("body[data-loaded='1']", { timeout: 15_000 });
  return { page, errors };
}

async function seed(uid, value, chat = uid) {
  const [row] = await s.sql(
    `INSERT INTO memories (kind, chat_id, conv, about_user_id, entity, attribute, value, confidence, created_at, updated_at, supplied_by)
     VALUES ('fact', ?, ?, ?, 'someone', NULL, ?, 0.9, ?, ?, ?) RETURNING id`,
    chat, String(chat), uid, value, Date.now(), Date.now(), uid,
  );
  return `m${row.id}`;
}

/** The README's screenshots: written to docs/ when SCREENSHOTS=1 (so a test run leaves the
 *  tracked files alone), else to .tmp/screenshots/ for a look after a failure. */
function shot(page, name) {
  const dir = process.env.SCREENSHOTS === "1" ? path.join(ROOT, "docs") : path.join(ROOT, ".tmp/screenshots");
  fs.mkdirSync(dir, { recursive: true });
  return page.screenshot({ path: path.join(dir, name), fullPage: false });
}

test("a person edits and forgets a memory and /memory shows it; exports their data; cancels a reminder", async () => {
  const alice = { id: uniqueId(), first_name: "Alice" };
  const tea = await seed(alice.id, "drinks coffee every morning");
  const cat = await seed(alice.id, "has a cat called Miso");
  await seed(alice.id, "is learning Portuguese");
  await s.webhook(privateText(alice.id, "remind me to call mum"));
  await s.tg.waitFor(() => s.tg.sent(alice.id).length >= 1, 15_000, "a reply");
  const now = Date.now();
  const [rem] = await s.sql(
    "INSERT INTO schedules (chat_id, conv, creator_user_id, text, timezone, repeat, next_run_ms, created_at, updated_at) VALUES (?, ?, ?, 'call mum', 'Europe/Lisbon', '0 18 * * 0', ?, ?, ?) RETURNING id",
    alice.id, String(alice.id), alice.id, now + 3 * 86_400_000, now, now,
  );
  const { page, errors } = await open(alice);
  assert.equal(await page.textContent("#hello"), "Hello, Alice");
  await shot(page, "miniapp-memories.png");

  // Edit one.
  const item = page.locator(`li[data-id='${tea}']`);
  await item.getByRole("button", { name: "Edit" }).click();
  await item.locator("textarea").fill("drinks green tea, not coffee");
  await item.getByRole("button", { name: "Save" }).click();
  await page.locator(`li[data-id='${tea}'] .text`, { hasText: "drinks green tea, not coffee" }).waitFor({ timeout: 10_000 });
  // Forget another.
  await page.locator(`li[data-id='${cat}']`).getByRole("button", { name: "Forget" }).click();
  await page.locator(`li[data-id='${cat}']`).waitFor({ state: "detached", timeout: 10_000 });

  // /memory in the chat shows the same.
  const before = s.tg.sent(alice.id).length;
  await s.webhook(privateText(alice.id, "/memory", { entities: [{ type: "bot_command", offset: 0, length: 7 }] }));
  await s.tg.waitFor(() => s.tg.sent(alice.id).length > before, 10_000, "the /memory reply");
  const listed = s.tg.sent(alice.id).at(-1);
  assert.match(listed, /drinks green tea, not coffee/);
  assert.doesNotMatch(listed, /Miso/);
  assert.doesNotMatch(listed, /coffee every morning/);

  // Export.
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#export")]);
  const exported = JSON.parse(fs.readFileSync(await download.path(), "utf8"));
  assert.equal(exported.user_id, alice.id);
  assert.ok(exported.memories_and_notes.some((m) => m.text === "drinks green tea, not coffee"));
  assert.ok(!exported.memories_and_notes.some((m) => /Miso/.test(m.text)));
  assert.ok(exported.reminders.some((r) => r.text === "call mum"));
  assert.ok(exported.messages_in_private_chat.some((m) => m.text.includes("remind me to call mum")));

  // Reminders: next run in its zone; cancel.
  await page.click("[data-tab='reminders']");
  const r = page.locator(`#reminder-list li[data-id='${rem.id}']`);
  assert.match(await r.textContent(), /WES?T/, "Lisbon's time");
  await shot(page, "miniapp-reminders.png");
  await r.getByRole("button", { name: "Cancel reminder" }).click();
  await r.waitFor({ state: "detached", timeout: 10_000 });
  const [row] = await s.sql("SELECT status FROM schedules WHERE id = ?", rem.id);
  assert.equal(row.status, "cancelled");

  await page.click("[data-tab='usage']");
  assert.match(await page.textContent("#usage-text"), /Budgets/);
  await shot(page, "miniapp-usage.png");
  assert.deepEqual(errors.filter((e) => !/status of 40[0-9]/.test(e)), [], "no script or CSP errors");
});

test("a person cannot see or change another person's memories or reminders", async () => {
  const alice = { id: uniqueId(), first_name: "Alice" };
  const bob = { id: uniqueId(), first_name: "Bob" };
  const secret = await seed(alice.id, "alice's private plan");
  await seed(bob.id, "bob likes chess");
  const now = Date.now();
  const [rem] = await s.sql(
    "INSERT INTO schedules (chat_id, conv, creator_user_id, text, timezone, repeat, next_run_ms, created_at, updated_at) VALUES (?, ?, ?, 'alice dentist', 'UTC', NULL, ?, ?, ?) RETURNING id",
    alice.id, String(alice.id), alice.id, now + 86_400_000, now, now,
  );
  const { page } = await open(bob);
  assert.equal(await page.textContent("#hello"), "Hello, Bob");
  const body = await page.textContent("body");
  assert.match(body, /bob likes chess/);
  assert.doesNotMatch(body, /alice's private plan|alice dentist/);
  // From Bob's page, with his own signed init data, Alice's ids and a forged user id in a body.
  const results = await page.evaluate(async ({ secret, rem, alice }) => {
    const initData = new URLSearchParams(location.hash.slice(1)).get("tgWebAppData");
    const headers = { authorization: "tma " + initData, "content-type": "application/json" };
    const go = (method, path, body) => fetch("/app/api/" + path, { method, headers, body: body && JSON.stringify(body) }).then((r) => r.status);
    return [
      await go("PUT", "memories/" + secret, { text: "hacked", user_id: alice }),
      await go("DELETE", "memories/" + secret),
      await go("DELETE", "reminders/" + rem),
      await go("PUT", "reminders/" + rem, { at: "2031-01-01 10:00" }),
    ];
  }, { secret, rem: rem.id, alice: alice.id });
  assert.deepEqual(results, [404, 404, 404, 404]);
  const [m] = await s.sql("SELECT value FROM memories WHERE id = ?", Number(secret.slice(1)));
  assert.equal(m.value, "alice's private plan");
  const [r] = await s.sql("SELECT status FROM schedules WHERE id = ?", rem.id);
  assert.equal(r.status, "active");
});

/** The costs API's rows summed per day: what the token chart must have been given. */
async function tokensPerDay() {
  const costs = await s.api("GET", "costs?period=all");
  assert.equal(costs.status, 200);
  const days = [...new Set(costs.json.rows.map((r) => r.day))].sort();
  const sum = (f) => days.map((d) => costs.json.rows.filter((r) => r.day === d).reduce((n, r) => n + f(r), 0));
  return { days, input: sum((r) => r.prompt_tokens - r.cached_tokens), cached: sum((r) => r.cached_tokens), output: sum((r) => r.output_tokens), cost: costs.json.total_cost_usd };
}

test("an operator's charts render from stored usage, the numbers given to them are the costs API's", async () => {
  // Real usage: answered messages (the fake Gemini reports usage; the turns store it).
  for (const text of ["hello there", "what is the plan for today?"]) {
    const uid = uniqueId();
    s.gemini.script(uid, [{ text: "Sure, here it is." }]);
    await s.webhook(privateText(uid, text));
    await s.tg.waitFor(() => s.tg.sent(uid).length >= 1, 15_000, "a reply");
  }
  const expected = await tokensPerDay();
  assert.ok(expected.days.length >= 1 && expected.input.reduce((a, b) => a + b, 0) > 0, "usage was stored");

  const { page, errors } = await open(OPERATOR);
  await page.click("[data-tab='ops']");
  await page.waitForSelector("body[data-ops='1']", { timeout: 15_000 });
  const given = await page.evaluate(() => window.miniappCharts);
  const tokens = given["chart-tokens"];
  assert.deepEqual(tokens.series.map((x) => x.label), ["input (not cached)", "cached input", "output"]);
  // Each day of the costs API has its figures at its place; every other day shown is zero.
  const at = (series, day) => series.values[tokens.days.indexOf(day)];
  for (const [i, day] of expected.days.entries()) {
    assert.ok(tokens.days.includes(day), day);
    assert.equal(at(tokens.series[0], day), expected.input[i], `input ${day}`);
    assert.equal(at(tokens.series[1], day), expected.cached[i], `cached ${day}`);
    assert.equal(at(tokens.series[2], day), expected.output[i], `output ${day}`);
  }
  const total = (xs) => xs.reduce((a, b) => a + b, 0);
  assert.equal(total(tokens.series[0].values), total(expected.input));
  assert.equal(total(tokens.series[2].values), total(expected.output));
  assert.ok(tokens.days.length >= 14, "at least two weeks shown");
  const costSum = given["chart-cost"].series.flatMap((x) => x.values).reduce((a, b) => a + b, 0);
  assert.ok(Math.abs(costSum - expected.cost) < 1e-5, `${costSum} vs ${expected.cost}`);
  assert.ok(given["chart-activity"].series[2].values.reduce((a, b) => a + b, 0) >= 2, "turns counted");
  // uPlot drew them (canvas), not an empty box.
  assert.equal(await page.locator("#chart-tokens canvas").count(), 1);
  assert.match(await page.textContent("#free-plan"), /estimate/i);
  await shot(page, "miniapp-operator.png");
  assert.deepEqual(errors.filter((e) => !/status of 40[0-9]/.test(e)), []);

  // A person who is not an operator gets nothing from the operators' routes.
  const other = await open({ id: uniqueId(), first_name: "Nobody" });
  const status = await other.page.evaluate(async () => {
    const initData = new URLSearchParams(location.hash.slice(1)).get("tgWebAppData");
    return (await fetch("/app/api/ops/costs", { headers: { authorization: "tma " + initData } })).status;
  });
  assert.equal(status, 403);
});

test("the admin token typed into the page opens the operators' view, and never appears in a URL", async () => {
  const urls = [];
  const { page } = await open(null, { urls });
  await page.click("[data-tab='ops']");
  await page.fill("#admin-token", ADMIN_TOKEN);
  await page.click("#token-form button[type='submit']");
  await page.waitForSelector("body[data-ops='1']", { timeout: 15_000 });
  const expected = await tokensPerDay();
  const given = await page.evaluate(() => window.miniappCharts["chart-tokens"]);
  assert.equal(given.series[0].values.reduce((a, b) => a + b, 0), expected.input.reduce((a, b) => a + b, 0));
  assert.ok(urls.length >= 4, urls.join(" "));
  for (const u of urls) assert.equal(u.includes(ADMIN_TOKEN) || u.includes(encodeURIComponent(ADMIN_TOKEN)), false, u);
  assert.equal(await page.inputValue("#admin-token"), "", "the field is cleared");
});

test("a group's shared memories open from the bot's link: members read, an admin corrects one", async () => {
  const admin = { id: uniqueId(), first_name: "Ada" };
  const member = { id: uniqueId(), first_name: "Mia" };
  const G = -1000000000000 - uniqueId();
  const token = "gBx7_kQ2-pLm9ZtR4vW8yN3cQ";
  await s.sql("INSERT INTO chats (chat_id, kind, title, first_seen_at, last_seen_at) VALUES (?, 'supergroup', 'Hiking club', 0, 0)", G);
  await s.sql("INSERT INTO miniapp_links (token, chat_id, created_at) VALUES (?, ?, 0)", token, G);
  s.tg.setMember(G, admin.id, "creator");
  s.tg.setMember(G, member.id, "member");
  const [hike] = await s.sql(
    "INSERT INTO memories (kind, chat_id, conv, about_user_id, value, confidence, created_at, updated_at) VALUES ('episode', ?, ?, NULL, 'the club hikes every second Sunday', 0.9, ?, ?) RETURNING id", G, String(G), Date.now(), Date.now());
  await s.sql(
    "INSERT INTO memories (kind, chat_id, conv, about_user_id, value, confidence, created_at, updated_at) VALUES ('fact', ?, ?, NULL, 'meeting point: the old bridge', 0.9, ?, ?)", G, String(G), Date.now(), Date.now());

  const m = await open(member, { startParam: token });
  await m.page.waitForSelector("body[data-group='1']", { timeout: 10_000 });
  await m.page.click("[data-tab='group']");
  assert.match(await m.page.textContent("#group-list"), /second Sunday/);
  assert.equal(await m.page.locator("#group-list button").count(), 0, "a member has no edit buttons");

  const a = await open(admin, { startParam: token });
  await a.page.waitForSelector("body[data-group='1']", { timeout: 10_000 });
  await a.page.click("[data-tab='group']");
  assert.match(await a.page.textContent("#group-hint"), /Hiking club: shared memories \(you are an admin/);
  await shot(a.page, "miniapp-group.png");
  const item = a.page.locator(`#group-list li[data-id='m${hike.id}']`);
  await item.getByRole("button", { name: "Edit" }).click();
  await item.locator("textarea").fill("the club hikes every Sunday");
  await item.getByRole("button", { name: "Save" }).click();
  await a.page.locator(`#group-list li[data-id='m${hike.id}'] .text`, { hasText: "the club hikes every Sunday" }).waitFor({ timeout: 10_000 });
  const [row] = await s.sql("SELECT value FROM memories WHERE id = ?", hike.id);
  assert.equal(row.value, "the club hikes every Sunday");
});

test("an owner sets their Business mode and notes in the page; /business and a contact's request follow them", async () => {
  const ada = { id: uniqueId(), first_name: "Ada" };
  const id = `bc-${ada.id}`;
  await s.webhook(s.tg.connectBusiness(ada.id, { id, name: "Ada" }));
  const { page, errors } = await open(ada);
  await page.click("[data-tab='business']");
  assert.equal(await page.inputValue("#business-mode"), "draft");
  assert.match(await page.textContent("#business-state"), /Connected: I may reply in your chats\./);
  await page.selectOption("#business-mode", "auto");
  await page.fill("#business-notes", "Open 9 to 5, closed on Sundays.");
  await page.click("#business-save");
  await page.waitForFunction(() => document.getElementById("status").textContent === "Saved.");
  await shot(page, "miniapp-business.png");
  const before = s.tg.sent(ada.id).length;
  await s.webhook(privateText(ada.id, "/business"));
  await s.tg.waitFor(() => s.tg.sent(ada.id).length > before, 15_000, "the /business answer");
  assert.match(s.tg.sent(ada.id).at(-1), /^Mode: auto /);
  const contact = uniqueId();
  s.gemini.script(contact, [{ text: "We are closed on Sundays." }]);
  await s.webhook(s.tg.businessMessage(id, contact, "open on Sunday?"));
  await s.tg.waitFor(() => s.tg.calls("sendMessage", contact).some((r) => r.body.business_connection_id === id && r.text), 30_000, "the auto answer");
  assert.match(JSON.stringify(s.gemini.calls(contact)[0].body.systemInstruction), /Open 9 to 5, closed on Sundays\./, "the notes reach the contact's request");
  assert.deepEqual(errors.filter((e) => !/status of 40[0-9]/.test(e)), [], "no script or CSP errors");
});
