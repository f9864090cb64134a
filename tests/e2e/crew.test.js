// Crew mode end to end: three personas (critic, builder with its own bot in groups, moderator)
// speak in turn, each Gemini request carrying the whole conversation; passes end the cycle; a person
// writing mid-cycle restarts it; a runtime restart mid-cycle resumes with no duplicate and no
// gap; group chatter starts nothing; crew off restores the single bot.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, startWorker, privateText, groupText, mention, uniqueId, sleep, WEBHOOK_SECRET, ADMIN_HEADERS } from "../support/stack.js";
import { turnContext } from "../support/prompt.js";

const BUILDER_TOKEN = "777000111:ACTOR-token_for-the-builder-bot";
const ADMIN = 4242;
let s;
before(async () => {
  s = await startStack({
    vars: { CREW: "critic,builder,moderator", CREW_CHATS: "*", CREW_MAX_ROUNDS: "2", ADMIN_USER_IDS: String(ADMIN), TURN_WATCHDOG_MS: "3000", BOT_USERNAME: "edge_test_bot" },
    secrets: { CREW_BOT_TOKEN_BUILDER: BUILDER_TOKEN },
  });
  s.tg.addBot(BUILDER_TOKEN, { first_name: "Builder", username: "builder_test_bot" });
});
after(async () => {
  await s?.close();
});

const systemText = (body) => (body.systemInstruction?.parts ?? []).map((p) => p.text).join("");
const contentsText = (body) => (body.contents ?? []).flatMap((c) => c.parts ?? []).map((p) => p.text ?? "").join("\n");
/** Which persona a request is for, from its system instruction. */
const personaOf = (body) => /You are (\w+) in a crew/.exec(systemText(body))?.[1] ?? "single";

/** Scripted answers that also check each request is for the persona expected next. */
function crewScript(uid, steps) {
  s.gemini.script(
    uid,
    steps.map(([persona, answer]) => (body) => {
      const got = personaOf(body);
      return got === persona ? answer : { text: `WRONG ORDER: ${got} spoke where ${persona} was expected` };
    }),
  );
}
const PASS = { calls: [{ name: "pass", args: {} }] };

/** Waits until the worker says (in its log, as an operator reads it) that the next crew cycle
 *  of `conv` ended, for `why` (each line is taken once). */
const endedSeen = new Map();
async function ended(conv, why) {
  const line = `crew cycle ended in ${conv}: ${why}`;
  const taken = endedSeen.get(line) ?? 0;
  for (let i = 0; i < 100; i++) {
    const n = s.logs().filter((l) => String(l.message ?? l).includes(line)).length;
    if (n > taken) {
      endedSeen.set(line, taken + 1);
      return;
    }
    await sleep(150);
  }
  const said = s.logs().map((l) => String(l.message ?? l)).filter((m) => m.includes(`crew cycle ended in ${conv}:`));
  assert.fail(`the cycle did not end (${why}): ${JSON.stringify(said)}`);
}

