// METRICS_LOG: one `metrics` line per invocation with its D1 round trips and the rows D1
// reports read and written (what `npm run bench` reads), carrying no value of the request; and
// what section 3 of issue 17 cut: an update from a known sender in a known chat rewrites
// neither, and a message writes no index entry for its update id (only reactions need it).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, groupText, privateText, reaction, mention, uniqueId, sleep, seedMedia } from "../support/stack.js";
import { promptText } from "../support/prompt.js";

let s;
before(async () => {
  s = await startStack({ vars: { METRICS_LOG: "true" } });
});
after(async () => {
  await s?.close();
});

/** The metrics lines logged after `from` (an index into the logs). */

async function chatter(chat, uid, text) {
  const from = s.logs().length;
  const r = await s.webhook(groupText(chat, uid, text, { name: "Dora" }));
  assert.equal(r.status, 200);
  await sleep(100);
  const lines = s.metricsSince(from).filter((l) => l.kind === "fetch /telegram/webhook");
  assert.equal(lines.length, 1, "one metrics line for the webhook's invocation");
  return lines[0];
}

test("each webhook logs one metrics line with its D1 rows, and no value of the update", async () => {
  const chat = -1000000000000 - uniqueId();
  const uid = uniqueId();
  const first = await chatter(chat, uid, "a secret-looking sentence about pancakes");
  assert.equal(first.d1_round_trips, 1);
  assert.ok(first.rows_written > 0 && first.rows_read > 0, first.raw);
  assert.doesNotMatch(first.raw, /pancakes|Dora/);

  // The same sender in the same chat: the chat and the user are not rewritten, and the message
  // writes its row, three index entries, the AUTOINCREMENT counter and the conversation's
  // pointer, plus the update's row and index entry (no index entry by update id).
  const second = await chatter(chat, uid, "more about pancakes");
  assert.ok(second.rows_written < first.rows_written, `${second.rows_written} < ${first.rows_written}`);
  assert.ok(second.rows_written <= 8, second.raw);
});

test("a redelivered reaction is still recorded once (the reactions' partial index)", async () => {
  const chat = -1000000000000 - uniqueId();
  const uid = uniqueId();
  const m = groupText(chat, uid, "react to me");
  await s.webhook(m);
  const r = reaction(chat, uniqueId(), m.message.message_id, "👍");
  await s.webhook(r);
  // The same update again, as Telegram redelivers it.
  await s.webhook(r);
  await sleep(200);
  const events = await s.sql("SELECT COUNT(*) AS n FROM messages WHERE chat_id = ? AND role = 'event' AND update_id = ?", chat, r.update_id);
  assert.equal(events[0].n, 1);
  const plan = await s.sql("EXPLAIN QUERY PLAN SELECT 1 FROM messages WHERE update_id = ? AND message_id IS NULL", r.update_id);
  assert.ok(plan.some((p) => /messages_by_update/.test(p.detail)), JSON.stringify(plan));
});

