// A deploy applies the migrations before it uploads the new worker, and can stop between the two
// (migrations/README.md): the previous release then runs on the new schema, and the new release
// reads what the previous one wrote. Both are run here for real: the previous release's worker
// (the commit before the newest migration, built by scripts/bundle-previous.sh as the benchmarks
// build their "before") on today's schema, then today's worker deployed over the same storage.
// Migrations 0037 and 0038 moved a turn's model calls into the turn's row, a person's charges
// into their own row, consolidation's model calls into the conversation's row and a message
// chunk's send record into the bot's message; 0041 moves the bot's text answer out of
// `messages` into a row of its conversation's answers. What users and operators rely on (an
// answer sent once, every call priced, a person's budget, the history a turn and a memory
// consolidation read) must hold across the deploy, whichever release wrote what (each form is
// counted below, whichever the previous release writes). The previous release's Business
// suggestion is sent by today's release, and today's digest reads the business chat the
// previous release kept.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { startStack, privateText, cmd, uniqueId, sleep, ROOT } from "../support/stack.js";
import { requestText } from "../support/fake-gemini.js";

const PREVIOUS = path.join(ROOT, ".tmp/bundle-previous");
const TODAY = process.env.TEST_BUNDLE ?? "./.tmp/bundle";

let s;
before(async () => {
  assert.ok(existsSync(path.join(PREVIOUS, ".rev")), "the previous release's bundle is built (bash scripts/bundle-previous.sh; npm test builds it)");
  s = await startStack({ bundle: PREVIOUS, vars: { USER_TURNS_PER_HOUR: "5" } });
});
after(async () => {
  await s?.close();
});

async function answered(uid, text) {
  const before = s.finalSent(uid).length;
  const r = await s.webhook(privateText(uid, text));
  assert.equal(r.status, 200);
  await s.tg.waitFor(() => s.finalSent(uid).length > before, 30_000, `the answer to "${text}"`);
  await sleep(500);
}

/** Where the person and their chat stand, and the chat's priced calls, as the costs API says. */
async function standing(uid) {
  const r = await s.api("GET", `costs?period=today&chat_id=${uid}&user_id=${uid}`);
  assert.equal(r.status, 200, JSON.stringify(r.json));
  const calls = r.json.rows.filter((i) => i.chat_id === uid).reduce((n, i) => n + i.calls, 0);
  return { turns: r.json.budgets.user_turns_last_hour, tokens: r.json.budgets.chat_tokens_today, calls };
}

/** The chat's consolidation calls, each form apart: `model_calls` (the previous release), the
 *  conversation's row (today's). */
async function consolidationForms(uid) {
  const [f] = await s.sql(
    `SELECT (SELECT COUNT(*) FROM model_calls WHERE chat_id = ? AND purpose = 'consolidate') AS old,
            (SELECT COUNT(*) FROM conversations c, json_each(c.calls) WHERE c.conv = ?) AS new`,
    uid,
    String(uid),
  );
  return { ...f };
}

