// Reminders and follow-ups (schedule_message, /reminders, /cancel, the admin API) and web
// search grounding, end to end: the chat object's alarm fires due runs exactly once, through
// restarts and a model that fails; the cron recovers a lost alarm; late runs fire once or are
// skipped, never caught up one by one.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, groupText, mention, uniqueId, sleep, log, ADMIN_HEADERS } from "../support/stack.js";
import { turnContext, functionResponses } from "../support/prompt.js";

let s;
before(async () => {
  s = await startStack({
    vars: {
      BOT_USERNAME: "edge_bot",
      RETRY_BASE_MS: "300",
      MAX_TURN_ATTEMPTS: "2",
      TURN_WATCHDOG_MS: "1500",
      JOB_GRACE_MS: "1500",
      MAX_SCHEDULES_PER_CHAT: "3",
      SCHEDULE_MIN_REPEAT_MINUTES: "1",
      WEB_SEARCH: "true",
    },
  });
});
after(async () => {
  await s?.close();
});

/** Asks the bot (through the model) to schedule `args`; returns the stored schedule row. */
async function schedule(uid, args, reply = "Okay, I'll remind you.") {
  s.gemini.script(uid, [{ calls: [{ name: "schedule_message", args }] }, { text: reply }]);
  const before = s.tg.sent(uid).length;
  await s.webhook(privateText(uid, `please remind me: ${args.text}`));
  await s.tg.waitFor(() => s.tg.sent(uid).length === before + 1, 15_000, "the confirmation");
  const rows = await s.sql("SELECT * FROM schedules WHERE chat_id = ? ORDER BY id DESC LIMIT 1", uid);
  assert.equal(rows.length, 1, `the schedule is stored (the model read ${JSON.stringify(functionResponses(s.gemini.calls(uid).at(-1).body))})`);
  return rows[0];
}

