// The local playground in a real browser (Debian's Chromium driven by playwright-core): type
// in the web chat, see the bot's reply and reaction; play Telegram Business (connect, a contact
// writes, press the suggestion's Send). The worker runs as under `npm run dev`,
// pointed at the playground's Telegram stand-in and its offline model.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { chromium } from "playwright-core";
import { startPlayground, CHATS, PEOPLE } from "../../tools/playground.js";
import { startWorker, TOKEN, WEBHOOK_SECRET, ROOT } from "../support/stack.js";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
let playground;
let worker;
let browser;

before(async () => {
  playground = await startPlayground({ port: 0, token: TOKEN, secret: WEBHOOK_SECRET, workerUrl: "http://127.0.0.1:9", offlineModel: true });
  // As `npm run dev` starts it: crew mode in the playground's crew room.
  // Pictures on, as `npm run dev` turns them on with the stand-in model.
  worker = await startWorker({ TELEGRAM_API_BASE: playground.base, GEMINI_API_BASE: playground.base, CREW: "critic,builder,moderator", CREW_CHATS: String(CHATS.crew.id), IMAGE_MODEL: "on" });
  playground.setWorkerUrl(worker.url.href);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
});

after(async () => {
  await browser?.close();
  await worker?.server.close();
  await playground?.close();
});

