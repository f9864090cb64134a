// npm run deploy's failures after the first checks (tests/support/deploy.js runs the real
// scripts and wrangler against the fakes): a worker name taken by another worker, a failing
// migration, the account's queue limit, Telegram refusing the webhook URL. Each says what went
// wrong and what to do, exits non-zero, and leaves nothing half-done where it matters.
import { test } from "node:test";
import assert from "node:assert/strict";
import { WORKER_URL, MIGRATIONS, account, deploy, firstDeployEnv, creations, uploads, occurrences } from "../support/deploy.js";

test("a worker of that name that is not this bot: stops before creating anything and says how to deploy under another name", async () => {
  const acct = await account();
  acct.cf.addForeignScript("edge-agent");
  const r = await deploy(acct, firstDeployEnv);
  assert.equal(r.code, 1, r.all);
  assert.match(r.stderr, /a worker named "edge-agent" already exists .* not this bot.*WORKER_NAME=edge-agent-bot npm run deploy/);
  assert.equal(creations(acct.cf).length, 0);
  assert.equal(uploads(acct.cf).length, 0, "the other worker is not replaced");
  assert.equal(acct.cf.secrets.get("edge-agent"), undefined);
});

test("a failing migration: says which and why, and nothing is deployed", async () => {
  const acct = await account();
  const failing = MIGRATIONS[2];
  acct.cf.fault({ method: "POST", path: /\/query$/, sql: new RegExp(failing.replace(".", "\\.")), status: 400, code: 7500, message: "near \"TABLEX\": syntax error at offset 7: SQLITE_ERROR" });
  const r = await deploy(acct, firstDeployEnv);
  assert.equal(r.code, 1, r.all);
  assert.match(r.stderr, /a migration failed on the remote database, so nothing was deployed/);
  assert.match(r.stderr, /syntax error/);
  assert.equal(uploads(acct.cf).length, 0, "no upload");
  assert.equal(acct.cf.scripts.size, 0);
  assert.equal(acct.cf.queues.size, 0, "wrangler deploy did not run");
  const db = [...acct.cf.databases.values()][0];
  const applied = db.sqlite.prepare("SELECT name FROM d1_migrations").all().map((row) => row.name);
  assert.deepEqual(applied, MIGRATIONS.slice(0, 2), "the migrations before it stay applied");
  assert.equal(acct.tg.calls("setWebhook").length, 0);
});

test("the account's queue limit: says what to do, nothing is uploaded", async () => {
  const acct = await account();
  acct.cf.setQueueLimit(1);
  const r = await deploy(acct, firstDeployEnv);
  assert.equal(r.code, 1, r.all);
  assert.match(r.stderr, /queue limit/);
  assert.match(r.stderr, /maximum number of queues/, "Cloudflare's own words are shown");
  assert.match(r.stderr, /wrangler queues delete/);
  assert.equal(uploads(acct.cf).length, 0);
  assert.equal(acct.cf.queues.size, 1);
});

test("Telegram refuses the webhook URL: says so and what to do; the worker and secrets are in place", async () => {
  const acct = await account();
  acct.tg.fault({ method: "setWebhook", status: 400, description: "Bad Request: bad webhook: Failed to resolve host: Name or service not known" });
  const r = await deploy(acct, firstDeployEnv);
  assert.equal(r.code, 1, r.all);
  assert.match(r.stderr, new RegExp(`Telegram refused the webhook URL ${WORKER_URL.replaceAll(".", "\\.")}/telegram/webhook: Bad Request: bad webhook: Failed to resolve host`));
  assert.match(r.stderr, /run npm run deploy again/);
  assert.equal(acct.cf.scripts.get("edge-agent").uploads.length, 1);
  assert.equal(acct.cf.secrets.get("edge-agent").size, 4);
  const adminToken = acct.cf.secrets.get("edge-agent").get("ADMIN_TOKEN");
  assert.equal(acct.vars().ADMIN_TOKEN, adminToken, "the generated admin token is in the record despite the failure");
  assert.equal(occurrences(r.all, adminToken), 0, "and not in the output without a terminal");
  assert.equal(acct.tg.webhook.url, "");
});
