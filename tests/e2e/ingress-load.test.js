// Updates coming in under load and redelivery: no duplicates, no loss, one answered turn per
// burst.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, uniqueId, sleep, log } from "../support/stack.js";

let s;
before(async () => {
  // A burst is 5 messages 100 ms apart; the debounce leaves room for a loaded machine (CI runs
  // two test files at once) to deliver them further apart.
  s = await startStack({ vars: { DEBOUNCE_MS: "5000", DEBOUNCE_MAX_MS: "30000" }, latencyMs: 300 });
});
after(async () => {
  await s?.close();
});

/** Sends requests with at most `limit` in flight. */
async function pool(items, limit, fn) {
  const results = [];
  let i = 0;
  await Promise.all(Array.from({ length: limit }, async () => {
    while (i < items.length) {
      const k = i++;
      results[k] = await fn(items[k]);
    }
  }));
  return results;
}

test("50 updates redelivered while being processed: no duplicates, no loss", async () => {
  const users = Array.from({ length: 50 }, () => uniqueId());
  const updates = users.map((u) => privateText(u, `question from ${u}`));
  const first = await pool(updates, 25, (u) => s.webhook(u));
  const again = await pool([...updates].reverse(), 25, (u) => s.webhook(u));
  assert.ok([...first, ...again].every((r) => r.status === 200));
  await s.tg.waitFor(() => users.every((u) => s.tg.sent(u).length >= 1), 60_000, "50 replies");
  await sleep(3000);
  for (const u of users) {
    assert.deepEqual(s.tg.sent(u), [`Echo: question from ${u}`], `chat ${u}`);
  }
  const rows = await s.sql(`SELECT COUNT(*) AS n FROM messages WHERE role = 'user' AND chat_id IN (${users.join(",")})`);
  assert.equal(rows[0].n, 50);
});

test("200 chats each sending a burst of 5: one answered turn per chat that saw its whole burst", async () => {
  const chats = Array.from({ length: 200 }, () => uniqueId());
  const t0 = Date.now();
  // Every chat at once, each sending its 5 messages 100 ms apart.
  const statuses = await Promise.all(chats.map(async (c) => {
    const out = [];
    for (let k = 0; k < 5; k++) {
      out.push((await s.webhook(privateText(c, `burst ${c} part ${k}`))).status);
      await sleep(100);
    }
    return out;
  }));
  assert.ok(statuses.flat().every((st) => st === 200));
  const sentAt = Date.now();
  await s.tg.waitFor(() => chats.every((c) => s.tg.sent(c).length >= 1), 120_000, "200 replies");
  log(`1000 updates sent in ${sentAt - t0} ms; all 200 chats answered ${Date.now() - t0} ms after the first`);
  await sleep(4000);
  let calls = 0;
  for (const c of chats) {
    const reqs = s.gemini.calls(c);
    calls += reqs.length;
    // One answer per burst; at most one abandoned early start before it (the last call answers).
    assert.ok(reqs.length >= 1 && reqs.length <= 2, `chat ${c} made ${reqs.length} model calls`);
    const text = reqs.at(-1).body.contents.flatMap((x) => x.parts).map((p) => p.text ?? "").join("\n");
    for (let k = 0; k < 5; k++) assert.match(text, new RegExp(`burst ${c} part ${k}`));
    assert.equal(s.tg.sent(c).length, 1);
  }
  log(`model calls for 200 bursts of 5: ${calls}`);
  const stored = await s.sql(`SELECT COUNT(*) AS n FROM messages WHERE role = 'user' AND chat_id IN (${chats.join(",")})`);
  assert.equal(stored[0].n, 1000, "no update lost");
});