test("personas answer in order, each seeing the whole conversation; the moderator's pass ends the cycle", async () => {
  const uid = uniqueId();
  crewScript(uid, [["Critic", { text: "The plan has no budget." }], ["Builder", { text: "Budget: 50 euros." }], ["Moderator", PASS]]);
  await s.webhook(privateText(uid, "let's plan a picnic"));
  await ended(uid, "moderator_passed");
  const calls = s.gemini.calls(uid);
  assert.deepEqual(calls.map((c) => personaOf(c.body)), ["Critic", "Builder", "Moderator"]);
  // Each request has the whole conversation, with the replies made earlier in this cycle.
  assert.match(contentsText(calls[0].body), /plan a picnic/);
  const builderSees = contentsText(calls[1].body);
  assert.match(builderSees, /plan a picnic/);
  assert.match(builderSees, /name="Critic \(crew\)"[\s\S]*The plan has no budget/);
  const moderatorSees = contentsText(calls[2].body);
  assert.match(moderatorSees, /The plan has no budget/);
  assert.match(moderatorSees, /Budget: 50 euros/);
  // The builder's own message is a model turn in a later request of its own (see below); here
  // the critic's message is a user turn for the builder.
  assert.ok(calls[1].body.contents.every((c) => c.role === "user" || !(c.parts ?? []).some((p) => /no budget/.test(p.text ?? ""))));
  // Sent by the main bot, each persona's name as a bold first line (a persona's own bot
  // cannot write into a private chat with the main bot); the moderator's pass sends nothing.
  const sends = s.tg.calls("sendMessage", uid).filter((r) => r.text);
  assert.equal(sends.length, 2);
  assert.equal(sends[0].text, "Critic\nThe plan has no budget.");
  assert.match(sends[0].body.text, /^<b>Critic<\/b>/);
  assert.deepEqual(sends.map((r) => r.from.username), ["edge_test_bot", "edge_test_bot"]);
  assert.equal(sends[1].text, "Builder\nBudget: 50 euros.");
  // Model calls record the persona, and the costs API breaks them down by persona.
  const rows = await s.sql("SELECT persona FROM calls WHERE turn_id LIKE ? ORDER BY created_at, n", `${uid}/%`);
  assert.deepEqual(rows.map((r) => r.persona), ["critic", "builder", "moderator"]);
  const costs = await (await s.fetch(`/api/v1/costs?chat_id=${uid}`, { headers: ADMIN_HEADERS })).json();
  assert.deepEqual(Object.keys(costs.by_persona ?? {}).sort(), ["builder", "critic", "moderator"], JSON.stringify(costs));
  // The moderator spoke last: the critic is next.
  crewScript(uid, [["Critic", PASS], ["Builder", PASS], ["Moderator", PASS]]);
  await s.webhook(privateText(uid, "anything else?"));
  await ended(uid, "all_passed");
  assert.deepEqual(s.gemini.calls(uid).slice(3).map((c) => personaOf(c.body)), ["Critic", "Builder", "Moderator"]);
});

test("every persona passing in a row ends the cycle and sends nothing; the next cycle continues the order", async () => {
  const uid = uniqueId();
  crewScript(uid, [["Critic", { text: "....." }], ["Builder", PASS], ["Moderator", PASS]]);
  await s.webhook(privateText(uid, "anything to add?"));
  await ended(uid, "all_passed");
  assert.equal(s.tg.sent(uid).length, 0, "passes are not sent");
  // The next cycle: critic speaks, then the builder sees it and its own earlier silence is not shown.
  crewScript(uid, [["Critic", { text: "One more thing." }], ["Builder", PASS], ["Moderator", PASS]]);
  await s.webhook(privateText(uid, "sure?"));
  await ended(uid, "moderator_passed");
  assert.deepEqual(s.tg.sent(uid), ["Critic\nOne more thing."]);
  const builder = s.gemini.calls(uid).filter((c) => personaOf(c.body) === "Builder").at(-1);
  assert.doesNotMatch(contentsText(builder.body), /\.\.\.\.\./, "a pass is not shown to the others");
});

test("a person writing mid-cycle cancels the turns not taken and starts a new cycle with the message in view", async () => {
  const uid = uniqueId();
  crewScript(uid, [
    ["Critic", { text: "Too early.", delayMs: 2500 }],
    ["Critic", { text: "Now with the new detail." }],
    ["Builder", PASS],
    ["Moderator", PASS],
  ]);
  await s.webhook(privateText(uid, "first idea"));
  await s.gemini.waitFor(() => s.gemini.calls(uid).length === 1, 10_000, "the critic's slow call");
  await s.webhook(privateText(uid, "actually, a new detail"));
  await ended(uid, "moderator_passed");
  assert.deepEqual(s.tg.sent(uid), ["Critic\nNow with the new detail."], "the stale answer is never sent");
  const second = s.gemini.calls(uid)[1];
  assert.equal(personaOf(second.body), "Critic", "the critic did not speak: it goes first in the new cycle");
  assert.match(contentsText(second.body), /a new detail/);
});

