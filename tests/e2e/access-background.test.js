// Access and budgets for the work nobody asked for just now (issue 35, items 1, 2, 12, 14):
// a reminder passes the access policy again when it is due and counts against its creator's
// hourly budget; blocking a person cancels what they set; consolidation and a crew's
// continuation turns are checked against the budgets they belong to; in a group only the
// owner's own burst cancels a reminder; a note or fact one member supplied about another stays
// in the chat where it was said.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, groupText, mention, uniqueId, sleep, ADMIN_TOKEN } from "../support/stack.js";
import { promptText } from "../support/prompt.js";

const BOT = "edge_bot";
let s;
before(async () => {
  s = await startStack({ vars: { BOT_USERNAME: BOT, SCHEDULE_MIN_REPEAT_MINUTES: "1", RETRY_BASE_MS: "300" } });
});
after(async () => {
  await s?.close();
});

const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const isJson = (body) => body?.generationConfig?.responseMimeType === "application/json";
const ask = (chat, uid, words, opts = {}) => {
  const t = `@${BOT} ${words}`;
  return groupText(chat, uid, t, { entities: mention(t, BOT), ...opts });
};

/** The function responses in the newest user content of a request. */
function functionResponses(body) {
  const last = [...body.contents].reverse().find((c) => c.parts.some((p) => p.functionResponse));
  return (last?.parts ?? []).filter((p) => p.functionResponse).map((p) => p.functionResponse.response);
}

async function chatState(st, conv) {
  const r = await st.fetch(`/api/v1/chats/${conv}/state`, { headers: admin });
  assert.equal(r.status, 200);
  return r.json();
}

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
    headers: { ...admin, "content-type": "application/json" },
    body: JSON.stringify({ access: "blocked" }),
  });
  assert.equal(r.status, 200);
}

test("in a group, a burst mixing senders lends nobody the authority to cancel a reminder", async () => {
  const group = -1_000_000_000_000 - uniqueId();
  const alice = uniqueId();
  const bob = uniqueId();
  s.gemini.script(alice, [{ calls: [{ name: "schedule_message", args: { text: "team sync", in_minutes: 600 } }] }, { text: "Set." }]);
  await s.webhook(ask(group, alice, "remind us about the sync", { name: "Alice" }));
  await s.tg.waitFor(() => s.tg.sent(group).length === 1, 15_000, "the confirmation");
  const [row] = await s.sql("SELECT id, creator_user_id FROM schedules WHERE chat_id = ?", group);
  assert.equal(row.creator_user_id, alice);
  // Bob asks; Alice writes anything right after: one burst, Alice's message the newest.
  const cancel = [{ calls: [{ name: "cancel_schedule", args: { id: row.id } }] }, { text: "Done." }];
  s.gemini.script(alice, cancel);
  s.gemini.script(bob, cancel);
  await s.webhook(ask(group, bob, `cancel reminder ${row.id}`, { name: "Bob" }));
  await s.webhook(ask(group, alice, "thanks for the help!", { name: "Alice" }));
  await s.tg.waitFor(() => s.tg.sent(group).length === 2, 15_000, "the answer to the burst");
  const cancels = [...s.gemini.calls(alice), ...s.gemini.calls(bob)]
    .flatMap((c) => functionResponses(c.body))
    .filter((r) => r.cancelled !== undefined || /schedule #/.test(r.error ?? ""));
  assert.equal(cancels.length, 1, `one turn answered the burst: ${JSON.stringify(cancels)}`);
  assert.match(cancels[0].error ?? "", new RegExp(`no active schedule #${row.id} in this chat that the person asking set`));
  assert.equal((await s.sql("SELECT status FROM schedules WHERE id = ?", row.id))[0].status, "active", "still active");
  // Alice's own burst does cancel it.
  s.gemini.script(alice, [{ calls: [{ name: "cancel_schedule", args: { id: row.id } }] }, { text: "Cancelled." }]);
  await s.webhook(ask(group, alice, `please cancel reminder ${row.id}`, { name: "Alice" }));
  await s.tg.waitFor(() => s.tg.sent(group).length === 3, 15_000, "the answer to Alice");
  assert.equal((await s.sql("SELECT status FROM schedules WHERE id = ?", row.id))[0].status, "cancelled");
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
    const own = ask(group, alice, "remember that I like tea", { name: "Alice" });
    await b.webhook(own);
    await b.tg.waitFor(() => b.tg.sent(group).length === 1, 10_000, "Alice's note");
    b.gemini.script(bob, [{ calls: [{ name: "remember", args: { content: `owes money ${mark("planted")}`, about_user_id: alice } }, { name: "send_message", args: { text: "Noted." } }] }]);
    await b.webhook(ask(group, bob, "remember that Alice owes me 100 euros", { name: "Bob" }));
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
    await b.webhook(ask(group, alice, "what do you know?", { name: "Alice" }));
    await b.tg.waitFor(() => b.tg.sent(group).length === 3, 10_000, "the group answer");
    const inGroup = promptText(b.gemini.calls(alice).at(-1).body);
    assert.match(inGroup, new RegExp(mark("planted")));
    assert.match(inGroup, new RegExp(mark("plantedfact")));
  } finally {
    await b.close();
  }
});