test("the previous release answers on today's schema, and today's release counts what it wrote", async () => {
  const rev = readFileSync(path.join(PREVIOUS, ".rev"), "utf8").trim();
  console.log(`previous release: ${rev}`);
  const uid = uniqueId();
  // The previous release, on the new schema: two questions, each answered once, then the cron's
  // consolidation of them.
  await answered(uid, "first, under the previous release");
  await answered(uid, "second, under the previous release");
  await s.consolidate();
  const old = await standing(uid);
  assert.equal(old.turns, 2, "the previous release charged both messages");
  assert.equal(old.calls, 3, "and priced both turns' model calls and the consolidation's");
  assert.ok(old.tokens > 0);
  const oldForms = await consolidationForms(uid);
  assert.equal(oldForms.old + oldForms.new, 1, "the previous release's consolidation call is on record, in its form");
  // Telegram Business under the previous release: a contact's message kept, its suggestion
  // shown.
  const owner = uniqueId();
  const bc = `bc-overlap-${owner}`;
  const suggestions = () => s.tg.calls("sendMessage", owner).filter((r) => r.body.reply_markup?.inline_keyboard);
  assert.equal((await s.webhook(s.tg.connectBusiness(owner, { id: bc, name: "Ada" }))).status, 200);
  const contact = uniqueId();
  s.gemini.script(contact, [{ text: "We open at 9." }]);
  assert.equal((await s.webhook(s.tg.businessMessage(bc, contact, "When do you open?", { name: "Bea" }))).status, 200);
  await s.tg.waitFor(() => suggestions().length === 1, 30_000, "the previous release's suggestion");

  // Today's release over the same storage: its answer, its charge, its calls are added to the
  // previous release's, not counted instead of them.
  await s.deploy(TODAY);
  await answered(uid, "third, under today's release");
  await s.consolidate();
  const now = await standing(uid);
  assert.equal(now.turns, 3, "the person's hour counts all three charges");
  assert.equal(now.calls, 5, "the chat's calls: three turns' and two consolidations', one of them in each form");
  const forms = await consolidationForms(uid);
  assert.equal(forms.old + forms.new, 2, "both consolidations are on record");
  assert.equal(forms.new, oldForms.new + 1, "today's in the conversation's row");
  // Today's release sends the previous release's suggestion, and its digest reads the
  // business chat the previous release kept.
  await sleep(500);
  const shown = suggestions()[0];
  const send = shown.body.reply_markup.inline_keyboard.flat().find((b) => b.text === "Send").callback_data;
  assert.equal((await s.webhook(s.tg.pressButton(owner, shown.message_id, owner, send))).status, 200);
  const toContact = () => s.tg.calls("sendMessage", contact).filter((r) => r.body.business_connection_id === bc && r.text);
  await s.tg.waitFor(() => toContact().length === 1, 15_000, "the previous release's suggestion sent by today's");
  assert.equal(toContact()[0].text, "We open at 9.");
  s.gemini.script(owner, [{ text: "Bea asked when you open; you said 9." }]);
  assert.equal((await s.webhook(cmd(owner, "/business digest"))).status, 200);
  await s.tg.waitFor(() => s.tg.sent(owner).some((t) => t.startsWith("One business chat since your last digest:")), 30_000, "today's digest");
  const digest = s.gemini.calls(owner).map((r) => requestText(r.body)).find((t) => /the digest is for/.test(t));
  assert.match(digest, /the contact: "When do you open\?"\nthe bot for the owner: "We open at 9\."/, "the previous release's messages in today's digest");
  assert.ok(now.tokens > old.tokens, `the chat's tokens grew: ${old.tokens} → ${now.tokens}`);
  // The chat's budget counts every call of the day, in every form (today's consolidation by the
  // day's count its conversation's row keeps).
  const day = new Date();
  day.setUTCHours(0, 0, 0, 0);
  const [all] = await s.sql("SELECT SUM(total_tokens) AS t FROM calls WHERE chat_id = ? AND created_at >= ?", uid, day.getTime());
  const [conv] = await s.sql("SELECT call_tokens FROM conversations WHERE conv = ?", String(uid));
  assert.ok(conv.call_tokens > 0, "today's consolidation used tokens");
  assert.equal(now.tokens, all.t, "the chat's tokens today are its calls' in every form");
  const texts = s.finalSent(uid).map((r) => r.text);
  assert.equal(texts.length, 3, "one answer per question, none twice");
  const [row] = await s.sql("SELECT COUNT(*) AS n FROM calls WHERE chat_id = ?", uid);
  assert.equal(row.n, 5, "the operator's audit view lists all five calls");
  // Each answer's send is on record (a bot message under 0037's or 0038's key, whichever the
  // previous release wrote; today's a row of the conversation's answers); the audit view lists
  // the three.
  const [sends] = await s.sql(
    "SELECT (SELECT COUNT(*) FROM messages WHERE chat_id = ? AND role = 'bot' AND (send_key IS NOT NULL OR chunk_key IS NOT NULL)) AS old, (SELECT COUNT(*) FROM answers WHERE chat_id = ?) AS new, (SELECT COUNT(*) FROM sends WHERE chat_id = ? AND status = 'sent') AS listed",
    uid,
    uid,
    uid,
  );
  assert.deepEqual({ ...sends }, { old: 2, new: 1, listed: 3 }, "the previous release's two answers as messages, today's as an answer; the audit view lists the three");
  const consolidations = () => s.gemini.requests.filter((r) => r.body?.generationConfig?.responseMimeType === "application/json").map((r) => requestText(r.body));
  assert.match(consolidations().at(-1), /third, under today's release/, "today's consolidation read the third question");

  // The budget counts both releases' charges: two more messages reach the hourly limit of 5,
  // the next is refused with a notice and no model call.
  await answered(uid, "fourth");
  // The fourth turn's history: the three answers in both forms, each right after its question.
  const fourth = requestText(s.gemini.calls(uid).at(-1).body);
  assert.match(
    fourth,
    /first, under the previous release[\s\S]*Echo: first, under the previous release[\s\S]*second, under the previous release[\s\S]*Echo: second, under the previous release[\s\S]*third, under today's release[\s\S]*Echo: third, under today's release[\s\S]*fourth/,
    "both forms of the bot's answers in the history, in order",
  );
  await answered(uid, "fifth");
  // The next consolidation reads today's answer kept apart (it waited for a later message: an
  // answer placed after the newest message a consolidation reads belongs to the next one), and
  // no consolidation reads it twice.
  await s.consolidate();
  const withThird = consolidations().filter((t) => t.includes("Echo: third, under today's release"));
  assert.equal(withThird.length, 1, "today's answer read by exactly one consolidation");
  assert.match(withThird[0], /Echo: third, under today's release[\s\S]*fourth[\s\S]*Echo: fourth/, "in its place, with the next answer");
  const calls = s.gemini.calls(uid).length;
  await s.webhook(privateText(uid, "sixth, over the budget"));
  await s.tg.waitFor(() => s.tg.sent(uid).some((t) => /this hour/.test(t)), 15_000, "the budget notice");
  assert.equal(s.gemini.calls(uid).length, calls, "no model call over the budget");
});