test("'in a few seconds' fires once, with the text in a scheduled situation, and the model confirmed the run", async () => {
  const uid = uniqueId();
  let seen = null;
  const row = await schedule(uid, { text: "drink some water", in_minutes: 0.05 });
  // What the model read back from schedule_message: the id and the next run, to confirm.
  const confirm = s.gemini.calls(uid).at(-1).body;
  const [created] = functionResponses(confirm);
  assert.equal(created.ok, true);
  assert.equal(created.id, row.id);
  assert.match(created.next_run, /\d{4}-\d\d-\d\d \d\d:\d\d \(UTC\)/);
  s.gemini.script(uid, [
    (body) => {
      seen = body;
      return { text: "Time to drink some water! 💧" };
    },
  ]);
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 15_000, "the reminder");
  await sleep(2500);
  assert.deepEqual(s.tg.sent(uid), ["Okay, I'll remind you.", "Time to drink some water! 💧"], "fired exactly once");
  const system = turnContext(seen);
  assert.match(system, /This turn is a scheduled follow-up that you set earlier \(schedule #\d+/);
  assert.ok(system.includes('"drink some water"'), "the scheduled text is quoted in the situation");
  assert.match(JSON.stringify(seen.contents.at(-1)), /scheduled follow-up #\d+ due .* set by user_id=/);
  const [after] = await s.sql("SELECT status, runs, next_run_ms, last_turn_id FROM schedules WHERE id = ?", row.id);
  assert.equal(after.status, "done");
  assert.equal(after.runs, 1);
  assert.equal(after.next_run_ms, null);
  const [turn] = await s.sql("SELECT trigger, status FROM turns WHERE turn_id = ?", after.last_turn_id);
  assert.deepEqual(turn, { trigger: "schedule", status: "done" });
  assert.equal(await s.nextWake(uid, (at) => at === null), null, "nothing left to wake for");
});

test("a message of the person while a reminder fires still gets its own answer", async () => {
  const uid = uniqueId();
  const row = await schedule(uid, { text: "stretch", in_minutes: 0.05 });
  s.gemini.script(uid, [{ text: "Time to stretch!", delayMs: 1500 }]);
  await s.gemini.waitFor(() => s.gemini.calls(uid).length === 3, 10_000, "the scheduled call");
  await s.webhook(privateText(uid, "what's 2+2?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 3, 15_000, "the reminder and the answer");
  await sleep(1000);
  assert.deepEqual(s.tg.sent(uid).slice(1), ["Time to stretch!", "Echo: what's 2+2?"]);
  assert.equal(s.gemini.calls(uid).length, 4, "one call for the reminder, one for the message");
  const [r] = await s.sql("SELECT runs FROM schedules WHERE id = ?", row.id);
  assert.equal(r.runs, 1);
});

test("a recurring schedule fires, re-arms for its next run and is cancelled by /cancel", async () => {
  const uid = uniqueId();
  // The first run in 3 seconds; then every whole minute (SCHEDULE_MIN_REPEAT_MINUTES is 1 here).
  const row = await schedule(uid, { text: "check the oven", in_minutes: 0.05, repeat: "* * * * *" });
  assert.equal(row.repeat, "* * * * *");
  s.gemini.script(uid, [{ text: "Oven check #1" }, { text: "Oven check #2" }]);
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 15_000, "the first run");
  await sleep(500);
  const [mid] = await s.sql("SELECT status, runs, next_run_ms FROM schedules WHERE id = ?", row.id);
  assert.equal(mid.status, "active");
  assert.equal(mid.runs, 1);
  assert.ok(mid.next_run_ms > Date.now() && mid.next_run_ms % 60_000 === 0, "the next run is the next whole minute");
  assert.equal(await s.nextWake(uid, (at) => at === mid.next_run_ms), mid.next_run_ms, "the object's alarm waits for it");
  // The second run comes from the re-armed alarm, with no message in between.
  await s.tg.waitFor(() => s.tg.sent(uid).length === 3, 75_000, "the second run");
  assert.equal(s.tg.sent(uid)[2], "Oven check #2");
  // /reminders lists it, /cancel ends it.
  await s.webhook(privateText(uid, "/reminders"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 4, 10_000, "the list");
  assert.match(s.tg.sent(uid)[3], new RegExp(`#${row.id} · .*\\(UTC\\), cron "\\* \\* \\* \\* \\*"\\ncheck the oven`));
  await s.webhook(privateText(uid, `/cancel ${row.id}`));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 5, 10_000, "the cancel reply");
  assert.equal(s.tg.sent(uid)[4], `Cancelled reminder #${row.id}.`);
  const [end] = await s.sql("SELECT status, runs, next_run_ms FROM schedules WHERE id = ?", row.id);
  assert.deepEqual(end, { status: "cancelled", runs: 2, next_run_ms: null });
  assert.equal(await s.nextWake(uid, (at) => at === null), null, "nothing to wake for once it is cancelled");
});

test("a runtime restart between the due time and the send gives exactly one message", async () => {
  const uid = uniqueId();
  const row = await schedule(uid, { text: "feed the cat", in_minutes: 0.05 });
  s.gemini.script(uid, [{ text: "never sent", delayMs: 4000 }, { text: "Feed the cat! 🐈" }]);
  await s.gemini.waitFor(() => s.gemini.calls(uid).length === 3, 10_000, "the scheduled call");
  await s.restart(); // the instance running the scheduled turn dies; storage stays
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 20_000, "the reminder after the restart");
  await sleep(5000);
  assert.deepEqual(s.tg.sent(uid).slice(1), ["Feed the cat! 🐈"], "exactly one message");
  const [r] = await s.sql("SELECT status, runs FROM schedules WHERE id = ?", row.id);
  assert.deepEqual(r, { status: "done", runs: 1 });
  const turns = await s.sql("SELECT attempts FROM turns WHERE chat_id = ? AND trigger = 'schedule'", uid);
  assert.equal(turns.length, 1, "one turn, taken over");
  assert.ok(turns[0].attempts >= 2);
});

test("the model failing after its retries sends the scheduled text itself", async () => {
  const uid = uniqueId();
  await schedule(uid, { text: "call *mum* at 5", in_minutes: 0.05 });
  s.gemini.script(uid, [{ status: 503 }, { status: 503 }, { status: 503 }]);
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 20_000, "the fallback");
  await sleep(2000);
  assert.deepEqual(s.tg.sent(uid).slice(1), ["⏰ call *mum* at 5"], "the literal text, not an apology");
});

test("a lost alarm is recovered by the cron; a run too late is skipped, not caught up", async () => {
  const uid = uniqueId();
  await s.webhook(privateText(uid, "hello"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the first answer");
  const now = Date.now();
  // Written behind the object's back: no alarm knows of them.
  await s.sql(
    "INSERT INTO schedules (chat_id, conv, creator_user_id, text, timezone, repeat, next_run_ms, created_at, updated_at) VALUES (?, ?, ?, ?, 'UTC', NULL, ?, ?, ?)",
    uid, String(uid), uid, "water the plants", now - 90_000, now, now,
  );
  await s.sql(
    "INSERT INTO schedules (chat_id, conv, creator_user_id, text, timezone, repeat, next_run_ms, created_at, updated_at) VALUES (?, ?, ?, ?, 'UTC', '0 9 * * *', ?, ?, ?)",
    uid, String(uid), uid, "daily standup", now - 3 * 86_400_000, now, now,
  );
  s.gemini.script(uid, [{ text: "Time to water the plants 🌱" }]);
  await sleep(1500);
  assert.equal(s.tg.sent(uid).length, 1, "nothing fires without an alarm");
  await s.scheduled();
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 15_000, "the recovered reminder");
  await sleep(2500);
  assert.deepEqual(s.tg.sent(uid).slice(1), ["Time to water the plants 🌱"], "one message; the 3-day-old run is skipped");
  const rows = await s.sql("SELECT text, status, runs, next_run_ms FROM schedules WHERE chat_id = ? ORDER BY id", uid);
  assert.deepEqual(rows[0], { text: "water the plants", status: "done", runs: 1, next_run_ms: null });
  assert.equal(rows[1].status, "active");
  assert.equal(rows[1].runs, 0, "skipped, not run");
  assert.ok(rows[1].next_run_ms > Date.now(), "its next run is after now");
  assert.equal(new Date(rows[1].next_run_ms).toISOString().slice(11, 16), "09:00");
});

test("a turn retried after its model call failed creates its schedule once", async () => {
  const uid = uniqueId();
  const call = { calls: [{ name: "schedule_message", args: { text: "renew the passport", in_minutes: 600 } }] };
  // The first attempt stores the schedule, then its second model call fails; the retried turn
  // asks again from the start.
  s.gemini.script(uid, [call, { status: 503 }, call, { text: "Noted, I'll remind you." }]);
  await s.webhook(privateText(uid, "remind me to renew my passport tonight"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 20_000, "the confirmation");
  const rows = await s.sql("SELECT id FROM schedules WHERE chat_id = ?", uid);
  assert.equal(rows.length, 1, "one schedule, not two");
  const [again] = functionResponses(s.gemini.calls(uid)[3].body);
  assert.equal(again.id, rows[0].id, "the retry is told the schedule it already has");
  const [{ next_run_ms: due }] = await s.sql("SELECT next_run_ms FROM schedules WHERE id = ?", rows[0].id);
  assert.equal(await s.nextWake(uid, (at) => at === due), due, "the object wakes for the one reminder");
});

test("limits and bad input give the model clear function errors", async () => {
  const uid = uniqueId();
  const calls = [
    { name: "schedule_message", args: { text: "one", in_minutes: 60 } },
    { name: "schedule_message", args: { text: "two", in_minutes: 60, repeat: "every blue moon" } },
    { name: "schedule_message", args: { text: "three", at: "2020-01-01T10:00:00Z" } },
    { name: "schedule_message", args: { text: "four", in_minutes: 60, timezone: "Mars/Olympus" } },
    { name: "schedule_message", args: { text: "five", in_minutes: 30, repeat: "weekdays" } },
    { name: "schedule_message", args: { text: "six", in_minutes: 61 } },
    { name: "schedule_message", args: { text: "seven", in_minutes: 62 } },
    { name: "cancel_schedule", args: { id: 999999 } },
  ];
  s.gemini.script(uid, [{ calls }, { text: "Some of those worked." }]);
  await s.webhook(privateText(uid, "set up my reminders"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 15_000, "the answer");
  const responses = functionResponses(s.gemini.calls(uid)[1].body);
  log(`function responses: ${JSON.stringify(responses.map((r) => r.error ?? `ok #${r.id}`))}`);
  assert.equal(responses[0].ok, true);
  assert.match(responses[1].error, /repeat must be daily, weekdays, weekly or a 5-field cron expression/);
  assert.match(responses[2].error, /in the past/);
  assert.match(responses[3].error, /unknown time zone "Mars\/Olympus"/);
  assert.equal(responses[4].ok, true);
  assert.equal(responses[5].ok, true);
  assert.match(responses[6].error, /already has 3 active schedules/);
  assert.match(responses[7].error, /no active schedule #999999/);
  const rows = await s.sql("SELECT text, repeat, next_run_ms FROM schedules WHERE chat_id = ? ORDER BY id", uid);
  assert.deepEqual(rows.map((r) => r.text), ["one", "five", "six"]);
  // "weekdays" is anchored at the first run's local time (the chat's zone: TIMEZONE, UTC).
  const first = new Date(rows[1].next_run_ms);
  assert.equal(rows[1].repeat, `${first.getUTCMinutes()} ${first.getUTCHours()} * * 1-5`);
  assert.equal(responses[4].repeat, `weekdays at ${first.toISOString().slice(11, 16)}`);
});

test("/reminders lists in the chat's zone; the admin API lists and cancels", async () => {
  const uid = uniqueId();
  const row = await schedule(uid, { text: "dentist", at: "2027-01-15 09:30", timezone: "America/New_York" });
  assert.equal(row.timezone, "America/New_York");
  assert.equal(new Date(row.next_run_ms).toISOString(), "2027-01-15T14:30:00.000Z");
  await s.webhook(privateText(uid, "/reminders"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 10_000, "the list");
  const list = s.tg.sent(uid)[1];
  assert.match(list, /times in America\/New_York/);
  assert.match(list, new RegExp(`#${row.id} · Friday, 2027-01-15 09:30 \\(EST\\)\\ndentist`));
  const r = await s.fetch(`/api/v1/schedules?chat_id=${uid}`, { headers: ADMIN_HEADERS });
  assert.equal(r.status, 200);
  const { schedules } = await r.json();
  assert.deepEqual(schedules.map((x) => [x.id, x.status, x.text]), [[row.id, "active", "dentist"]]);
  assert.equal(await s.nextWake(uid, (at) => at === row.next_run_ms), row.next_run_ms, "the object wakes for it");
  const d = await s.fetch(`/api/v1/schedules/${row.id}`, { method: "DELETE", headers: ADMIN_HEADERS });
  assert.equal(d.status, 200);
  assert.equal((await s.fetch(`/api/v1/schedules/${row.id}`, { method: "DELETE", headers: ADMIN_HEADERS })).status, 404);
  assert.equal((await s.fetch(`/api/v1/schedules?status=bogus`, { headers: ADMIN_HEADERS })).status, 400);
  assert.equal(await s.nextWake(uid, (at) => at === null), null, "the object was told");
  await s.webhook(privateText(uid, "/reminders"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 3, 10_000, "the empty list");
  assert.match(s.tg.sent(uid)[2], /No reminders are set in this chat/);
});

test("time zones are the runtime's: a daily rule across the DST gap, any case, English abbreviations; offsets refused", async () => {
  const uid = uniqueId();
  const row = await schedule(uid, { text: "water the plants", at: "2027-03-28 02:30", timezone: "europe/berlin", repeat: "daily" });
  assert.equal(row.timezone, "Europe/Berlin", "stored with the runtime's spelling");
  // 02:30 does not exist that night in Berlin: the first run is at 03:30 CEST; the rule stays 02:30.
  assert.equal(new Date(row.next_run_ms).toISOString(), "2027-03-28T01:30:00.000Z");
  assert.equal(row.repeat, "30 2 * * *");
  const confirm = s.gemini.calls(uid).at(-1).body;
  assert.equal(functionResponses(confirm)[0].next_run, "Sunday, 2027-03-28 03:30 (CEST)");
  assert.match(turnContext(s.gemini.calls(uid)[0].body), /Current time: \w+, \d{4}-\d\d-\d\d \d\d:\d\d \(UTC, UTC\+00:00\)/);
  // An offset is not a zone: the model is told so, and nothing is stored.
  s.gemini.script(uid, [{ calls: [{ name: "schedule_message", args: { text: "stretch", in_minutes: 60, timezone: "+01:00" } }] }, { text: "No." }]);
  await s.webhook(privateText(uid, "remind me to stretch in an hour"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 15_000, "the answer");
  assert.match(functionResponses(s.gemini.calls(uid).at(-1).body)[0].error, /unknown time zone "\+01:00": use an IANA name/);
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM schedules WHERE chat_id = ?", uid))[0].n, 1);
});

test("in a group, people cancel only the reminders they set", async () => {
  const chat = -uniqueId();
  const alice = uniqueId();
  const bob = uniqueId();
  s.gemini.script(alice, [{ calls: [{ name: "schedule_message", args: { text: "team sync", in_minutes: 600 } }] }, { text: "Set." }]);
  const text = "@edge_bot remind us about the sync";
  await s.webhook(groupText(chat, alice, text, { entities: mention(text, "edge_bot") }));
  await s.tg.waitFor(() => s.tg.sent(chat).length === 1, 15_000, "the confirmation");
  const [row] = await s.sql("SELECT id, creator_user_id FROM schedules WHERE chat_id = ?", chat);
  assert.equal(row.creator_user_id, alice);
  // Asking the bot is no way around it: cancel_schedule acts as the person who asked.
  s.gemini.script(bob, [{ calls: [{ name: "cancel_schedule", args: { id: row.id } }] }, { text: "I can't." }]);
  const ask = `@edge_bot cancel reminder ${row.id}`;
  await s.webhook(groupText(chat, bob, ask, { entities: mention(ask, "edge_bot") }));
  await s.tg.waitFor(() => s.tg.sent(chat).length === 2, 15_000, "the answer to bob");
  assert.match(functionResponses(s.gemini.calls(bob)[1].body)[0].error, new RegExp(`no active schedule #${row.id} in this chat that the person asking set`));
  assert.equal((await s.sql("SELECT status FROM schedules WHERE id = ?", row.id))[0].status, "active");
  const command = (t) => ({ entities: [{ type: "bot_command", offset: 0, length: t.split(" ")[0].length }] });
  await s.webhook(groupText(chat, bob, `/cancel ${row.id}`, command("/cancel")));
  await s.tg.waitFor(() => s.tg.sent(chat).length === 3, 10_000, "bob's reply");
  assert.equal(s.tg.sent(chat)[2], `You have no active reminder #${row.id} in this chat.`);
  await s.webhook(groupText(chat, alice, `/cancel ${row.id}`, command("/cancel")));
  await s.tg.waitFor(() => s.tg.sent(chat).length === 4, 10_000, "alice's reply");
  assert.equal(s.tg.sent(chat)[3], `Cancelled reminder #${row.id}.`);
});

test("web search: the request carries Google Search grounding and the reply links its sources", async () => {
  const uid = uniqueId();
  let body = null;
  s.gemini.script(uid, [
    (b) => {
      body = b;
      return {
        raw: {
          candidates: [{
            content: { role: "model", parts: [{ text: "Utqiagvik is the northernmost city; today it is -20 °C." }] },
            finishReason: "STOP",
            index: 0,
            groundingMetadata: {
              webSearchQueries: ["northernmost city in the US weather"],
              groundingChunks: [
                { web: { uri: "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AbC", title: "weather.gov" } },
                { web: { uri: "https://vertexaisearch.cloud.google.com/grounding-api-redirect/XyZ", title: "Wikipedia <Utqiagvik>" } },
              ],
            },
          }],
          usageMetadata: { promptTokenCount: 1200, candidatesTokenCount: 30, totalTokenCount: 1230 },
          modelVersion: "gemini-3.8-flash",
        },
      };
    },
  ]);
  await s.webhook(privateText(uid, "what is the weather in the northernmost US city?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 15_000, "the answer");
  assert.deepEqual(body.tools[0].googleSearch, {});
  assert.ok(body.tools[0].functionDeclarations.some((d) => d.name === "schedule_message"), "alongside the functions");
  assert.equal(body.toolConfig.includeServerSideToolInvocations, true);
  const [call] = s.tg.calls("sendMessage", uid);
  assert.equal(call.text, "Utqiagvik is the northernmost city; today it is -20 °C.\n\nSources: weather.gov · Wikipedia <Utqiagvik>");
  assert.match(call.body.text, /<a href="https:\/\/vertexaisearch\.cloud\.google\.com\/grounding-api-redirect\/AbC">weather\.gov<\/a>/);
  assert.match(call.body.text, /Wikipedia &lt;Utqiagvik&gt;<\/a>/);
  assert.equal(call.body.link_preview_options?.is_disabled, true, "no preview for links no person posted");
  const [cost] = await s.sql("SELECT prompt_tokens, candidates_tokens, search_queries FROM calls WHERE chat_id = ?", uid);
  assert.deepEqual(cost, { prompt_tokens: 1200, candidates_tokens: 30, search_queries: 1 }, "the grounded call's usage is recorded like any call, and its search");
  const costs = await (await s.fetch("/api/v1/costs?period=today", { headers: ADMIN_HEADERS })).json();
  const row = costs.rows.find((r) => r.chat_id === uid);
  assert.equal(row.search_queries, 1);
  await s.webhook(privateText(uid, "/usage"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 10_000, "/usage");
  assert.match(s.tg.sent(uid)[1], /1 web searches/);
});

test("over the chat's token budget a reminder goes out as its text, with no model call", async () => {
  const b = await startStack({ vars: { CHAT_TOKENS_PER_DAY: "500", RETRY_BASE_MS: "300" } });
  try {
    const uid = uniqueId();
    // The first turn is within the budget (nothing used yet) and uses it up.
    b.gemini.script(uid, [{ calls: [{ name: "schedule_message", args: { text: "take the *pills*", in_minutes: 0.05 } }] }, { text: "Will do." }]);
    await b.webhook(privateText(uid, "remind me to take my pills in a moment"));
    await b.tg.waitFor(() => b.tg.sent(uid).length === 1, 15_000, "the confirmation");
    const [used] = await b.sql("SELECT SUM(total_tokens) AS n FROM calls WHERE chat_id = ?", uid);
    assert.ok(used.n > 500, `the chat used ${used.n} tokens`);
    await b.tg.waitFor(() => b.tg.sent(uid).length === 2, 15_000, "the reminder");
    await sleep(1500);
    assert.deepEqual(b.tg.sent(uid).slice(1), ["⏰ take the *pills*"]);
    assert.equal(b.gemini.calls(uid).length, 2, "no model call for the run");
    const [row] = await b.sql("SELECT status, runs FROM schedules WHERE chat_id = ?", uid);
    assert.deepEqual(row, { status: "done", runs: 1 });
  } finally {
    await b.close();
  }
});
