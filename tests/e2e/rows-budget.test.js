// The Free plan's binding limit is D1 rows written (100,000 a day): the rows written per message
// are a budget, stated in README.md ("What the free plan means here", the table under "Rows
// written per message") and held here. A private message answered end to end (the webhook, the
// chat object's arrival, the turn's alarm with its delivery) and an unanswered group message are
// run with METRICS_LOG on; the rows written that every invocation's metrics line reports (D1's
// `rows_written`, and the chat object's own storage, `do_rows_written`) are summed per message
// and compared with the numbers read from the README, so the README and the code cannot drift.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { startStack, groupText, privateText, uniqueId, sleep } from "../support/stack.js";

let s;
before(async () => {
  s = await startStack({ vars: { METRICS_LOG: "true" } });
});
after(async () => {
  await s?.close();
});

/** The README's budget: `{ dm: { d1, object }, chatter: { d1, object } }`. */
function budget() {
  const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
  const section = readme.split("Rows written per message")[1];
  assert.ok(section, "README.md states the rows written per message");
  const row = (label) => {
    const m = section.match(new RegExp(`^\\s*\\| ${label} \\| (\\d+) \\| (\\d+) \\|`, "m"));
    assert.ok(m, `README.md's table has a row "${label}"`);
    return { d1: Number(m[1]), object: Number(m[2]) };
  };
  return { dm: row("an answered private message"), chatter: row("a group message the bot does not answer") };
}

/** Waits until no metrics line came for `quietMs`, then sums the lines logged after `from`. */
async function settle(from, quietMs = 2500) {
  let n = -1;
  for (let waited = 0; waited < 60_000; waited += quietMs) {
    const lines = s.metricsSince(from);
    if (lines.length === n) break;
    n = lines.length;
    await sleep(quietMs);
  }
  const lines = s.metricsSince(from);
  const sum = (k) => lines.reduce((t, l) => t + (l[k] ?? 0), 0);
  return { d1: sum("rows_written"), object: sum("do_rows_written"), objectRead: sum("do_rows_read"), d1Read: sum("rows_read"), lines };
}

const showRead = (m) => m.lines.map((l) => `${l.kind}: d1 ${l.rows_read} read, ${l.d1_statements ?? "?"} statements`).join("\n");
const show = (m) => m.lines.map((l) => `${l.kind}: d1 ${l.rows_written} written, object ${l.do_rows_written} written, ${l.do_rows_read} read`).join("\n");

/** One private message answered end to end: its rows. The first message of a person (their
 *  chat's and user's first rows) and the chat object's first load come before, untimed. */
async function answeredPrivate(uid, text) {
  const sent = s.tg.sent(uid).length;
  const from = s.logs().length;
  const r = await s.webhook(privateText(uid, text));
  assert.equal(r.status, 200);
  await s.tg.waitFor(() => s.tg.sent(uid).length > sent, 30_000, "the answer");
  return settle(from);
}

async function chatter(chat, uid, text) {
  const from = s.logs().length;
  const r = await s.webhook(groupText(chat, uid, text));
  assert.equal(r.status, 200);
  return settle(from, 800);
}

test("an answered private message writes no more rows than README.md states, in D1 and in the chat object", async () => {
  const uid = uniqueId();
  await answeredPrivate(uid, "hello, first of all");
  const m = await answeredPrivate(uid, "and a second question");
  console.log(`an answered private message: D1 ${m.d1} rows written (${m.d1Read} read), the chat object ${m.object} written (${m.objectRead} read)\n${show(m)}`);
  const limit = budget();
  assert.ok(m.lines.some((l) => l.kind === "fetch /telegram/webhook"), "the webhook's line is counted");
  assert.ok(m.lines.some((l) => l.kind === "alarm"), "the turn's alarm is counted");
  assert.ok(m.d1 > 0 && m.object > 0, show(m));
  assert.ok(m.d1 <= limit.dm.d1, `D1 rows written ${m.d1} > the README's ${limit.dm.d1}:\n${show(m)}`);
  assert.ok(m.object <= limit.dm.object, `the chat object's rows written ${m.object} > the README's ${limit.dm.object}:\n${show(m)}`);
  // Nothing a user or operator relies on is lost: both messages and the answers in the
  // history, the model call's cost, the turn's record, the delivery's record.
  const rows = await s.sql("SELECT role FROM history WHERE chat_id = ? ORDER BY seq, apart", uid);
  assert.deepEqual(rows.map((r) => r.role), ["user", "bot", "user", "bot"]);
  const calls = await s.sql("SELECT COUNT(*) AS n, SUM(total_tokens) AS t FROM calls WHERE chat_id = ?", uid);
  assert.equal(calls[0].n, 2);
  assert.ok(calls[0].t > 0);
  const turns = await s.sql("SELECT status FROM turns WHERE chat_id = ?", uid);
  assert.deepEqual(turns.map((t) => t.status), ["done", "done"]);
  const outbox = await s.sql("SELECT status FROM sends WHERE chat_id = ?", uid);
  assert.deepEqual(outbox.map((o) => o.status), ["sent", "sent"]);
});