test("the web chat: a private message gets the offline model's reply and a reaction; a group mention is answered", async () => {
  const page = await browser.newPage();
  await page.goto(playground.base);
  assert.match(await page.textContent("#mode"), /Offline stand-in model/);

  await page.fill("#input-dm", "Hello from the browser");
  await page.press("#input-dm", "Enter");
  const reply = page.locator("#log-dm .msg.bot", { hasText: "You said: “Hello from the browser”" });
  await reply.waitFor({ timeout: 15_000 });
  assert.match(await reply.textContent(), /offline stand-in model/);
  const mine = page.locator("#log-dm .msg.me", { hasText: "Hello from the browser" });
  await mine.locator(".reaction", { hasText: "👍" }).waitFor({ timeout: 10_000 });
  const bubbles = await page.locator("#log-dm .msg").allTextContents();
  assert.ok(bubbles.findIndex((t) => t.includes("Hello from the browser")) < bubbles.findIndex((t) => t.includes("You said")));

  await page.selectOption("#as-group", "bob");
  await page.fill("#input-group", "just chatting, nobody asked the bot");
  await page.press("#input-group", "Enter");
  await page.fill("#input-group", "@edge_playground_bot what's up?");
  await page.press("#input-group", "Enter");
  const groupReply = page.locator("#log-group .msg.bot", { hasText: "what's up?" });
  await groupReply.waitFor({ timeout: 15_000 });
  assert.match(await groupReply.textContent(), /↩ #\d+/, "threaded to the question");
  assert.equal(await page.locator("#log-group .msg.bot").count(), 1, "chatter is not answered");

  fs.mkdirSync(path.join(ROOT, ".tmp"), { recursive: true });
  await page.screenshot({ path: path.join(ROOT, ".tmp/playground.png"), fullPage: true });
});

test("the web chat sends a photo: the bot fetches it from the stand-in and the offline model says what it received", async () => {
  const page = await browser.newPage();
  await page.goto(playground.base);
  const png = Buffer.from("89504e470d0a1a0a0000000d4948445200000001000000010806000000", "hex");
  await page.fill("#input-dm", "what is in this picture?");
  await page.setInputFiles("#file-dm", { name: "cat.png", mimeType: "image/png", buffer: png });
  await page.locator("#log-dm .msg.me", { hasText: `[photo cat.png, ${png.length} bytes] what is in this picture?` }).waitFor({ timeout: 10_000 });
  const reply = page.locator("#log-dm .msg.bot", { hasText: `I received image/jpeg (${png.length} bytes)` });
  await reply.waitFor({ timeout: 15_000 });
  // The worker fetched the file through getFile and the download, as from Telegram.
  assert.ok(playground.telegram.calls("getFile").length >= 1);
  assert.ok(playground.telegram.calls("download").some((c) => c.body.file_path.endsWith("/cat.png")));
});

test("pictures with no tokens: \"draw ...\" shows a PNG the stand-in made; \"make it brighter\" edits the picture the bot sent", async () => {
  const page = await browser.newPage();
  await page.goto(playground.base);
  await page.fill("#input-dm", "draw a lighthouse at night");
  await page.press("#input-dm", "Enter");
  const first = page.locator("#log-dm .msg.bot img");
  await first.first().waitFor({ timeout: 20_000 });
  assert.match(await first.first().getAttribute("src"), /^data:image\/png;base64,iVBORw0KGgo/, "a real PNG");
  const sent = playground.telegram.calls("sendPhoto").filter((r) => r.photo);
  assert.equal(sent.length, 1);
  await page.fill("#input-dm", "make it brighter");
  await page.press("#input-dm", "Enter");
  await page.locator("#log-dm .msg.bot img").nth(1).waitFor({ timeout: 20_000 });
  await page.locator("#log-dm .msg.bot", { hasText: "an edit of 1 photo(s)" }).waitFor({ timeout: 5_000 });
  // The edit fetched the bot's own picture from the stand-in, as from Telegram.
  assert.ok(playground.telegram.calls("download").some((c) => c.body.file_path.startsWith("photos/")));
});

test("the crew room: the personas answer in turn, each shown as its own sender (the tests above run with the crew configured too)", async () => {
  const page = await browser.newPage();
  await page.goto(playground.base);
  await page.fill("#input-crew", "@edge_playground_bot plan a picnic");
  await page.press("#input-crew", "Enter");
  const personas = page.locator("#log-crew .msg.bot .who");
  await page.locator("#log-crew .msg.bot", { hasText: "Moderator here" }).waitFor({ timeout: 20_000 });
  assert.deepEqual(await personas.allTextContents(), ["Critic", "Builder", "Moderator"]);
  // The display name is the sender, not a repeated first line of the text.
  assert.doesNotMatch(await page.locator("#log-crew .msg.bot").first().textContent(), /CriticCritic/);
  // Everyone passes in the second round: nothing more is sent.
  await new Promise((r) => setTimeout(r, 2000));
  assert.equal(await personas.count(), 3, JSON.stringify(await page.locator("#log-crew .msg").allTextContents()));
});

test("the playground opens the Mini App as Alice or Bob, signed with its stand-in bot token", async () => {
  const page = await browser.newPage();
  for (const [who, name] of [["alice", "Alice"], ["bob", "Bob"]]) {
    await page.goto(`${playground.base}/miniapp?as=${who}`);
    await page.waitForSelector("body[data-loaded='1']", { timeout: 15_000 });
    assert.equal(await page.textContent("#hello"), `Hello, ${name}`);
    assert.ok(page.url().startsWith(worker.url.href.replace(/\/$/, "") + "/app#"), page.url());
  }
});

test("rich answers in the web chat: a table answer is rendered as a table", async () => {
  const page = await browser.newPage();
  await page.goto(playground.base);
  await page.fill("#input-dm", "show me a table of planets");
  await page.press("#input-dm", "Enter");
  const reply = page.locator("#log-dm .msg.bot.rich", { hasText: "A table, as asked" });
  await reply.waitFor({ timeout: 15_000 });
  assert.equal(await reply.locator("table tr").count(), 4, "a header row and three rows");
  assert.equal(await reply.locator("th").first().textContent(), "planet");
  assert.equal(await reply.locator("td", { hasText: "Mars" }).count(), 1);
  assert.match(await reply.locator(".math").first().textContent(), /E = mc\^2/);
  assert.ok(playground.telegram.calls("sendRichMessage").some((c) => c.rich !== undefined), "sent as a rich message");
});

test("Business in the web chat: connect your account, Alice writes to it, the suggestion in your private chat has Send; pressing it answers Alice as you, once", async () => {
  const page = await browser.newPage();
  await page.goto(playground.base);
  await page.click("#connect-business");
  await page.locator("#log-business .hint", { hasText: "You connected the bot" }).waitFor({ timeout: 10_000 });
  await page.selectOption("#as-business", "alice");
  await page.fill("#input-business", "Are you open tonight?");
  await page.press("#input-business", "Enter");
  await page.locator("#log-business .msg", { hasText: "Are you open tonight?" }).waitFor({ timeout: 10_000 });
  // The suggestion (after the quiet window), quoting Alice, with the stand-in model's draft.
  const suggestion = page.locator("#log-dm .msg.bot", { hasText: "Suggested reply to Alice" });
  await suggestion.waitFor({ timeout: 30_000 });
  assert.match(await suggestion.textContent(), /You said: “Are you open tonight\?”/);
  assert.deepEqual(await suggestion.locator(".buttons button").allTextContents(), ["Send", "Skip"]);
  await suggestion.locator(".buttons button", { hasText: "Send" }).click();
  const answered = page.locator("#log-business .msg.bot", { hasText: "You said: “Are you open tonight?”" });
  await answered.waitFor({ timeout: 15_000 });
  assert.match(await answered.textContent(), /Edge for You → Alice/);
  // The suggestion says it went, its buttons gone; the answer went once, through the connection.
  await page.locator("#log-dm .msg.bot", { hasText: "Sent to Alice." }).waitFor({ timeout: 10_000 });
  assert.equal(await suggestion.locator(".buttons button").count(), 0);
  const sends = playground.telegram.calls("sendMessage").filter((c) => c.body.business_connection_id && c.text);
  assert.equal(sends.length, 1);
  assert.equal(sends[0].body.chat_id, PEOPLE.alice.id);
});

test("Stop in the web chat: a long answer streams as a draft with a Stop button; pressing it ends the answer, marked stopped", async () => {
  const page = await browser.newPage();
  await page.goto(playground.base);
  await page.fill("#input-dm", "give me a long answer");
  await page.press("#input-dm", "Enter");
  const stop = page.locator("#draft-dm button.stop");
  await stop.waitFor({ state: "visible", timeout: 15_000 });
  await page.locator("#draft-dm .text", { hasText: "Part 2:" }).waitFor({ timeout: 15_000 });
  await stop.click();
  const reply = page.locator("#log-dm .msg.bot", { hasText: "⏹ stopped" });
  await reply.waitFor({ timeout: 15_000 });
  const text = await reply.textContent();
  assert.match(text, /A long answer, streamed slowly/);
  assert.doesNotMatch(text, /Part 30:/, "cut where it was stopped");
  await page.waitForTimeout(1500);
  assert.equal(await page.locator("#log-dm .msg.bot", { hasText: "A long answer" }).count(), 1, "nothing else of that turn");
  assert.ok(await page.locator("#draft-dm").isHidden());
});

test("topics in the private chat: a new topic is its own conversation, answered in the topic and named from its first message", async () => {
  const page = await browser.newPage();
  await page.goto(playground.base);
  await page.click("#new-topic");
  const topic = page.locator("#topics-dm button.on:not([data-thread=''])");
  await topic.waitFor({ timeout: 10_000 });
  assert.equal(await topic.textContent(), "New topic");
  const thread = Number(await topic.getAttribute("data-thread"));
  await page.fill("#input-dm", "Packing list for a winter hike");
  await page.press("#input-dm", "Enter");
  const reply = page.locator(`#log-dm .msg.bot[data-thread="${thread}"]`);
  await reply.first().waitFor({ timeout: 15_000 });
  const sent = playground.telegram.calls("sendMessage").filter((c) => c.body.chat_id === CHATS.dm.id && c.body.message_thread_id === thread);
  assert.ok(sent.length >= 1, "the answer went to the topic");
  // Named from its first message (editForumTopic), shown on the topic's button.
  await page.locator(`#topics-dm button[data-thread="${thread}"]`, { hasText: "Packing list" }).waitFor({ timeout: 15_000 });
  // The main chat does not show the topic's messages.
  await page.click("#topics-dm button[data-thread='']");
  assert.ok(await reply.first().isHidden(), "the topic's answer is hidden in the main chat");
  assert.equal(await page.locator("#log-dm .msg:visible", { hasText: "Packing list for a winter hike" }).count(), 0);
});

test("a reminder with no key: \"remind me in ... to ...\" makes the stand-in call schedule_message; when it is due the bot speaks first", async () => {
  const page = await browser.newPage();
  await page.goto(playground.base);
  const schedules = () => playground.telegram.calls("sendMessage").filter((c) => /Okay, I.ll remind you/.test(c.text ?? ""));
  const before = schedules().length;
  // The newcomer's phrase: set and confirmed with its time (it fires after this file's tests).
  await page.fill("#input-dm", "remind me in 1 minute to stretch");
  await page.press("#input-dm", "Enter");
  const confirmed = page.locator("#log-dm .msg.bot", { hasText: "Okay, I'll remind you" });
  await confirmed.waitFor({ timeout: 15_000 });
  assert.match(await confirmed.textContent(), /\d{4}-\d\d-\d\d \d\d:\d\d .*\(reminder #\d+\)/, "confirmed with its next run and id, as the tool answered");
  // One that comes due now: delivered by the chat object's alarm, with no message of the person.
  await page.fill("#input-dm", "remind me in 3 seconds to drink some water");
  const asked = Date.now();
  await page.press("#input-dm", "Enter");
  await page.locator("#log-dm .msg.bot", { hasText: "Okay, I'll remind you" }).nth(1).waitFor({ timeout: 15_000 });
  assert.equal(schedules().length, before + 2, "two reminders set, each confirmed once");
  const due = page.locator("#log-dm .msg.bot", { hasText: "⏰ Reminder: drink some water" });
  await due.waitFor({ timeout: 20_000 });
  assert.ok(Date.now() - asked >= 2500, `it came when due, not at once (${Date.now() - asked} ms)`);
  await page.waitForTimeout(1500);
  assert.equal(await due.count(), 1, "delivered once");
  assert.equal(await page.locator("#log-dm .msg.bot", { hasText: "⏰ Reminder: stretch" }).count(), 0, "the one-minute reminder is not due yet");
});

test("summon as guest: in a group the bot is not in, the placeholder shows, then the answer edited into it", async () => {
  const page = await browser.newPage();
  await page.goto(playground.base);
  await page.fill("#input-guest", "@edge_playground_bot hello as a guest");
  await page.press("#input-guest", "Enter");
  const answer = page.locator("#log-guest .msg.bot", { hasText: "hello as a guest" });
  await answer.waitFor({ timeout: 20_000 });
  assert.match(await answer.textContent(), /\(edited\)/, "the placeholder's bubble, edited");
  assert.equal(await page.locator("#log-guest .msg.bot").count(), 1, "one answer");
  assert.equal(playground.telegram.calls("answerGuestQuery").length, 1);
});
