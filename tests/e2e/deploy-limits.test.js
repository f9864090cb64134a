// npm run deploy against the Free plan's limits and a workers.dev name that is not reachable
// yet (tests/support/deploy.js; the fake Cloudflare refuses as the real API does): each run
// that stops says what to do, and the rerun after doing it finishes the job.
import { test } from "node:test";
import assert from "node:assert/strict";
import { account, deploy, firstDeployEnv } from "../support/deploy.js";

test("a worker over the plan's size limit (10027): the deploy names the limit and the way out; a rerun within the limit finishes", async () => {
  const acct = await account({ cloudflare: { scriptSizeLimit: 50_000 } });
  const r = await deploy(acct, firstDeployEnv);
  assert.equal(r.code, 1, r.all);
  assert.match(r.stderr, /larger than your plan allows \(the Free plan takes 3 MB compressed, Workers Paid 10 MB\)/);
  assert.match(r.stderr, /exceeded the size limit of 3 MiB/, "Cloudflare's own words are shown");
  assert.equal(acct.cf.scripts.size, 0);
  acct.cf.setScriptSizeLimit(3 * 1024 * 1024);
  const again = await deploy(acct, {});
  assert.equal(again.code, 0, again.all);
  assert.equal(acct.cf.scripts.get("edge-agent").uploads.length, 1);
});

test("an account at its cron trigger limit (10072): the deploy says which limit and what to remove; after removing one, a rerun adds the bot's trigger", async () => {
  const acct = await account();
  acct.cf.addForeignScript("other-project", { crons: ["0 * * * *", "5 * * * *", "10 * * * *", "15 * * * *", "20 * * * *"] });
  const r = await deploy(acct, firstDeployEnv);
  assert.equal(r.code, 1, r.all);
  assert.match(r.stderr, /limit of cron triggers, which all its workers share \(Free plan: 5\)/);
  assert.match(r.stderr, /reached the Workers Free limit of 5 cron triggers/);
  assert.equal(acct.cf.schedules.get("edge-agent"), undefined);
  assert.equal(acct.tg.calls("setWebhook").length, 0);
  acct.cf.removeCrons("other-project");
  const again = await deploy(acct, {});
  assert.equal(again.code, 0, again.all);
  assert.deepEqual(acct.cf.schedules.get("edge-agent"), [{ cron: "*/30 * * * *" }]);
  assert.match(again.stdout, /Webhook: +set/);
});

test("a new workers.dev name that does not answer yet: the deploy says to run it again in a minute, and the rerun registers the webhook", async () => {
  const acct = await account();
  acct.cf.setWorkerReachable(false);
  const r = await deploy(acct, firstDeployEnv);
  assert.equal(r.code, 1, r.all);
  assert.match(r.stderr, /does not answer yet .*run npm run deploy again in a minute \(only the webhook is left to do\)/);
  assert.doesNotMatch(r.stderr, /Is it deployed/);
  assert.equal(acct.tg.calls("setWebhook").length, 0);
  acct.cf.setWorkerReachable(true);
  const again = await deploy(acct, {});
  assert.equal(again.code, 0, again.all);
  assert.match(again.stdout, /Webhook: +set/);
});
