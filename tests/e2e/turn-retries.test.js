// A turn riding through faults: Gemini 503s and 429s retried through the queue, dead letters
// with one apology, an instance reset mid-turn, bounded subrequests, and bad input that never
// produces a 5xx or a stored row. Numbers are printed with `#` so they show in the test output.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { startStack, privateText, uniqueId, sleep, ROOT, log } from "../support/stack.js";

let s;
before(async () => {
  // A history budget that the 301-message window below fits whole (its ids are 14 digits a
  // message, a token each in the estimate): the window shrinks by attempt, not by budget.
  s = await startStack({ vars: { RETRY_BASE_MS: "300", MAX_TURN_ATTEMPTS: "4", HISTORY_TOKEN_BUDGET: "40000" } });
});
after(async () => {
  await s?.close();
});

test("Gemini fails 503 for the first 3 attempts, then answers: exactly one reply", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ status: 503 }, { status: 503 }, { status: 503 }, { text: "Finally!" }]);
  const t0 = Date.now();
  await s.webhook(privateText(uid, "are you there?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 30_000, "the reply");
  log(`503 ×3 then success: reply after ${Date.now() - t0} ms`);
  await sleep(1500);
  assert.deepEqual(s.tg.sent(uid), ["Finally!"]);
  const calls = await s.sql("SELECT status FROM calls WHERE chat_id = ? ORDER BY created_at, n", uid);
  assert.deepEqual(calls.map((c) => c.status), [503, 503, 503, 200]);
  const [turn] = await s.sql("SELECT status, attempts FROM turns WHERE chat_id = ?", uid);
  assert.equal(turn.attempts, 4);
  assert.equal(turn.status, "done");
});

test("Gemini 429 with a retry delay: the retry waits at least that long", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ status: 429, retryDelay: 3 }, { text: "after the wait" }]);
  await s.webhook(privateText(uid, "hello"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 30_000, "the reply");
  const [first, second] = s.gemini.calls(uid);
  const waited = second.at - first.at;
  log(`429 retryDelay 3s: retried after ${waited} ms`);
  assert.ok(waited >= 3000, `retried after ${waited} ms`);
});

test("Gemini failing every time: after the last attempt exactly one apology and one dead letter", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, Array.from({ length: 4 }, () => ({ status: 503 })));
  const t0 = Date.now();
  await s.webhook(privateText(uid, "anyone?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 40_000, "the apology");
  log(`always 503: apology after ${Date.now() - t0} ms`);
  await sleep(3000);
  assert.equal(s.tg.sent(uid).length, 1);
  assert.match(s.tg.sent(uid)[0], /technical problem/);
  assert.equal(s.gemini.calls(uid).length, 4, "MAX_TURN_ATTEMPTS=4");
  const dead = await s.sql("SELECT job_key, detail FROM failures WHERE kind = 'dead_letter' AND conv = ?", String(uid));
  assert.equal(dead.length, 1);
  assert.match(dead[0].job_key, /^turn:/);
  const [turn] = await s.sql("SELECT status FROM turns WHERE chat_id = ?", uid);
  assert.equal(turn.status, "dead");
  // The chat works again afterwards.
  await s.webhook(privateText(uid, "and now?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 10_000, "a normal reply");
  assert.equal(s.tg.sent(uid)[1], "Echo: and now?");
});

test("a 400 from Gemini is not retried: one call, the user is told", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ status: 400, message: "Request contains an invalid argument." }]);
  await s.webhook(privateText(uid, "hi"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the apology");
  await sleep(2000);
  assert.equal(s.gemini.calls(uid).length, 1);
  assert.match(s.tg.sent(uid)[0], /technical problem/);
});

test("an instance reset in the middle of a turn leaves the chat able to answer", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "too late", delayMs: 4000 }]);
  await s.webhook(privateText(uid, "first question"));
  await s.gemini.waitFor(() => s.gemini.calls(uid).length === 1, 10_000, "the slow model call");
  await s.restart(); // the instance running the turn dies; storage stays
  await s.webhook(privateText(uid, "second question"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 15_000, "a reply after the reset");
  await sleep(5000);
  assert.equal(s.tg.sent(uid).length, 1, "exactly one reply");
  assert.match(s.tg.sent(uid)[0], /second question/);
  const retry = s.gemini.calls(uid)[1];
  const text = retry.body.contents.flatMap((c) => c.parts).map((p) => p.text ?? "").join("\n");
  assert.match(text, /first question/);
  assert.match(text, /second question/);
});

