// Model budgets: a person's requests per hour, a chat's tokens per day, the bot's tokens per
// day. Over a budget there is no model call and one notice per window, never one per message;
// `/usage` and the admin API show where things stand.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, uniqueId, sleep, ADMIN_TOKEN, askInGroup } from "../support/stack.js";

let s;
before(async () => {
  s = await startStack({ vars: { USER_TURNS_PER_HOUR: "3", DEBOUNCE_MS: "100", DEBOUNCE_MAX_MS: "400" } });
});
after(async () => {
  await s?.close();
});

test("a burst from one person stays within their hourly budget, with one notice", async () => {
  const uid = uniqueId();
  for (let i = 0; i < 10; i++) {
    await s.webhook(privateText(uid, `question ${i}`));
    await sleep(250); // past the debounce: each message could be its own turn
  }
  await sleep(2000);
  const calls = s.gemini.calls(uid).length;
  assert.ok(calls >= 1 && calls <= 3, `model calls: ${calls}`);
  const notices = s.tg.sent(uid).filter((t) => /this hour/.test(t));
  assert.equal(notices.length, 1, "one notice, not one per message");
  const refused = await s.sql("SELECT COUNT(*) AS n FROM refusals WHERE user_id = ? AND reason = 'budget_user'", uid);
  assert.equal(refused[0].n, 7);

  // In a group, the person's budget does not silence the others.
  const group = -1_000_000_000_000 - uniqueId();
  await s.webhook(askInGroup(group, uid, "and here?"));
  const other = uniqueId();
  await s.webhook(askInGroup(group, other, "hello"));
  await s.tg.waitFor(() => s.gemini.calls(other).length === 1, 10_000, "the other member's turn");
  assert.equal(s.gemini.calls(uid).length, calls, "still no more calls for the bursting person");

  // /usage shows the person's figure against the budget; so does the admin API.
  await s.webhook(privateText(uid, "/usage", { entities: [{ type: "bot_command", offset: 0, length: 6 }] }));
  await s.tg.waitFor(() => s.tg.sent(uid).some((t) => /Budgets/.test(t)), 10_000, "the /usage answer");
  const usage = s.tg.sent(uid).find((t) => /Budgets/.test(t));
  assert.match(usage, /requests this hour: 3 of 3/);
  const r = await s.fetch(`/api/v1/costs?period=today&chat_id=${uid}&user_id=${uid}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  const body = await r.json();
  assert.equal(body.budgets.user_turns_per_hour, 3);
  assert.equal(body.budgets.user_turns_last_hour, 3);
  assert.ok(body.budgets.chat_tokens_today > 0);
  assert.ok(body.budgets.global_tokens_today >= body.budgets.chat_tokens_today);
});

test("a chat's daily tokens and the bot's daily tokens are capped", async () => {
  const t = await startStack({ vars: { CHAT_TOKENS_PER_DAY: "1", GLOBAL_TOKENS_PER_DAY: "50000000", DEBOUNCE_MS: "100", DEBOUNCE_MAX_MS: "400" } });
  try {
    const uid = uniqueId();
    await t.webhook(privateText(uid, "first"));
    await t.tg.waitFor(() => t.gemini.calls(uid).length === 1, 10_000, "the first turn");
    await t.tg.waitFor(() => t.tg.sent(uid).length === 1, 10_000, "the first answer");
    for (let i = 0; i < 3; i++) {
      await t.webhook(privateText(uid, `more ${i}`));
      await sleep(250);
    }
    await sleep(1000);
    assert.equal(t.gemini.calls(uid).length, 1, "the chat is over its daily tokens");
    assert.equal(t.tg.sent(uid).filter((x) => /today's budget/.test(x)).length, 1, "one notice");

    // The bot-wide cap: other chats' usage today fills it.
    await t.env.DB.prepare(
      "INSERT INTO model_calls (chat_id, purpose, model, status, total_tokens, duration_ms, created_at) VALUES (?, 'turn', 'm', 200, 50000000, 1, ?)",
    )
      .bind(-42, Date.now())
      .run();
    const fresh = uniqueId();
    await t.webhook(privateText(fresh, "hello"));
    await t.tg.waitFor(() => t.tg.sent(fresh).length === 1, 10_000, "the notice");
    assert.match(t.tg.sent(fresh)[0], /I've used up today's budget/);
    assert.equal(t.gemini.calls(fresh).length, 0);
  } finally {
    await t.close();
  }
});
