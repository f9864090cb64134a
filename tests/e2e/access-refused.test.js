// What a refused sender costs (issue 35, item 3): a stranger the access policy refuses gets
// today's one notice and the first few updates of an hour recorded (refusal, excluded message,
// update), then only a counter: no row per message, no chat-object call. Redeliveries are still
// recorded once; an approved sender is served at once, whatever the counter says.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, groupText, uniqueId, sleep } from "../support/stack.js";

let s;
before(async () => {
  s = await startStack({ vars: { DM_POLICY: "allowlist", GROUP_ALLOWLIST: "-1009990001", METRICS_LOG: "true" } });
});
after(async () => {
  await s?.close();
});

test("a persistent refused stranger costs a counter, not rows per message, after the first few of the hour", async () => {
  const uid = uniqueId();
  const first = privateText(uid, "hello? message 0");
  await s.webhook(first);
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the refusal notice");
  assert.match(s.tg.sent(uid)[0], /only talk to people on my list/);
  // Telegram redelivers the first update: recorded once, no second notice.
  await s.webhook(first);
  for (let i = 1; i < 40; i++) await s.webhook(privateText(uid, `hello? message ${i}`));
  await sleep(800);
  assert.equal(s.gemini.calls(uid).length, 0);
  assert.equal(s.tg.sent(uid).length, 1, "one notice");
  const count = async (sql) => (await s.sql(sql, uid))[0].n;
  const kept = await count("SELECT COUNT(*) AS n FROM messages WHERE chat_id = ? AND role = 'user'");
  const refusals = await count("SELECT COUNT(*) AS n FROM refusals WHERE user_id = ?");
  const updates = await count("SELECT COUNT(*) AS n FROM updates WHERE chat_id = ?");
  assert.ok(kept >= 1 && kept <= 5, `messages kept: ${kept} of 40`);
  assert.ok(refusals >= 1 && refusals <= 5, `refusals recorded: ${refusals} of 40`);
  assert.ok(updates <= 5, `updates recorded: ${updates} of 40`);
  assert.equal(await count("SELECT COUNT(*) AS n FROM messages WHERE chat_id = ? AND text = 'hello? message 0'"), 1, "the first message once");

  // Past the limit an update writes at most the counter, and hands nothing to the chat object,
  // even when the stranger renames themselves every time.
  const from = s.logs().length;
  for (let i = 40; i < 50; i++) await s.webhook(privateText(uid, `hello? message ${i}`, { name: `Stranger ${i}` }));
  await sleep(300);
  const lines = s.metricsSince(from);
  const hooks = lines.filter((l) => l.kind === "fetch /telegram/webhook");
  assert.equal(hooks.length, 10, lines.map((l) => l.raw).join("\n"));
  const written = hooks.reduce((n, l) => n + l.rows_written, 0);
  assert.ok(written <= 1, `10 refused updates wrote ${written} rows: ${hooks.map((l) => l.raw).join("\n")}`);
  assert.equal(lines.filter((l) => l.kind.startsWith("object")).length, 0, "no chat-object call");

  // Approved meanwhile: served at once, in the same hour.
  await s.env.DB.prepare("INSERT INTO users (user_id, name, access, updated_at) VALUES (?, 'S', 'allowed', 0) ON CONFLICT (user_id) DO UPDATE SET access = 'allowed'").bind(uid).run();
  await s.webhook(privateText(uid, "approved now?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 10_000, "the answer");
  assert.equal(s.tg.sent(uid)[1], "Echo: approved now?");
});

test("the limit is per sender (another stranger still gets their notice); a group off the allowlist is one sender", async () => {
  const a = uniqueId();
  const b = uniqueId();
  for (let i = 0; i < 12; i++) await s.webhook(privateText(a, `a ${i}`));
  await s.webhook(privateText(b, "b 0"));
  await s.tg.waitFor(() => s.tg.sent(b).length === 1, 10_000, "b's notice");
  await sleep(300);
  const kept = async (sql, id) => (await s.sql(sql, id))[0].n;
  const mine = await kept("SELECT COUNT(*) AS n FROM messages WHERE chat_id = ? AND role = 'user'", a);
  assert.ok(mine <= 5, `${mine} of a's 12 messages kept`);
  // Four members chatting in a group the bot is not allowed in: refused whoever speaks, so the
  // group is the sender and its hour's few are kept, not a few per member.
  const group = -1_000_000_000_000 - uniqueId();
  for (let i = 0; i < 16; i++) await s.webhook(groupText(group, a + 1000 + (i % 4), `group chatter ${i}`));
  await sleep(300);
  const inGroup = await kept("SELECT COUNT(*) AS n FROM messages WHERE chat_id = ?", group);
  assert.ok(inGroup >= 1 && inGroup <= 5, `${inGroup} of the group's 16 messages kept`);
});
