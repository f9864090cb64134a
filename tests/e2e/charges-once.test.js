// Charges that hold under concurrency and crashes (issue 47, items 9 and 13): the daily picture
// limit is checked and charged in one step, so one person drawing in several private topics at
// once (each its own chat object) gets no more than the limit; a reminder's run charged before a
// crash is not charged again when it fires after it.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, uniqueId, sleep, inTopic } from "../support/stack.js";
import { makePng } from "../../tools/png.js";

const PERSON_LIMIT_LINE = "You've reached today's picture limit; you can ask for more pictures tomorrow (UTC).";

let s;
before(async () => {
  s = await startStack({ vars: { IMAGE_MODEL: "on", IMAGE_DAILY_LIMIT: "1", IMAGE_CHAT_DAILY_LIMIT: "10" } });
  s.tg.setPrivateTopics({ enabled: true });
});
after(async () => {
  await s?.close();
});

test("drawing in three private topics at once passes IMAGE_DAILY_LIMIT by nothing: one picture, the others the limit line", async () => {
  const uid = uniqueId();
  const prompts = ["a fox", "a cat", "an owl"];
  const topics = prompts.map((p) => s.tg.privateTopic(uid, { name: p, implicit: false }));
  s.gemini.script(uid, prompts.map((prompt) => ({ text: "Coming up.", calls: [{ name: "generate_image", args: { prompt } }] })));
  s.gemini.scriptImage(prompts.map((_, i) => ({ png: makePng(20, 20, i + 1), delayMs: 300 })));
  await Promise.all(topics.map((t, i) => s.webhook(inTopic(uid, t, `draw ${prompts[i]}`))));
  const photos = () => s.tg.calls("sendPhoto", uid).filter((r) => r.photo);
  const lines = () => s.tg.sent(uid).filter((t) => t === PERSON_LIMIT_LINE);
  await s.tg.waitFor(() => photos().length + lines().length >= prompts.length, 40_000, "an answer in every topic");
  await sleep(1000);
  assert.equal(photos().length, 1, "one picture");
  assert.equal(lines().length, prompts.length - 1, "the limit line in the other topics");
});

test("a reminder's run whose charge a crashed attempt already took is not charged again when it fires", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "Hello." }, { text: "Time to water the plants." }]);
  await s.webhook(privateText(uid, "hello"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 1, 10_000, "the first answer");
  const hour = async () => (await s.api("GET", `costs?chat_id=${uid}&user_id=${uid}`)).json.budgets.user_turns_last_hour;
  assert.equal(await hour(), 1, "the message");
  const now = Date.now();
  const due = now - 90_000; // due a while ago: the cron wakes runs a lost alarm left
  const [row] = await s.sql(
    "INSERT INTO schedules (chat_id, conv, creator_user_id, text, timezone, repeat, next_run_ms, created_at, updated_at) VALUES (?, ?, ?, 'water the plants', 'UTC', NULL, ?, ?, ?) RETURNING id",
    uid, String(uid), uid, due, now, now,
  );
  // What an attempt that charged the run and then crashed (before the chat object wrote that
  // the run had started) leaves behind: the run's charge, under the run's key.
  await s.sql("INSERT INTO budget_charges (chat_id, user_id, created_at, charge_key) VALUES (?, ?, ?, ?)", uid, uid, now, `sched:${row.id}:${due}`);
  assert.equal(await hour(), 2);
  await s.scheduled(); // the cron finds the run the lost alarm left
  await s.tg.waitFor(() => s.finalSent(uid).length === 2, 15_000, "the reminder");
  await sleep(500);
  assert.equal(await hour(), 2, "the run was charged once");
});