test("a runtime restart mid-cycle resumes at the persona whose turn it was: no duplicate, no gap", async () => {
  const uid = uniqueId();
  // Answers by persona (the same text however often a persona is asked, so a resent message
  // would show as a duplicate); the second call (the builder's) is slow, and the runtime
  // restarts while it is in flight.
  const answers = { Critic: { text: "Point one." }, Builder: { text: "Step two." }, Moderator: PASS };
  const byPersona = () => Object.assign((body) => answers[personaOf(body)] ?? { text: "unexpected" }, {});
  s.gemini.script(uid, [byPersona(), Object.assign(byPersona(), { delayMs: 4000 }), ...Array.from({ length: 8 }, byPersona)]);
  await s.webhook(privateText(uid, "go"));
  await s.gemini.waitFor(() => s.gemini.calls(uid).length === 2, 15_000, "the builder's slow call");
  await s.restart(); // the instance running the builder's turn is replaced; storage stays
  await ended(uid, "moderator_passed");
  await sleep(3000);
  const sent = s.tg.calls("sendMessage", uid).filter((r) => r.text).map((r) => r.text);
  assert.deepEqual(sent, ["Critic\nPoint one.", "Builder\nStep two."], "each persona's message once, in order");
  const personas = s.gemini.calls(uid).map((c) => personaOf(c.body));
  assert.deepEqual([...new Set(personas)], ["Critic", "Builder", "Moderator"], "the builder's turn was not skipped");
  // One turn per persona: the builder's turn was resumed under its own id, not started anew.
  const turns = await s.sql("SELECT turn_id FROM turns WHERE chat_id = ? ORDER BY created_at", uid);
  assert.deepEqual(turns.map((t) => t.turn_id.split("~")[1]), ["critic", "builder", "moderator"]);
});

test("group chatter starts nothing; a mention starts the crew", async () => {
  const chat = -uniqueId();
  const uid = uniqueId();
  await s.webhook(groupText(chat, uid, "just chatting among ourselves"));
  await sleep(1500);
  assert.equal(s.gemini.calls(uid).length, 0);
  assert.equal(s.tg.sent(chat).length, 0);
  crewScript(uid, [["Critic", { text: "Heard you." }], ["Builder", { text: "Building it." }], ["Moderator", PASS]]);
  const t = "@edge_test_bot what do you think?";
  await s.webhook(groupText(chat, uid, t, { entities: mention(t, "edge_test_bot") }));
  await ended(chat, "moderator_passed");
  assert.deepEqual(s.tg.sent(chat), ["Critic\nHeard you.", "Building it."]);
  // In a group the builder speaks through its own bot (its own token's URL), with no header;
  // its typing comes from it too.
  const sends = s.tg.calls("sendMessage", chat).filter((r) => r.text);
  assert.deepEqual(sends.map((r) => r.from.username), ["edge_test_bot", "builder_test_bot"]);
  assert.ok(s.tg.calls("sendChatAction", chat).some((r) => r.from.username === "builder_test_bot"));
  // A mention of a persona's own bot starts a cycle too (the crew's bots count as addressed).
  // The order goes on from the pointer: the critic's turn comes first.
  crewScript(uid, [["Critic", { text: "Yes?" }], ["Builder", PASS], ["Moderator", PASS]]);
  const t2 = "@builder_test_bot can you help?";
  await s.webhook(groupText(chat, uid, t2, { entities: mention(t2, "builder_test_bot") }));
  await s.tg.waitFor(() => s.tg.sent(chat).length === 3, 15_000, "the crew's answer");
  assert.equal(s.tg.sent(chat)[2], "Critic\nYes?");
});

