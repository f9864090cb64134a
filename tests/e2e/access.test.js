// Who may talk to the bot: pairing, operator approval, blocked users, group allowlists.
// Every refusal is recorded and none costs a model call.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, groupText, mention, uniqueId, sleep, cmd } from "../support/stack.js";

const ADMIN = 4242;
const ALLOWED_GROUP = -1009990001;
let s;
before(async () => {
  s = await startStack({ vars: { DM_POLICY: "pairing", ADMIN_USER_IDS: String(ADMIN), GROUP_ALLOWLIST: String(ALLOWED_GROUP) } });
});
after(async () => {
  await s?.close();
});

test("pairing: an unknown user gets a code, an operator approves it, then the user is answered", async () => {
  const uid = uniqueId();
  await s.webhook(privateText(uid, "hi, can we talk?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the pairing message");
  const code = /pairing code is ([A-Z0-9]{8})/.exec(s.tg.sent(uid)[0])?.[1];
  assert.ok(code, s.tg.sent(uid)[0]);
  await s.webhook(privateText(uid, "hello?"));
  await sleep(800);
  assert.equal(s.gemini.calls(uid).length, 0, "no model call before approval");
  assert.equal(s.tg.sent(uid).length, 1, "no second notice within ten minutes");
  const refusals = await s.sql("SELECT reason FROM refusals WHERE user_id = ?", uid);
  assert.deepEqual(refusals.map((r) => r.reason), ["awaiting_approval", "awaiting_approval"]);

  // Someone who is not an operator cannot approve (under pairing, a stranger gets a code).
  await s.webhook(cmd(ADMIN + 1, `/approve ${code}`));
  await s.tg.waitFor(() => s.tg.sent(ADMIN + 1).length === 1, 10_000, "the stranger's answer");
  assert.match(s.tg.sent(ADMIN + 1)[0], /pairing code is/);
  assert.equal((await s.sql("SELECT approved_at FROM pairings WHERE code = ?", code))[0].approved_at, null);

  await s.webhook(cmd(ADMIN, `/approve ${code.toLowerCase()}`));
  await s.tg.waitFor(() => s.tg.sent(ADMIN).some((t) => /Approved/.test(t)), 10_000, "the operator's confirmation");
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 10_000, "the welcome");
  assert.match(s.tg.sent(uid)[1], /approved/i);
  await s.webhook(privateText(uid, "now can we talk?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 3, 10_000, "the answer");
  assert.equal(s.tg.sent(uid)[2], "Echo: now can we talk?");
  // An approved code cannot be used twice.
  await s.webhook(cmd(ADMIN, `/approve ${code}`));
  await s.tg.waitFor(() => s.tg.sent(ADMIN).some((t) => /unknown, expired or already used/.test(t)), 10_000, "the refusal");
});

test("a blocked user gets no model call, in private or in groups", async () => {
  const uid = uniqueId();
  await s.env.DB.prepare("INSERT INTO users (user_id, name, access, updated_at) VALUES (?, 'B', 'blocked', 0)").bind(uid).run();
  await s.webhook(privateText(uid, "hello"));
  const t = "@edge_test_bot hey";
  await s.webhook(groupText(ALLOWED_GROUP, uid, t, { entities: mention(t, "edge_test_bot") }));
  await sleep(1200);
  assert.equal(s.gemini.calls(uid).length, 0);
  assert.equal(s.tg.sent(uid).length, 0);
  assert.equal(s.tg.sent(ALLOWED_GROUP).length, 0);
  const refusals = await s.sql("SELECT reason FROM refusals WHERE user_id = ? ORDER BY id", uid);
  assert.deepEqual(refusals.map((r) => r.reason), ["blocked", "blocked"]);
});

test("groups outside the allowlist are not answered; allowed ones are", async () => {
  const uid = uniqueId();
  const other = -1009990002;
  const t = "@edge_test_bot hello";
  await s.webhook(groupText(other, uid, t, { entities: mention(t, "edge_test_bot") }));
  await sleep(1000);
  assert.equal(s.gemini.calls(uid).length, 0);
  assert.equal((await s.sql("SELECT reason FROM refusals WHERE chat_id = ?", other))[0].reason, "group_not_allowed");
  const uid2 = uniqueId();
  await s.webhook(groupText(ALLOWED_GROUP, uid2, t, { entities: mention(t, "edge_test_bot") }));
  await s.tg.waitFor(() => s.gemini.calls(uid2).length === 1, 10_000, "the allowed group's model call");
});
