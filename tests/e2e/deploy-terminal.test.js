// npm run deploy on a terminal (tests/support/deploy.js runs it under a pseudo-terminal
// against the fakes): with nothing in the environment it asks for the bot token and the
// Gemini key, shows nothing that is typed, and deploys with them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { TOKEN, GEMINI_KEY, WORKER_URL, account, runOnTerminal, occurrences } from "../support/deploy.js";

test("on a terminal the bot token and the Gemini key are asked for, hidden, and used", async (t) => {
  const acct = await account();
  const key = GEMINI_KEY; // the key the fake Gemini accepts (deploy checks it)
  const r = await runOnTerminal(acct, "deploy.mjs", [
    { prompt: /Bot token from @BotFather/, answer: TOKEN },
    { prompt: /Gemini API key/, answer: key },
  ]);
  if (r === null) return t.skip("util-linux script is not installed");
  assert.equal(r.code, 0, r.output);
  assert.equal(r.unanswered, 0, "both questions were asked");
  assert.equal(occurrences(r.output, TOKEN), 0, "the typed token is not shown");
  assert.equal(occurrences(r.output, key), 0, "the typed key is not shown");
  const secrets = acct.cf.secrets.get("edge-agent");
  assert.equal(secrets.get("TELEGRAM_BOT_TOKEN"), TOKEN);
  assert.equal(secrets.get("GEMINI_API_KEY"), key);
  assert.equal(acct.tg.webhook.url, `${WORKER_URL}/telegram/webhook`);
  assert.match(r.output, /message @edge_test_bot/);
  assert.equal(acct.vars().TELEGRAM_BOT_TOKEN, TOKEN, "kept for the next run");
  assert.equal(occurrences(r.output, secrets.get("ADMIN_TOKEN")), 1, "on a terminal the admin token is shown, once");
});

test("on a terminal destroy removes nothing until the worker's name is typed", async (t) => {
  const acct = await account();
  const first = await runOnTerminal(acct, "deploy.mjs", [], { env: { TELEGRAM_BOT_TOKEN: TOKEN, GEMINI_API_KEY: GEMINI_KEY } });
  if (first === null) return t.skip("util-linux script is not installed");
  assert.equal(first.code, 0, first.output);
  const wrong = await runOnTerminal(acct, "destroy.mjs", [{ prompt: /Type the worker's name \(edge-agent\)/, answer: "yes" }]);
  assert.equal(wrong.code, 1, wrong.output);
  assert.match(wrong.output, /not confirmed; nothing was removed/);
  assert.ok(acct.cf.scripts.has("edge-agent"));
  assert.equal(acct.cf.queues.size, 2);
  assert.equal(acct.tg.webhook.url, `${WORKER_URL}/telegram/webhook`);
  const right = await runOnTerminal(acct, "destroy.mjs", [{ prompt: /Type the worker's name \(edge-agent\)/, answer: "edge-agent" }]);
  assert.equal(right.code, 0, right.output);
  assert.equal(acct.cf.scripts.size, 0);
  assert.equal(acct.cf.queues.size, 0);
  assert.equal(acct.cf.databases.size, 1, "the database stays without --delete-database");
  assert.equal(acct.tg.webhook.url, "");
});