test("crew off (API, /crew) restores the single bot; only operators switch it", async () => {
  const uid = uniqueId();
  const r = await s.fetch(`/api/v1/chats/${uid}/crew`, { method: "PUT", headers: { ...ADMIN_HEADERS, "content-type": "application/json" }, body: JSON.stringify({ enabled: false }) });
  assert.equal(r.status, 200);
  await s.webhook(privateText(uid, "hello alone"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the single bot's reply");
  assert.equal(s.tg.sent(uid)[0], "Echo: hello alone");
  assert.doesNotMatch(systemText(s.gemini.calls(uid)[0].body), /## Crew/);
  // A non-operator cannot switch it back on.
  await s.webhook(privateText(uid, "/crew on"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 10_000, "the refusal");
  assert.match(s.tg.sent(uid)[1], /Only my operators/);
  await s.webhook(privateText(uid, "still alone?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 3, 10_000, "the single bot's second reply");
  assert.equal(s.tg.sent(uid)[2], "Echo: still alone?", "the crew stayed off");
  // An operator can, in their own chat.
  await s.webhook(privateText(ADMIN, "/crew off"));
  await s.tg.waitFor(() => s.tg.sent(ADMIN).length === 1, 10_000, "the confirmation");
  assert.match(s.tg.sent(ADMIN)[0], /Crew off/);
  await s.webhook(privateText(ADMIN, "just me?"));
  await s.tg.waitFor(() => s.tg.sent(ADMIN).length === 2, 10_000, "the single bot's reply");
  assert.equal(s.tg.sent(ADMIN)[1], "Echo: just me?");
  await s.webhook(privateText(ADMIN, "/crew on"));
  await s.tg.waitFor(() => s.tg.sent(ADMIN).length === 3, 10_000, "the confirmation");
  s.gemini.script(ADMIN, [PASS, PASS, PASS]);
  await s.webhook(privateText(ADMIN, "and now?"));
  await ended(ADMIN, "all_passed");
  assert.deepEqual(s.gemini.calls(ADMIN).slice(-3).map((c) => personaOf(c.body)).sort(), ["Builder", "Critic", "Moderator"], "the crew speaks again");
});

test("a persona whose call fails is skipped with a note to the next; when every persona fails the chat gets one apology", async () => {
  const uid = uniqueId();
  const refused = { status: 400, message: "Request contains an invalid argument." };
  crewScript(uid, [["Critic", refused], ["Builder", { text: "Carrying on." }], ["Moderator", PASS]]);
  await s.webhook(privateText(uid, "help"));
  await ended(uid, "moderator_passed");
  assert.deepEqual(s.tg.sent(uid), ["Builder\nCarrying on."], "no apology for one skipped persona");
  const builder = s.gemini.calls(uid).find((c) => personaOf(c.body) === "Builder");
  // The note is this turn's own: it is in the turn context, not the system instruction.
  assert.match(turnContext(builder.body), /## Crew\nNote: .*critic's turn failed/);
  assert.doesNotMatch(systemText(builder.body), /critic's turn failed/);

  crewScript(uid, [["Critic", refused], ["Builder", refused], ["Moderator", refused]]);
  await s.webhook(privateText(uid, "again"));
  await ended(uid, "all_failed");
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 10_000, "the apology");
  await sleep(1000);
  assert.equal(s.tg.sent(uid).length, 2, "one apology for the whole cycle");
  assert.match(s.tg.sent(uid)[1], /technical problem/);
});

test("a crew naming an unknown persona makes the webhook refuse with a clear message", async () => {
  const w = await startWorker({ CREW: "critic,nobody" });
  try {
    const r = await w.worker.fetch("http://edge.test/telegram/webhook", {
      method: "POST",
      headers: { "content-type": "application/json", "X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET },
      body: JSON.stringify(privateText(uniqueId(), "hi")),
    });
    assert.equal(r.status, 500);
    assert.match(await r.text(), /prompts\/personas\/nobody\.md/);
  } finally {
    await w.server.close();
  }
});

test("/new ends a running cycle: no further persona speaks in the new session", async () => {
  const uid = uniqueId();
  crewScript(uid, [["Critic", { text: "First." }], ["Builder", { text: "Second.", delayMs: 2000 }], ["Moderator", { text: "should not speak" }]]);
  await s.webhook(privateText(uid, "start"));
  await s.gemini.waitFor(() => s.gemini.calls(uid).length === 2, 10_000, "the builder's call");
  await s.webhook(privateText(uid, "/new"));
  await s.tg.waitFor(() => s.tg.sent(uid).includes("Builder\nSecond."), 10_000, "the builder's answer in flight");
  await sleep(2500);
  assert.equal(s.gemini.calls(uid).length, 2, "the moderator was not asked");
});

test("a continuation turn taken over after a restart charges its person's hour once (issue 47, item 13)", async () => {
  const uid = uniqueId();
  const answers = { Critic: { text: "Point one." }, Builder: { text: "Step two." }, Moderator: PASS };
  const byPersona = () => (body) => answers[personaOf(body)] ?? { text: "unexpected" };
  s.gemini.script(uid, [byPersona(), Object.assign(byPersona(), { delayMs: 4000 }), ...Array.from({ length: 8 }, byPersona)]);
  await s.webhook(privateText(uid, "go"));
  await s.gemini.waitFor(() => s.gemini.calls(uid).length === 2, 15_000, "the builder's slow call");
  await s.restart(); // the builder's turn is taken over by the next instance
  await ended(uid, "moderator_passed");
  await sleep(1000);
  // The person's message, then one charge per continuation (the builder's and the moderator's).
  const costs = await s.api("GET", `costs?chat_id=${uid}&user_id=${uid}`);
  assert.equal(costs.status, 200);
  assert.equal(costs.json.budgets.user_turns_last_hour, 3, "the message and two continuations, each charged once");
});
