// Access and budgets for the work nobody asked for just now (issue 35, items 1, 2, 12, 14):
// a reminder passes the access policy again when it is due and counts against its creator's
// hourly budget; blocking a person cancels what they set; consolidation and a crew's
// continuation turns are checked against the budgets they belong to; in a group only the
// owner's own burst cancels a reminder; a note or fact one member supplied about another stays
// in the chat where it was said.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, groupText, uniqueId, sleep, askInGroup, ADMIN_HEADERS } from "../support/stack.js";
import { promptText, functionResponses, isJson } from "../support/prompt.js";

const BOT = "edge_bot";
let s;
before(async () => {
  s = await startStack({ vars: { BOT_USERNAME: BOT, SCHEDULE_MIN_REPEAT_MINUTES: "1", RETRY_BASE_MS: "300" } });
});
after(async () => {
  await s?.close();
});

/** Has the bot, in a private chat, schedule `calls` (schedule_message args); the stored rows. */
async function scheduleIn(st, uid, argsList, reply = "Okay, I'll remind you.") {
  st.gemini.script(uid, [{ calls: argsList.map((args) => ({ name: "schedule_message", args })) }, { text: reply }]);
  const before = st.tg.sent(uid).length;
  await st.webhook(privateText(uid, "please remind me"));
  await st.tg.waitFor(() => st.tg.sent(uid).length === before + 1, 15_000, "the confirmation");
  const rows = await st.sql("SELECT * FROM schedules WHERE chat_id = ? ORDER BY id", uid);
  assert.equal(rows.length, argsList.length, "the schedules are stored");
  return rows;
}

async function block(st, uid) {
  const r = await st.fetch(`/api/v1/users/${uid}/access`, {
    method: "PUT",
    headers: { ...ADMIN_HEADERS, "content-type": "application/json" },
    body: JSON.stringify({ access: "blocked" }),
  });
  assert.equal(r.status, 200);
}

test("blocking a person cancels the reminders they set, in every chat, and their chat objects are told", async () => {
  const uid = uniqueId();
  const other = uniqueId();
  const group = -1_000_000_000_000 - uniqueId();
  const [mine] = await scheduleIn(s, uid, [{ text: "water the plants", in_minutes: 600, repeat: "daily" }]);
  s.gemini.script(uid, [{ calls: [{ name: "schedule_message", args: { text: "team sync", in_minutes: 600 } }] }, { text: "Set." }]);
  await s.webhook(askInGroup(group, uid, "remind us about the sync", { bot: BOT }));
  await s.tg.waitFor(() => s.tg.sent(group).length === 1, 15_000, "the group confirmation");
  const [theirs] = await scheduleIn(s, other, [{ text: "someone else's", in_minutes: 600 }]);
  assert.equal(await s.nextWake(uid, (at) => at === mine.next_run_ms), mine.next_run_ms, "the private chat's object wakes for the reminder");

  await block(s, uid);
  const rows = await s.sql("SELECT chat_id, status, next_run_ms FROM schedules WHERE creator_user_id = ? ORDER BY id", uid);
  assert.deepEqual(rows, [
    { chat_id: uid, status: "cancelled", next_run_ms: null },
    { chat_id: group, status: "cancelled", next_run_ms: null },
  ]);
  assert.equal((await s.sql("SELECT status FROM schedules WHERE id = ?", theirs.id))[0].status, "active", "nobody else's");
  assert.equal(await s.nextWake(uid, (at) => at === null), null, "the object was told");
  assert.equal(await s.nextWake(group, (at) => at === null), null);
  assert.equal(mine.creator_user_id, uid);
});

test("a reminder whose creator lost access by its due time does not run, and is cancelled", async () => {
  const uid = uniqueId();
  const [row] = await scheduleIn(s, uid, [{ text: "stretch", in_minutes: 0.1 }]);
  // Blocked behind the admin API's back (nothing cancels it): the run itself must ask.
  await s.sql(
    "INSERT INTO users (user_id, name, access, updated_at) VALUES (?, 'x', 'blocked', 0) ON CONFLICT (user_id) DO UPDATE SET access = 'blocked'",
    uid,
  );
  await sleep(9_000); // past the due time
  assert.deepEqual(s.tg.sent(uid), ["Okay, I'll remind you."], "no reminder went out");
  assert.equal(s.gemini.calls(uid).length, 2, "no model call for the run");
  const [after] = await s.sql("SELECT status, runs, next_run_ms FROM schedules WHERE id = ?", row.id);
  assert.deepEqual(after, { status: "cancelled", runs: 0, next_run_ms: null });
});