test("a turn's recall reads its own chat's matches, not every chat's (memory_fts scope, 0017)", async () => {
  const uid = uniqueId();
  // 400 memories in 4 other chats, each matching the words the person asks with.
  const others = [];
  for (let c = 0; c < 4; c++) {
    const chat = c % 2 ? uniqueId() : -1000000000000 - uniqueId();
    for (let k = 0; k < 100; k++) {
      others.push(s.env.DB.prepare("INSERT INTO memories (kind, chat_id, conv, value, created_at, updated_at) VALUES ('episode', ?, ?, ?, 0, 0)").bind(chat, String(chat), `the marmalade recipe, version ${k}`));
    }
  }
  for (let k = 0; k < others.length; k += 100) await s.env.DB.batch(others.slice(k, k + 100));
  // The chat's own episode: only the full-text match recalls an episode.
  await s.sql("INSERT INTO memories (kind, chat_id, conv, value, created_at, updated_at) VALUES ('episode', ?, ?, 'the marmalade recipe uses bitter oranges', 0, 0)", uid, String(uid));

  const from = s.logs().length;
  await s.webhook(privateText(uid, "what was in the marmalade recipe?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length > 0, 30_000, "the reply");
  await sleep(300);
  assert.match(promptText(s.gemini.calls(uid).at(-1)), /bitter oranges/, "the chat's own episode is recalled");
  assert.doesNotMatch(promptText(s.gemini.calls(uid).at(-1)), /version \d+/, "no other chat's memory");
  const turn = s.metricsSince(from).filter((l) => l.kind.startsWith("alarm"));
  const read = turn.reduce((n, l) => n + l.rows_read, 0);
  // Matching every chat's index rows read 400 and more; within the chat's scope, a few.
  assert.ok(read < 150, `the turn read ${read} rows: ${turn.map((l) => l.raw).join("\n")}`);

  // The index follows a memory's change and removal (its rows are keyed by the memory's id).
  const [{ id }] = await s.sql("SELECT id FROM memories WHERE chat_id = ? AND kind = 'episode'", uid);
  await s.sql("UPDATE memories SET value = 'the marmalade recipe uses blood oranges' WHERE id = ?", id);
  const match = (q) => s.sql("SELECT ref FROM memory_fts WHERE memory_fts MATCH ?", q);
  assert.deepEqual((await match(`scope : "c${uid}" AND content : "blood"`)).map((r) => r.ref), [`m${id}`]);
  assert.deepEqual(await match(`scope : "c${uid}" AND content : "bitter"`), []);
  await s.sql("DELETE FROM memories WHERE id = ?", id);
  assert.deepEqual(await match(`scope : "c${uid}"`), []);
});

test("a two-message plan takes 9 D1 round trips: the step → call mapping kept with the plan, the pending record read with the step's rows, the last outcome with the turn's end", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ calls: [
    { name: "send_message", args: { text: "first" } },
    { name: "send_message", args: { text: "second" } },
  ] }]);
  const from = s.logs().length;
  await s.webhook(privateText(uid, "two messages, please"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 30_000, "both messages");
  await sleep(500);
  assert.deepEqual(s.tg.sent(uid), ["first", "second"]);
  const [turn] = await s.sql("SELECT status, step_outcomes FROM turns WHERE chat_id = ? AND trigger != 'schedule'", uid);
  assert.equal(turn.status, "done");
  const outcomes = JSON.parse(turn.step_outcomes);
  assert.deepEqual(Object.keys(outcomes).sort(), ["0", "1"], turn.step_outcomes);
  assert.ok(Object.values(outcomes).every((o) => o.ok === true), turn.step_outcomes);
  // Load, recall, the turn's result; per message: the step's outbox rows read with its first
  // chunk recorded as pending, sent after, the step's outcome (the last one with the turn's
  // end). Before: 13 (the mapping read back, the pending write and the turn's end apart).
  const alarms = s.metricsSince(from).filter((l) => l.kind.startsWith("alarm"));
  const trips = alarms.reduce((n, l) => n + l.d1_round_trips, 0);
  assert.ok(trips <= 9, `the turn made ${trips} D1 round trips: ${alarms.map((l) => l.raw).join("\n")}`);
});

