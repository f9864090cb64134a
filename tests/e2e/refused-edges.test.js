// Refused senders on the newest paths (issue 47, items 4 and 8): a blocked person's ephemeral
// command gets nothing, neither privately nor in the group, and costs what any refused update
// costs (the hourly counter, then nothing); a refused stranger opening private topics causes no
// editForumTopic call.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, groupText, inTopic, uniqueId, sleep } from "../support/stack.js";

const LISTED = 7700000001; // on DM_ALLOWLIST, then blocked
const FRIEND = 7700000002; // on DM_ALLOWLIST
let s;
before(async () => {
  s = await startStack({ vars: { DM_POLICY: "allowlist", DM_ALLOWLIST: `${LISTED},${FRIEND}`, REFUSED_UPDATES_PER_HOUR: "3", METRICS_LOG: "true" } });
  s.tg.setPrivateTopics({ enabled: true });
});
after(async () => {
  await s?.close();
});

function ephemeralCommand(chat, uid, text) {
  const eid = s.tg.ephemeralMessage(chat, uid, {});
  const u = groupText(chat, uid, text, { message_id: 0, entities: [{ type: "bot_command", offset: 0, length: text.split(" ")[0].length }] });
  u.message.ephemeral_message_id = eid;
  return u;
}

test("a blocked person's ephemeral command is not answered, privately or in the group, and past the cap writes nothing", async () => {
  const chat = -1000000000000 - uniqueId();
  // Someone on the list is answered privately, as before.
  await s.webhook(ephemeralCommand(chat, FRIEND, "/usage"));
  await s.tg.waitFor(() => s.tg.calls("sendMessage", chat).some((r) => r.ephemeral !== undefined), 10_000, "the friend's ephemeral answer");
  const answered = s.tg.calls("sendMessage", chat).length;

  assert.equal((await s.api("PUT", `users/${LISTED}/access`, { access: "blocked" })).status, 200);
  for (let i = 0; i < 3; i++) assert.equal((await s.webhook(ephemeralCommand(chat, LISTED, "/usage"))).status, 200);
  await sleep(800);
  assert.equal(s.tg.calls("sendMessage", chat).length, answered, "nothing to the blocked person, nothing to the group");
  // Past the hourly cap (3): the counter stops and nothing else is written (a budget test).
  const from = s.logs().length;
  for (let i = 0; i < 8; i++) await s.webhook(ephemeralCommand(chat, LISTED, i % 2 ? "/memory" : "/usage"));
  await sleep(300);
  const hooks = s.metricsSince(from).filter((l) => l.kind === "fetch /telegram/webhook");
  assert.equal(hooks.length, 8);
  const written = hooks.reduce((n, l) => n + l.rows_written, 0);
  assert.ok(written <= 1, `8 refused ephemeral commands wrote ${written} rows`);
  assert.equal(s.tg.calls("sendMessage", chat).length, answered);
});

test("a refused stranger's new private topic is not named: no editForumTopic call", async () => {
  const uid = uniqueId();
  for (let i = 0; i < 3; i++) {
    const t = s.tg.privateTopic(uid);
    assert.equal((await s.webhook(inTopic(uid, t, `Plan a trip number ${i}`))).status, 200);
  }
  await sleep(800);
  assert.equal(s.tg.calls("editForumTopic", uid).length, 0);
  // An admitted person's topic is still named from its first message.
  const t = s.tg.privateTopic(FRIEND);
  await s.webhook(inTopic(FRIEND, t, "Plan a trip to Porto please"));
  await s.tg.waitFor(() => s.tg.calls("editForumTopic", FRIEND).length === 1, 10_000, "the friend's topic named");
});