test("a reminder's run counts against its creator's hourly budget; over it a one-off run goes out as its own text, with no model call", async () => {
  const b = await startStack({ vars: { USER_TURNS_PER_HOUR: "2", RETRY_BASE_MS: "300" } });
  try {
    const uid = uniqueId();
    // One message (the first of two requests this hour) sets two reminders.
    const [first, second] = await scheduleIn(b, uid, [
      { text: "first run", in_minutes: 0.05 },
      { text: "second run", in_minutes: 0.12 },
    ]);
    b.gemini.script(uid, [{ text: "Reminder: first run" }, { text: "Reminder: second run" }]);
    await b.tg.waitFor(() => b.tg.sent(uid).length === 2, 15_000, "the first run");
    await b.tg.waitFor(() => b.tg.sent(uid).length === 3, 15_000, "the second run, over the budget");
    await sleep(1_000);
    const sent = b.tg.sent(uid);
    assert.equal(sent.length, 3);
    assert.deepEqual(sent.slice(0, 2), ["Okay, I'll remind you.", "Reminder: first run"]);
    assert.match(sent[2], /second run/, "a reminder set once is not lost: its own text");
    assert.doesNotMatch(sent[2], /Reminder: second run/, "no model-written version");
    assert.equal(b.gemini.calls(uid).length, 3, "no model call for the run over the budget");
    const charges = await b.sql("SELECT COUNT(*) AS n FROM charges WHERE user_id = ?", uid);
    assert.equal(charges[0].n, 2, "the message and the first run");
    const [one] = await b.sql("SELECT status, runs FROM schedules WHERE id = ?", first.id);
    assert.deepEqual(one, { status: "done", runs: 1 });
    const [two] = await b.sql("SELECT status, runs, next_run_ms FROM schedules WHERE id = ?", second.id);
    assert.deepEqual(two, { status: "done", runs: 1, next_run_ms: null }, "sent once, not retried in a loop");
    assert.equal(await b.nextWake(uid, (at) => at === null), null, "nothing more to wake for");
  } finally {
    await b.close();
  }
});

test("consolidation makes no model call for a chat over its daily tokens", async () => {
  const b = await startStack({ vars: { CHAT_TOKENS_PER_DAY: "500", BOT_USERNAME: BOT } });
  try {
    const uid = uniqueId();
    await b.webhook(privateText(uid, "I have a cat named Tofu and I live in Lisbon."));
    await b.tg.waitFor(() => b.tg.sent(uid).length === 1, 10_000, "the answer");
    const [used] = await b.sql("SELECT SUM(total_tokens) AS n FROM calls WHERE chat_id = ?", uid);
    assert.ok(used.n > 500, `the chat used ${used.n} tokens`);
    // A group within its budget (its chatter asked for no turn): consolidated as usual.
    const group = -1_000_000_000_000 - uniqueId();
    const member = uniqueId();
    await b.webhook(groupText(group, member, "I like green tea"));
    const empty = { text: JSON.stringify({ facts: [], episodes: [], commitments: [], commitment_updates: [], aliases: [] }) };
    b.gemini.script(member, [empty]);
    b.gemini.script(uid, [empty]);
    await b.scheduled();
    await b.gemini.waitFor(() => b.gemini.calls(member).some((c) => isJson(c.body)), 15_000, "the group's consolidation");
    await sleep(2500);
    assert.equal(b.gemini.calls(uid).filter((c) => isJson(c.body)).length, 0, "no consolidation call for the chat over its budget");
    const [conv] = await b.sql("SELECT consolidated_seq, consolidating_until FROM conversations WHERE conv = ?", String(uid));
    assert.ok(!conv?.consolidated_seq, "its messages wait for a day with budget");
    assert.equal(conv?.consolidating_until ?? null, null, "and the lease is given back");
  } finally {
    await b.close();
  }
});

test("a crew's continuation turns count against the budget of the person whose message started the cycle", async () => {
  const b = await startStack({ vars: { CREW: "critic,builder,moderator", CREW_CHATS: "*", CREW_MAX_ROUNDS: "2", USER_TURNS_PER_HOUR: "2", TURN_WATCHDOG_MS: "3000" } });
  try {
    const uid = uniqueId();
    await b.webhook(privateText(uid, "let's plan a picnic"));
    // The worker's log says when and why the cycle ended (what an operator reads).
    const ends = () => b.logs().map((l) => String(l.message ?? l)).filter((m) => m.startsWith(`crew cycle ended in ${uid}:`));
    for (let i = 0; i < 100 && ends().length === 0; i++) await sleep(200);
    assert.deepEqual(ends(), [`crew cycle ended in ${uid}: over_budget`], "the cycle ended at the person's budget");
    assert.equal(b.gemini.calls(uid).length, 2, "the first persona (the message's turn) and one continuation");
    const charges = await b.sql("SELECT COUNT(*) AS n FROM charges WHERE user_id = ?", uid);
    assert.equal(charges[0].n, 2, "the message and the continuation");
  } finally {
    await b.close();
  }
});