test("search_memory reads its own chat's matches, not every chat's (the scope filter over memory_fts)", async () => {
  const uid = uniqueId();
  const others = [];
  for (let c = 0; c < 4; c++) {
    const chat = c % 2 ? uniqueId() : -1000000000000 - uniqueId();
    for (let k = 0; k < 100; k++) {
      others.push(s.env.DB.prepare("INSERT INTO memories (kind, chat_id, conv, value, created_at, updated_at) VALUES ('episode', ?, ?, ?, 0, 0)").bind(chat, String(chat), `the quince jelly, batch ${k}`));
    }
  }
  for (let k = 0; k < others.length; k += 100) await s.env.DB.batch(others.slice(k, k + 100));
  await s.sql("INSERT INTO memories (kind, chat_id, conv, value, created_at, updated_at) VALUES ('episode', ?, ?, 'the quince jelly set overnight', 0, 0)", uid, String(uid));
  // An operator note for every chat is still found (the filter keeps what the chat may see).
  await s.sql("INSERT INTO notes (source, content, created_at) VALUES ('operator', 'quince jelly wants lemon', 0)");
  let found;
  s.gemini.script(uid, [
    { calls: [{ name: "search_memory", args: { query: "quince jelly" } }] },
    (body) => {
      found = body.contents.at(-1).parts[0].functionResponse.response.results;
      return { text: "It set overnight." };
    },
  ]);
  const from = s.logs().length;
  await s.webhook(privateText(uid, "how did it go with that jelly?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length > 0, 30_000, "the reply");
  await sleep(300);
  assert.ok(found.some((r) => /set overnight/.test(r)), JSON.stringify(found));
  assert.ok(found.some((r) => /wants lemon/.test(r)), JSON.stringify(found));
  assert.ok(!found.some((r) => /batch \d+/.test(r)), JSON.stringify(found));
  const turn = s.metricsSince(from).filter((l) => l.kind.startsWith("alarm"));
  const read = turn.reduce((n, l) => n + l.rows_read, 0);
  // Every chat's matches: 400 and more; within the chat's scope, a few.
  assert.ok(read < 150, `the turn read ${read} rows: ${turn.map((l) => l.raw).join("\n")}`);
  await s.sql("DELETE FROM notes WHERE content = 'quince jelly wants lemon'");
});

test("a turn over a long history reads only what is new or edited since the chat object's last turn; a message leaving the history makes it read the whole window again (0018, 0019)", async () => {
  const chat = -1000000000000 - uniqueId();
  const uid = uniqueId();
  const first = groupText(chat, uid, "the first thing said: apricots");
  await s.webhook(first);
  for (let i = 0; i < 150; i++) await s.webhook(groupText(chat, uid, `chatter line ${i}`));
  const ask = async (text) => {
    const before = s.gemini.calls(uid).length;
    const sent = s.tg.sent(chat).length;
    const from = s.logs().length;
    const t = `@edge_test_bot ${text}`;
    await s.webhook(groupText(chat, uid, t, { entities: mention(t, "edge_test_bot") }));
    await s.tg.waitFor(() => s.gemini.calls(uid).length > before && s.tg.sent(chat).length > sent, 30_000, "the turn");
    await sleep(500);
    const turn = s.metricsSince(from).filter((l) => l.kind.startsWith("alarm"));
    return { read: turn.reduce((n, l) => n + l.rows_read, 0), prompt: JSON.stringify(s.gemini.calls(uid).at(-1).body.contents), raw: turn.map((l) => l.raw).join("\n") };
  };
  const one = await ask("what came first?");
  assert.ok(one.read > 150, `the first turn reads the whole window: ${one.raw}`);
  assert.match(one.prompt, /apricots/);
  const two = await ask("and now?");
  // The copy's rows, plus the few new ones: the 150 chatter lines are not read again.
  assert.ok(two.read < 60, `the second turn read ${two.read} rows: ${two.raw}`);
  assert.match(two.prompt, /apricots/, "the whole window is still shown");
  assert.match(two.prompt, /chatter line 149/);
  assert.equal((two.prompt.match(/chatter line 75\b/g) ?? []).length, 1, "each message once");
  // An edit of an old message marks its row: the next turn reads it with what is new, and
  // shows it edited.
  const fromEdit = s.logs().length;
  await s.webhook({ update_id: first.update_id + 900000, edited_message: { ...first.message, text: "the first thing said: plums", edit_date: first.message.date + 5 } });
  await sleep(300);
  // The edit sets its row's mark itself: 5 rows written (with the trigger marking it, the row
  // was written twice: 6).
  const edit = s.metricsSince(fromEdit).filter((l) => l.kind.startsWith("fetch"));
  const written = edit.reduce((n, l) => n + l.rows_written, 0);
  assert.ok(written <= 5, `the edit wrote ${written} rows: ${edit.map((l) => l.raw).join("\n")}`);
  const three = await ask("and the first one, again?");
  assert.match(three.prompt, /plums/);
  assert.doesNotMatch(three.prompt, /apricots/);
  assert.ok(three.read < 60, `after the edit the turn read ${three.raw}`);
  // A second edit of it, and an edit of another: both marked anew, both shown.
  await s.webhook({ update_id: first.update_id + 900001, edited_message: { ...first.message, text: "the first thing said: quinces", edit_date: first.message.date + 9 } });
  await sleep(300);
  const four = await ask("and now the first one?");
  assert.match(four.prompt, /quinces/);
  assert.doesNotMatch(four.prompt, /plums/);
  assert.ok(four.read < 60, `after the second edit the turn read ${four.raw}`);
  // A message leaving the history (nothing does this yet but an operator's SQL) bumps the
  // history version: the whole window is read again, without it.
  await s.sql("UPDATE messages SET excluded = 1 WHERE chat_id = ? AND text = 'chatter line 75'", chat);
  const five = await ask("and after that?");
  assert.doesNotMatch(five.prompt, /chatter line 75\b/);
  assert.match(five.prompt, /chatter line 76\b/);
  assert.ok(five.read > 150, `after the exclusion the turn reads the whole window again: ${five.raw}`);
});

test("search_memory over media reads its own chat's media, not every chat's (an indexed (chat, file) record)", async () => {
  const uid = uniqueId();
  // A busy bot: 1,000 described photos in 20 other chats, every one matching the words asked.
  for (let c = 0; c < 20; c++) await seedMedia(s.env.DB, -1000000000000 - uniqueId(), 50, "a lighthouse at dusk", "other");
  // This chat's own photos (and some chatter, which the old search scanned for every photo).
  await seedMedia(s.env.DB, uid, 3, "a lighthouse at dusk, seen from the ferry", "own");
  const chatter = [];
  for (let k = 0; k < 30; k++) {
    chatter.push(s.env.DB.prepare("INSERT INTO messages (conv, chat_id, message_id, role, user_id, name, parts, text, date) VALUES (?, ?, ?, 'user', ?, 'Pat', ?, ?, 0)").bind(String(uid), uid, 600_000 + k, uid, JSON.stringify([{ type: "text", text: `chatter ${k}` }]), `chatter ${k}`));
  }
  await s.env.DB.batch(chatter);
  let found;
  s.gemini.script(uid, [
    { calls: [{ name: "search_memory", args: { query: "lighthouse" } }] },
    (body) => {
      found = body.contents.at(-1).parts[0].functionResponse.response.results;
      return { text: "The ferry photo." };
    },
  ]);
  const sent = s.tg.sent(uid).length;
  const from = s.logs().length;
  await s.webhook(privateText(uid, "which photo had the lighthouse?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length > sent && found, 30_000, "the reply");
  await sleep(300);
  assert.ok(found.some((r) => /seen from the ferry/.test(r)), JSON.stringify(found));
  assert.ok(!found.some((r) => /^\[media photo\] a lighthouse at dusk number/.test(r)), `no other chat's photo: ${JSON.stringify(found)}`);
  const turn = s.metricsSince(from).filter((l) => l.kind.startsWith("alarm"));
  const read = turn.reduce((n, l) => n + l.rows_read, 0);
  // Every chat's media rows, and this chat's messages for each: over 1,000; through the chat's
  // own (chat, file) records, a few dozen with the turn's own reads.
  assert.ok(read < 400, `the turn read ${read} rows: ${turn.map((l) => l.raw).join("\n")}`);
});

test("the lines count Queues messages: what a cron tick queued, and what each consumer batch delivered", async () => {
  const chat = -1000000000000 - uniqueId();
  const hook = await chatter(chat, uniqueId(), "something for the next consolidation");
  assert.equal(hook.queue_sent, 0, hook.raw);
  assert.equal(hook.queue_received, 0, hook.raw);
  const from = s.logs().length;
  await s.scheduled();
  // Every job the tick queued (and any a job put back) is delivered once to a consumer batch.
  let lines = [];
  const sent = () => lines.reduce((n, l) => n + l.queue_sent, 0);
  const received = () => lines.filter((l) => l.kind.startsWith("queue")).reduce((n, l) => n + l.queue_received, 0);
  for (let i = 0; i < 100; i++) {
    await sleep(200);
    lines = s.metricsSince(from);
    if (lines.some((l) => l.kind.startsWith("cron")) && received() > 0 && received() >= sent()) break;
  }
  const tick = lines.find((l) => l.kind.startsWith("cron"));
  assert.ok(tick, "the tick's line");
  // At least this chat's conversation was due (the others' of this file too).
  assert.ok(tick.queue_sent >= 1, tick.raw);
  assert.equal(tick.queue_received, 0, tick.raw);
  assert.equal(received(), sent(), lines.map((l) => l.raw).join("\n"));
});
