// Tables that only grow are pruned by the cron, in bounded batches; the cron finds
// conversations to consolidate from a per-conversation pointer, not by scanning messages.
// Failed on the previous version (nothing was ever pruned; there was no pointer).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, uniqueId, sleep } from "../support/stack.js";

let s;
before(async () => {
  s = await startStack({ vars: { RETENTION_DAYS: "30" } });
});
after(async () => {
  await s?.close();
});

const DAY = 86_400_000;

test("the cron prunes rows past retention from every growing table and keeps recent ones", async () => {
  const chat = uniqueId();
  const old = Date.now() - 31 * DAY;
  const recent = Date.now() - 29 * DAY;
  for (const [i, at] of [old, recent].entries()) {
    const tag = `${chat}-${i}`;
    await s.sql("INSERT INTO updates (update_id, kind, chat_id, outcome, received_at) VALUES (?, 'message', ?, 'stored', ?)", chat * 10 + i, chat, at);
    await s.sql("INSERT INTO outbox (key, step_key, conv, chat_id, method, body, status, created_at) VALUES (?, ?, ?, ?, 'sendMessage', '{}', 'sent', ?)", `k${tag}`, `s${tag}`, String(chat), chat, at);
    await s.sql("INSERT INTO model_calls (chat_id, purpose, model, status, duration_ms, created_at) VALUES (?, 'turn', 'm', 200, 5, ?)", chat, at);
    await s.sql("INSERT INTO refusals (chat_id, user_id, reason, created_at) VALUES (?, ?, 'test', ?)", chat, chat, at);
    await s.sql("INSERT INTO budget_charges (chat_id, user_id, created_at) VALUES (?, ?, ?)", chat, chat, at);
    await s.sql("INSERT INTO refused_senders (window_start, sender, n, last_at) VALUES (?, ?, 6, ?)", at, chat, at);
    // A refused message and an admitted one, each old and recent (dates in seconds).
    for (const excluded of [0, 1]) {
      await s.sql("INSERT INTO messages (conv, chat_id, message_id, role, user_id, name, parts, text, date, excluded) VALUES (?, ?, ?, 'user', ?, 'R', '[]', 'x', ?, ?)", String(chat), chat, i * 2 + excluded + 1, chat, Math.floor(at / 1000), excluded);
    }
  }
  await s.scheduled();
  const count = async (q) => (await s.sql(q, chat))[0].n;
  assert.equal(await count("SELECT COUNT(*) AS n FROM updates WHERE chat_id = ?"), 1, "updates: the recent one stays");
  assert.equal(await count("SELECT COUNT(*) AS n FROM outbox WHERE chat_id = ?"), 1, "outbox");
  assert.equal(await count("SELECT COUNT(*) AS n FROM model_calls WHERE chat_id = ?"), 1, "model_calls");
  assert.equal(await count("SELECT COUNT(*) AS n FROM refusals WHERE chat_id = ?"), 1, "refusals");
  assert.equal(await count("SELECT COUNT(*) AS n FROM budget_charges WHERE chat_id = ?"), 0, "budget charges: two days at most");
  assert.equal(await count("SELECT COUNT(*) AS n FROM refused_senders WHERE sender = ?"), 1, "refused senders' counters");
  assert.deepEqual((await s.sql("SELECT excluded, date FROM messages WHERE chat_id = ? ORDER BY message_id", chat)).map((m) => m.excluded), [0, 0, 1], "the old refused message goes; admitted messages stay");
});

test("one cron run prunes at most four batches of 500 per table; the rest goes in the next run", async () => {
  const chat = uniqueId();
  const old = Date.now() - 40 * DAY;
  await s.sql(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2100)
     INSERT INTO refusals (chat_id, user_id, reason, created_at) SELECT ?, i, 'bulk', ? FROM n`,
    chat,
    old,
  );
  await s.scheduled();
  const left = (await s.sql("SELECT COUNT(*) AS n FROM refusals WHERE chat_id = ?", chat))[0].n;
  assert.equal(left, 100, "2,000 pruned in the first run");
  await s.scheduled();
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM refusals WHERE chat_id = ?", chat))[0].n, 0);
});

test("the cron finds conversations with new messages through their pointer, each time", async () => {
  const uid = uniqueId();
  const consolidatedThrough = async (text) => {
    await s.webhook(privateText(uid, text));
    await s.tg.waitFor(() => s.tg.sent(uid).some((t) => t.includes(text)), 10_000, `the reply to "${text}"`);
    const [newest] = await s.sql("SELECT MAX(seq) AS seq FROM messages WHERE conv = ? AND role = 'user'", String(uid));
    await s.scheduled();
    const deadline = Date.now() + 15_000;
    let row;
    while (Date.now() < deadline) {
      [row] = await s.sql("SELECT consolidated_seq FROM conversations WHERE conv = ?", String(uid));
      if (row.consolidated_seq >= newest.seq) break;
      await sleep(200);
    }
    assert.ok(row.consolidated_seq >= newest.seq, `consolidated through "${text}"`);
  };
  await consolidatedThrough("hello there");
  // A message after a consolidation moves the pointer again: the next cron finds it.
  await consolidatedThrough("and a second thing");
});