test("in a group, a burst mixing senders lends nobody the authority to cancel a reminder", async () => {
  const group = -1_000_000_000_000 - uniqueId();
  const alice = uniqueId();
  const bob = uniqueId();
  s.gemini.script(alice, [{ calls: [{ name: "schedule_message", args: { text: "team sync", in_minutes: 600 } }] }, { text: "Set." }]);
  await s.webhook(askInGroup(group, alice, "remind us about the sync", { bot: BOT, name: "Alice" }));
  await s.tg.waitFor(() => s.tg.sent(group).length === 1, 15_000, "the confirmation");
  const [row] = await s.sql("SELECT id, creator_user_id FROM schedules WHERE chat_id = ?", group);
  assert.equal(row.creator_user_id, alice);
  // Bob asks; Alice writes anything right after: one burst, Alice's message the newest.
  const cancel = [{ calls: [{ name: "cancel_schedule", args: { id: row.id } }] }, { text: "Done." }];
  s.gemini.script(alice, cancel);
  s.gemini.script(bob, cancel);
  await s.webhook(askInGroup(group, bob, `cancel reminder ${row.id}`, { bot: BOT, name: "Bob" }));
  await s.webhook(askInGroup(group, alice, "thanks for the help!", { bot: BOT, name: "Alice" }));
  await s.tg.waitFor(() => s.tg.sent(group).length === 2, 15_000, "the answer to the burst");
  const cancels = [...s.gemini.calls(alice), ...s.gemini.calls(bob)]
    .flatMap((c) => functionResponses(c.body))
    .filter((r) => r.cancelled !== undefined || /schedule #/.test(r.error ?? ""));
  assert.equal(cancels.length, 1, `one turn answered the burst: ${JSON.stringify(cancels)}`);
  assert.match(cancels[0].error ?? "", new RegExp(`no active schedule #${row.id} in this chat that the person asking set`));
  assert.equal((await s.sql("SELECT status FROM schedules WHERE id = ?", row.id))[0].status, "active", "still active");
  // Alice's own burst does cancel it.
  s.gemini.script(alice, [{ calls: [{ name: "cancel_schedule", args: { id: row.id } }] }, { text: "Cancelled." }]);
  await s.webhook(askInGroup(group, alice, `please cancel reminder ${row.id}`, { bot: BOT, name: "Alice" }));
  await s.tg.waitFor(() => s.tg.sent(group).length === 3, 15_000, "the answer to Alice");
  assert.equal((await s.sql("SELECT status FROM schedules WHERE id = ?", row.id))[0].status, "cancelled");
});

test("in a group, a burst mixing senders sets no reminder in anyone's name; one sender's burst sets it as theirs", async () => {
  const group = -1_000_000_000_000 - uniqueId();
  const alice = uniqueId();
  const bob = uniqueId();
  const set = (text) => [{ calls: [{ name: "schedule_message", args: { text, in_minutes: 600 } }] }, { text: "Okay." }];
  s.gemini.script(alice, set("ping every quarter hour"));
  s.gemini.script(bob, set("ping every quarter hour"));
  // Bob asks; Alice's "ok" right after is the burst's newest message.
  await s.webhook(askInGroup(group, bob, "remind everyone every 15 minutes", { bot: BOT, name: "Bob" }));
  await s.webhook(askInGroup(group, alice, "ok", { bot: BOT, name: "Alice" }));
  await s.tg.waitFor(() => s.tg.sent(group).length === 1, 15_000, "the answer to the burst");
  const answers = [...s.gemini.calls(alice), ...s.gemini.calls(bob)].flatMap((c) => functionResponses(c.body)).filter((r) => r.error !== undefined || r.id !== undefined);
  assert.equal(answers.length, 1, JSON.stringify(answers));
  assert.match(answers[0].error ?? "", /belongs to the one person who asked/);
  assert.deepEqual(await s.sql("SELECT creator_user_id FROM schedules WHERE chat_id = ?", group), [], "nothing set in Alice's name");
  // Bob alone: set as his.
  s.gemini.script(bob, set("stand-up"));
  await s.webhook(askInGroup(group, bob, "remind us about the stand-up", { bot: BOT, name: "Bob" }));
  await s.tg.waitFor(() => s.tg.sent(group).length === 2, 15_000, "the confirmation");
  assert.deepEqual(await s.sql("SELECT creator_user_id FROM schedules WHERE chat_id = ?", group), [{ creator_user_id: bob }]);
});

test("a note or fact one member supplied about another stays in the group, never in that member's private chat", async () => {
  const b = await startStack({ vars: { BOT_USERNAME: BOT } });
  try {
    const group = -1_000_000_000_000 - uniqueId();
    const alice = uniqueId();
    const bob = uniqueId();
    const mark = (k) => `${k}mark${alice}`;
    // Alice's own words about herself, and Bob's about her: notes (remember) and facts (consolidation).
    b.gemini.script(alice, [{ calls: [{ name: "remember", args: { content: `likes tea ${mark("ownnote")}`, about_user_id: alice } }, { name: "send_message", args: { text: "Noted." } }] }]);
    const own = askInGroup(group, alice, "remember that I like tea", { bot: BOT, name: "Alice" });
    await b.webhook(own);
    await b.tg.waitFor(() => b.tg.sent(group).length === 1, 10_000, "Alice's note");
    b.gemini.script(bob, [{ calls: [{ name: "remember", args: { content: `owes money ${mark("planted")}`, about_user_id: alice } }, { name: "send_message", args: { text: "Noted." } }] }]);
    await b.webhook(askInGroup(group, bob, "remember that Alice owes me 100 euros", { bot: BOT, name: "Bob" }));
    await b.tg.waitFor(() => b.tg.sent(group).length === 2, 10_000, "Bob's note");
    const notes = await b.sql("SELECT content, supplied_by FROM notes WHERE about_user_id = ? ORDER BY id", alice);
    assert.deepEqual(notes.map((n) => n.supplied_by), [alice, bob], "who supplied each note is recorded");

    const said = groupText(group, bob, "Alice lives on Elm street, by the way", { name: "Bob" });
    await b.webhook(said);
    b.gemini.script(bob, [(body) => (isJson(body)
      ? { text: JSON.stringify({
        facts: [
          { about_user_id: alice, entity: "Alice", attribute: "drink", value: `tea ${mark("ownfact")}`, source_message_ids: [own.message.message_id] },
          { about_user_id: alice, entity: "Alice", attribute: "street", value: `Elm ${mark("plantedfact")}`, source_message_ids: [said.message.message_id] },
        ],
        episodes: [], commitments: [], commitment_updates: [], aliases: [],
      }) }
      : { text: "unexpected" })]);
    await b.scheduled();
    for (let i = 0; i < 100; i++) {
      const [c] = await b.sql("SELECT consolidated_seq FROM conversations WHERE conv = ?", String(group));
      if (c?.consolidated_seq) break;
      await sleep(200);
    }
    const facts = await b.sql("SELECT value, supplied_by FROM memories WHERE about_user_id = ? ORDER BY id", alice);
    assert.deepEqual(facts.map((f) => f.supplied_by), [alice, bob], "who supplied each fact is recorded");

    // Alice's private chat: her own words cross over; what Bob said about her does not.
    await b.webhook(privateText(alice, "what do you know about me?", { name: "Alice" }));
    await b.tg.waitFor(() => b.tg.sent(alice).length === 1, 10_000, "the private answer");
    const priv = promptText(b.gemini.calls(alice).at(-1).body);
    assert.match(priv, new RegExp(mark("ownnote")));
    assert.match(priv, new RegExp(mark("ownfact")));
    assert.doesNotMatch(priv, new RegExp(mark("planted")), "Bob's note about Alice stays in the group");
    assert.doesNotMatch(priv, new RegExp(mark("plantedfact")), "Bob's words about Alice are not her own");
    await b.webhook(privateText(alice, "/memory", { name: "Alice", entities: [{ type: "bot_command", offset: 0, length: 7 }] }));
    await b.tg.waitFor(() => b.tg.sent(alice).length === 2, 10_000, "/memory");
    assert.doesNotMatch(b.tg.sent(alice)[1], /planted/);
    // In the group, where it was said, it is still there.
    await b.webhook(askInGroup(group, alice, "what do you know?", { bot: BOT, name: "Alice" }));
    await b.tg.waitFor(() => b.tg.sent(group).length === 3, 10_000, "the group answer");
    const inGroup = promptText(b.gemini.calls(alice).at(-1).body);
    assert.match(inGroup, new RegExp(`\\(about user ${alice}, said by user ${bob}\\) owes money ${mark("planted")}`), "marked as Bob's words");
    assert.match(inGroup, new RegExp(`Elm ${mark("plantedfact")} \\(said by user ${bob}\\)`), "marked as Bob's words");
    assert.match(inGroup, new RegExp(`\\(about user ${alice}\\) likes tea ${mark("ownnote")}`), "her own, unmarked");
  } finally {
    await b.close();
  }
});