test("a group message the bot does not answer writes no more rows than README.md states", async () => {
  const chat = -1000000000000 - uniqueId();
  const uid = uniqueId();
  await chatter(chat, uid, "the first message: the chat's and the person's rows");
  const m = await chatter(chat, uid, "just chatting along");
  console.log(`group chatter: D1 ${m.d1} rows written (${m.d1Read} read), the chat object ${m.object} written\n${show(m)}`);
  const limit = budget();
  assert.deepEqual(m.lines.map((l) => l.kind), ["fetch /telegram/webhook"]);
  assert.ok(m.d1 > 0, show(m));
  assert.ok(m.d1 <= limit.chatter.d1, `D1 rows written ${m.d1} > the README's ${limit.chatter.d1}:\n${show(m)}`);
  assert.ok(m.object <= limit.chatter.object, `the chat object's rows written ${m.object} > the README's ${limit.chatter.object}`);
  const rows = await s.sql("SELECT text FROM messages WHERE chat_id = ? ORDER BY seq", chat);
  assert.equal(rows.length, 2);
  // Who has written in the chat (what a note or a memory about a person needs) is one row,
  // written by the person's first message (migration 0034), not an index entry per message.
  const members = await s.sql("SELECT user_id FROM chat_members WHERE chat_id = ?", chat);
  assert.deepEqual(members.map((r) => r.user_id), [uid]);
  // A redelivery of an update (Telegram's, after a lost answer) records nothing twice and
  // writes nothing.
  const again = groupText(chat, uid, "said once, delivered twice");
  await s.webhook(again);
  const from = s.logs().length;
  await s.webhook(again);
  const redelivered = await settle(from, 800);
  assert.equal(redelivered.d1, 0, show(redelivered));
  const stored = await s.sql("SELECT COUNT(*) AS n FROM messages WHERE chat_id = ? AND text = 'said once, delivered twice'", chat);
  assert.equal(stored[0].n, 1);
});

test("the budget check before a turn reads no more rows as the day's turns grow", async () => {
  // Two people with one answered message each; then the first asks again, the bot answers
  // eight other people, and the second asks again: both measured turns have the same chat
  // history and the same chat's day (one earlier call), only the bot's day grew. The bot's
  // daily tokens come from one counter row (`token_days`), not from every call of the day.
  const first = uniqueId();
  const second = uniqueId();
  await answeredPrivate(first, "hello there");
  await answeredPrivate(second, "hello there");
  const a = await answeredPrivate(first, "a question");
  const busy = 8;
  for (let i = 0; i < busy; i++) await answeredPrivate(uniqueId(), `a busy day ${i}`);
  const b = await answeredPrivate(second, "a question");
  console.log(`rows read by an answered private message: ${a.d1Read} early, ${b.d1Read} after ${busy} more turns of the day`);
  assert.ok(a.d1Read > 0, show(a));
  assert.ok(b.d1Read <= a.d1Read + 3, `rows read grew with the day's turns: ${a.d1Read} then ${b.d1Read}\n${showRead(a)}\nthen\n${showRead(b)}`);
  // The counter is what summing the day's calls says.
  const day = Date.now() - (Date.now() % 86_400_000);
  const [sum] = await s.sql("SELECT SUM(total_tokens) AS t FROM calls WHERE created_at >= ?", day);
  const [counter] = await s.sql("SELECT tokens AS t FROM token_days WHERE day_ms = ?", day);
  assert.ok(sum.t > 0);
  assert.equal(counter.t, sum.t);
});

test("the budget check reads a chat's turns of the day, not every turn its topics ever had", async () => {
  // A budget test (rows read). Two people with the same history; one also has a topic with 300
  // turns from long ago (turns are never pruned). Their next answered messages read the same
  // rows within a few: each conversation's turns are read from the day's start on their key.
  const plain = uniqueId();
  const topical = uniqueId();
  await answeredPrivate(plain, "hello there");
  await answeredPrivate(topical, "hello there");
  const conv = `${topical}:7`;
  await s.sql("INSERT INTO conversations (conv, chat_id, thread_id, updated_at) VALUES (?, ?, 7, 1)", conv, topical);
  for (let i = 0; i < 300; i += 50) {
    const values = Array.from({ length: 50 }, (_, j) => `('${conv}/${String(1_000_000 + i + j).padStart(13, "0")}-00000000', '${conv}', ${topical}, 'done', 1, 1, 100)`);
    await s.sql(`INSERT INTO turns (turn_id, conv, chat_id, status, created_at, updated_at, tokens) VALUES ${values.join(", ")}`);
  }
  const a = await answeredPrivate(plain, "a question");
  const b = await answeredPrivate(topical, "a question");
  console.log(`rows read by an answered private message: ${a.d1Read}; with 300 old topic turns: ${b.d1Read}`);
  assert.ok(a.d1Read > 0, show(a));
  assert.ok(b.d1Read <= a.d1Read + 3, `rows read grew with the topic's old turns: ${a.d1Read} then ${b.d1Read}\n${showRead(a)}\nthen\n${showRead(b)}`);
});