test("subrequests stay bounded: the webhook costs a handful, a turn a dozen or so", async () => {
  const counts = [];
  const uid = uniqueId();
  for (let i = 0; i < 5; i++) {
    const r = await s.webhook(privateText(uid, `msg ${i}`));
    counts.push(Number(r.headers.get("x-subrequests")));
  }
  await s.tg.waitFor(() => s.tg.sent(uid).length >= 1, 10_000, "the reply");
  await sleep(500);
  const turns = await s.sql("SELECT subrequests FROM turns WHERE chat_id = ?", uid);
  log(`webhook subrequests per update: ${counts.join(", ")}; turn subrequests: ${turns.map((t) => t.subrequests).join(", ")}`);
  assert.ok(counts.every((c) => c <= 3), `webhook: ${counts}`);
  assert.ok(turns.every((t) => t.subrequests <= 20), "a turn stays far below the 50-subrequest limit");
});

function mutate(text, rnd) {
  const r = rnd();
  const i = Math.floor(rnd() * text.length);
  if (r < 0.25) return text.slice(0, i); // truncated
  if (r < 0.5) return text.slice(0, i) + String.fromCharCode(Math.floor(rnd() * 128)) + text.slice(i + 1); // a flipped char
  if (r < 0.7) return text.replace(/"chat":\s*\{/, '"chat": "oops", "x": {'); // a wrong type
  if (r < 0.85) return text.replace(/"update_id":\s*\d+/, '"update_id": "nan"');
  return Array.from({ length: 1 + Math.floor(rnd() * 200) }, () => String.fromCharCode(Math.floor(rnd() * 256))).join("");
}

function isValidUpdate(text) {
  try {
    const v = JSON.parse(text);
    return v && typeof v === "object" && !Array.isArray(v) && Number.isInteger(v.update_id);
  } catch {
    return false;
  }
}

test("a sample of mutated and random webhook bodies never gives a 5xx, and invalid ones store nothing", async () => {
  const dir = path.join(ROOT, "tests/fixtures/telegram");
  const fixtures = fs.readdirSync(dir).filter((f) => f.endsWith(".json")).map((f) => fs.readFileSync(path.join(dir, f), "utf8"));
  let seed = 42;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const bodies = Array.from({ length: 300 }, () => mutate(fixtures[Math.floor(rnd() * fixtures.length)], rnd));
  const invalid = bodies.filter((b) => !isValidUpdate(b));
  const before = (await s.sql("SELECT COUNT(*) AS n FROM updates"))[0].n;
  const statuses = new Map();
  for (const body of invalid) {
    const r = await s.webhook(null, { raw: body });
    statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
  }
  log(`${invalid.length} invalid bodies: statuses ${JSON.stringify(Object.fromEntries(statuses))}`);
  assert.deepEqual([...statuses.keys()], [200]);
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM updates"))[0].n, before, "no row for invalid input");
  const valid = bodies.filter(isValidUpdate);
  for (const body of valid) {
    const r = await s.webhook(null, { raw: body });
    assert.ok(r.status < 500, `5xx for ${body.slice(0, 80)}`);
  }
  log(`${valid.length} mutated-but-valid bodies: no 5xx`);
});

test("a turn that failed twice over a long history goes on with a smaller window, and answers once", async () => {
  const uid = uniqueId();
  const conv = String(uid);
  const now = Math.floor(Date.now() / 1000);
  const stmts = [];
  for (let i = 0; i < 300; i++) {
    const text = `m${i}`;
    stmts.push(s.env.DB.prepare(
      `INSERT INTO messages (conv, chat_id, message_id, role, user_id, name, is_bot, parts, text, date)
       VALUES (?, ?, ?, 'user', ?, 'Long Talker', 0, ?, ?, ?)`,
    ).bind(conv, uid, 700000 + i, uid, JSON.stringify([{ type: "text", text }]), text, now - (300 - i) * 5));
  }
  await s.env.DB.batch(stmts);
  s.gemini.script(uid, [{ status: 503 }, { status: 503 }, { text: "here now" }]);
  await s.webhook(privateText(uid, "still there?", { name: "Long Talker" }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 30_000, "the reply");
  const metas = (req) => req.body.contents.flatMap((c) => c.parts).filter((p) => /^\[meta\] message_id=/.test(p.text ?? "")).length;
  const shown = s.gemini.calls(uid).map(metas);
  log(`messages shown per attempt: ${shown.join(", ")}`);
  assert.deepEqual(shown.slice(0, 2), [301, 301], "the first two attempts show the whole window");
  assert.ok(shown[2] <= 200 && shown[2] > 50, `the third attempt shows at most 200 rows: ${shown[2]}`);
  assert.match(s.gemini.calls(uid)[2].body.contents.at(-1).parts.at(-2).text, /still there\?/, "the newest message is still in view");
  await sleep(1000);
  assert.deepEqual(s.tg.sent(uid), ["here now"]);
});
