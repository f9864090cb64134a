// Whose worker, database and queues a deploy touches (tests/support/deploy.js; the fake
// Cloudflare refuses a second consumer on a queue as the real API does): two bots in one
// account share nothing and destroying one leaves the other; a worker of that name that serves
// another bot is not taken over; a database of that name from another project is not adopted;
// a worker deployed before resources took the worker's name keeps its data on an upgrade.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { TOKEN, OTHER_TOKEN, account, run, deploy, firstDeployEnv, creations, uploads, wranglerIn, runOnTerminal } from "../support/deploy.js";

const queueNames = (cf) => [...cf.queues.values()].map((q) => q.queue_name).sort();
const bindingsOf = (cf, name) => Object.fromEntries(cf.scripts.get(name).metadata.bindings.map((b) => [b.name, b]));

test("two bots in one account share nothing, and destroying one (database too) leaves the other as it was", async () => {
  const first = await account();
  const r1 = await deploy(first, firstDeployEnv);
  assert.equal(r1.code, 0, r1.all);
  const second = await account({ cf: first.cf, token: OTHER_TOKEN, username: "second_test_bot" });
  const r2 = await deploy(second, { ...firstDeployEnv, TELEGRAM_BOT_TOKEN: OTHER_TOKEN, WORKER_NAME: "second-bot" });
  assert.equal(r2.code, 0, r2.all);
  const { cf } = first;

  assert.deepEqual([...cf.databases.values()].map((d) => d.name).sort(), ["edge-agent", "second-bot"]);
  assert.deepEqual(queueNames(cf), ["edge-agent-dead-letters", "edge-agent-jobs", "second-bot-dead-letters", "second-bot-jobs"]);
  const a = bindingsOf(cf, "edge-agent");
  const b = bindingsOf(cf, "second-bot");
  assert.notEqual(a.DB.id, b.DB.id);
  assert.deepEqual([b.JOBS.queue_name, b.DEAD_LETTERS.queue_name, b.JOBS_QUEUE.text, b.DEAD_LETTER_QUEUE.text], ["second-bot-jobs", "second-bot-dead-letters", "second-bot-jobs", "second-bot-dead-letters"]);
  assert.equal(b.BOT_ID.text, OTHER_TOKEN.split(":")[0]);
  const consumers = Object.fromEntries([...cf.queues.values()].map((q) => [q.queue_name, q.consumers.map((c) => c.script)]));
  assert.deepEqual(consumers["edge-agent-jobs"], ["edge-agent"]);
  assert.deepEqual(consumers["second-bot-jobs"], ["second-bot"]);
  assert.equal(cf.secrets.get("edge-agent").get("TELEGRAM_BOT_TOKEN"), TOKEN);
  assert.equal(cf.secrets.get("second-bot").get("TELEGRAM_BOT_TOKEN"), OTHER_TOKEN);

  // Something in the first bot's history, to see it survive the second's destruction.
  const firstDb = [...cf.databases.values()].find((d) => d.name === "edge-agent");
  firstDb.sqlite.exec("CREATE TABLE IF NOT EXISTS survivor (x TEXT); INSERT INTO survivor VALUES ('still here')");

  const gone = await run(second, "destroy.mjs", { args: ["--yes", "--delete-database"] });
  assert.equal(gone.code, 0, gone.all);
  assert.equal(second.tg.webhook.url, "", "the second bot's webhook is removed");
  assert.deepEqual([...cf.scripts.keys()], ["edge-agent"]);
  assert.deepEqual([...cf.databases.values()].map((d) => d.name), ["edge-agent"]);
  assert.deepEqual(queueNames(cf), ["edge-agent-dead-letters", "edge-agent-jobs"]);
  assert.equal(firstDb.sqlite.prepare("SELECT x FROM survivor").get().x, "still here");
  assert.deepEqual([...cf.queues.values()].find((q) => q.queue_name === "edge-agent-jobs").consumers.map((c) => c.script), ["edge-agent"]);
  assert.equal(first.tg.webhook.url, "https://edge-agent.test-account.workers.dev/telegram/webhook", "the first bot still answers");
  assert.equal(cf.secrets.get("edge-agent").size, 4);
});

test("a worker of that name serving another bot (its recorded bot id) is not taken over", async () => {
  const first = await account();
  assert.equal((await deploy(first, firstDeployEnv)).code, 0);
  // Another checkout, another bot, the default name: it would replace the first bot's token.
  const other = await account({ cf: first.cf, token: OTHER_TOKEN, username: "second_test_bot" });
  const before = uploads(first.cf).length;
  const r = await deploy(other, { ...firstDeployEnv, TELEGRAM_BOT_TOKEN: OTHER_TOKEN });
  assert.equal(r.code, 1, r.all);
  assert.match(r.stderr, /the worker "edge-agent" in your Cloudflare account serves another bot \(id 123456789\), not @second_test_bot \(id 555666777\)/);
  assert.match(r.stderr, /WORKER_NAME=second_test_bot|WORKER_NAME=second-test-bot/);
  assert.equal(uploads(first.cf).length, before, "nothing uploaded");
  assert.equal(first.cf.secrets.get("edge-agent").get("TELEGRAM_BOT_TOKEN"), TOKEN, "its token is not replaced");
  assert.equal(other.tg.calls("setWebhook").length, 0);

  // Nor taken down from that checkout: destroy knows its bot, and the worker serves another.
  const gone = await run(other, "destroy.mjs", { args: ["--yes", "--delete-database"], env: { TELEGRAM_BOT_TOKEN: OTHER_TOKEN } });
  assert.equal(gone.code, 1, gone.all);
  assert.match(gone.stderr, /the worker "edge-agent" serves another bot \(id 123456789\) than the one this checkout knows \(id 555666777\); nothing was removed/);
  assert.ok(first.cf.scripts.has("edge-agent"));
  assert.equal(first.cf.databases.size, 1);
  assert.equal(first.cf.queues.size, 2);
  assert.equal(first.tg.webhook.url, "https://edge-agent.test-account.workers.dev/telegram/webhook");
});

test("a D1 database of that name from another project is not adopted; nothing is created", async () => {
  const acct = await account();
  acct.cf.addDatabase("edge-agent", "CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL); INSERT INTO invoices (total) VALUES (9.5)");
  const r = await deploy(acct, firstDeployEnv);
  assert.equal(r.code, 1, r.all);
  assert.match(r.stderr, /a D1 database named "edge-agent" already exists and is not this bot's: it holds tables of another project \(invoices\)/);
  assert.deepEqual(creations(acct.cf), []);
  assert.equal(uploads(acct.cf).length, 0);
  const db = [...acct.cf.databases.values()][0];
  assert.equal(db.sqlite.prepare("SELECT name FROM sqlite_master WHERE name = 'd1_migrations'").get(), undefined, "no migration ran on it");

  // Another project's migrations table counts as foreign too.
  const other = await account();
  other.cf.addDatabase("edge-agent", "CREATE TABLE d1_migrations (id INTEGER PRIMARY KEY, name TEXT, applied_at TEXT); INSERT INTO d1_migrations (name) VALUES ('0001_create_invoices.sql')");
  const r2 = await deploy(other, firstDeployEnv);
  assert.equal(r2.code, 1, r2.all);
  assert.match(r2.stderr, /its migrations are not this project's \(0001_create_invoices\.sql\)/);
});

test("a queue of that name consumed by another worker (a queue has one consumer): stops before creating anything", async () => {
  const acct = await account();
  acct.cf.addForeignScript("someone-else");
  acct.cf.addQueue("edge-agent-jobs", "someone-else");
  const r = await deploy(acct, firstDeployEnv);
  assert.equal(r.code, 1, r.all);
  assert.match(r.stderr, /a queue named "edge-agent-jobs" already exists and the worker "someone-else" uses it \(a queue has one consumer\)/);
  assert.deepEqual(creations(acct.cf), []);
  assert.equal(acct.cf.databases.size, 0);
  assert.equal(uploads(acct.cf).length, 0);
});

test("a worker deployed before the bot id was recorded, on a terminal: taken over only when its name is typed", async (t) => {
  const acct = await account();
  const w = await wranglerIn({ env: { ...acct.env, CI: "true" } }, ["deploy"]);
  assert.equal(w.code, 0, w.all);
  const no = await runOnTerminal(acct, "deploy.mjs", [{ prompt: /If it is @edge_test_bot, type the worker's name/, answer: "no" }], { env: firstDeployEnv });
  if (no === null) return t.skip("util-linux script is not installed");
  assert.equal(no.code, 1, no.output);
  assert.match(no.output, /not confirmed; nothing was changed/);
  assert.equal(acct.cf.scripts.get("edge-agent").uploads.length, 1);
  const yes = await runOnTerminal(acct, "deploy.mjs", [{ prompt: /If it is @edge_test_bot, type the worker's name/, answer: "edge-agent" }], { env: firstDeployEnv });
  assert.equal(yes.code, 0, yes.output);
  assert.equal(bindingsOf(acct.cf, "edge-agent").BOT_ID.text, TOKEN.split(":")[0]);
});

test("a bot deployed the old way under WORKER_NAME (bound to edge-agent and its queues, no bot id) keeps its database, queues and history when deployed the new way", async () => {
  const acct = await account();
  const env = { ...acct.env };
  // The old deploy's steps for WORKER_NAME=legacy-bot: the database and queues by wrangler.toml's names.
  for (const args of [["d1", "create", "edge-agent"], ["d1", "migrations", "apply", "DB", "--remote"], ["deploy", "--name", "legacy-bot"]]) {
    const w = await wranglerIn({ env: { ...env, CI: "true" } }, args);
    assert.equal(w.code, 0, `${args.join(" ")}: ${w.all}`);
  }
  const secrets = JSON.stringify({ TELEGRAM_BOT_TOKEN: TOKEN, GEMINI_API_KEY: "old", TELEGRAM_WEBHOOK_SECRET: "s".repeat(43), ADMIN_TOKEN: "a".repeat(43) });
  assert.equal((await wranglerIn(acct, ["secret", "bulk", "--name", "legacy-bot"], { input: secrets })).code, 0);
  const { cf } = acct;
  const legacy = bindingsOf(cf, "legacy-bot");
  assert.equal(legacy.JOBS.queue_name, "edge-agent-jobs");
  const db = [...cf.databases.values()][0];
  db.sqlite.exec("INSERT INTO chats (chat_id, kind, title, first_seen_at, last_seen_at) VALUES (42, 'private', 'Alice', 1, 1)");

  // Without a terminal and without this checkout's record, no one says the worker is this bot.
  const refused = await deploy(acct, { ...firstDeployEnv, WORKER_NAME: "legacy-bot" });
  assert.equal(refused.code, 1, refused.all);
  assert.match(refused.stderr, /deployed by this project before it recorded which bot it serves.*DEPLOY_ADOPT_WORKER=legacy-bot npm run deploy/);
  assert.equal(cf.scripts.get("legacy-bot").uploads.length, 1, "nothing uploaded");

  const r = await deploy(acct, { ...firstDeployEnv, WORKER_NAME: "legacy-bot", DEPLOY_ADOPT_WORKER: "legacy-bot" });
  assert.equal(r.code, 0, r.all);
  const now = bindingsOf(cf, "legacy-bot");
  assert.equal(now.DB.id, db.uuid, "the same database");
  assert.deepEqual([now.JOBS.queue_name, now.DEAD_LETTERS.queue_name, now.JOBS_QUEUE.text, now.DEAD_LETTER_QUEUE.text], ["edge-agent-jobs", "edge-agent-dead-letters", "edge-agent-jobs", "edge-agent-dead-letters"]);
  assert.equal(now.BOT_ID.text, TOKEN.split(":")[0], "the bot id is recorded now");
  assert.equal(cf.databases.size, 1, "no new database");
  assert.deepEqual(queueNames(cf), ["edge-agent-dead-letters", "edge-agent-jobs"], "no new queues");
  assert.equal(db.sqlite.prepare("SELECT title FROM chats WHERE chat_id = 42").get().title, "Alice", "the history is still there");
  assert.equal(acct.vars().DATABASE_NAME, "edge-agent");

  // From now on it is known: a run from a fresh checkout needs no word from anyone.
  fs.rmSync(acct.env.DEPLOY_VARS_FILE);
  const again = await deploy(acct, { ...firstDeployEnv, WORKER_NAME: "legacy-bot" });
  assert.equal(again.code, 0, again.all);
  assert.equal(bindingsOf(cf, "legacy-bot").DB.id, db.uuid);
});

test("destroy removes only what it can show is this bot's: not queues or a database merely named after a worker that is gone, nor a webhook it cannot place", async () => {
  const acct = await account();
  // Another project's resources that happen to carry the default names; no worker, no record.
  const db = acct.cf.addDatabase("edge-agent", "CREATE TABLE invoices (id INTEGER PRIMARY KEY); INSERT INTO invoices VALUES (1)");
  acct.cf.addQueue("edge-agent-jobs");
  acct.cf.addQueue("edge-agent-dead-letters");
  // The bot's webhook points at an address this checkout never recorded.
  await fetch(`${acct.tg.base}/bot${TOKEN}/setWebhook`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ url: "https://elsewhere.example/hook" }) });
  const gone = await run(acct, "destroy.mjs", { args: ["--yes", "--delete-database"], env: { TELEGRAM_BOT_TOKEN: TOKEN } });
  assert.equal(gone.code, 0, gone.all);
  assert.deepEqual(queueNames(acct.cf), ["edge-agent-dead-letters", "edge-agent-jobs"], "the queues are left alone");
  assert.ok([...acct.cf.databases.values()].some((d) => d.uuid === db.uuid), "the database is left alone");
  assert.equal(acct.tg.webhook.url, "https://elsewhere.example/hook", "the webhook is left alone");
  assert.match(gone.stderr, /edge-agent-jobs: left alone, nothing shows it is this bot's/);
  assert.match(gone.stderr, /webhook: left alone, this checkout cannot show it is this worker's/);

  // Deployed from this checkout, then destroyed: everything it recorded goes, the webhook too.
  acct.cf.queues.clear();
  acct.cf.databases.clear();
  assert.equal((await deploy(acct, firstDeployEnv)).code, 0);
  const again = await run(acct, "destroy.mjs", { args: ["--yes", "--delete-database"] });
  assert.equal(again.code, 0, again.all);
  assert.equal(acct.tg.webhook.url, "");
  assert.deepEqual(queueNames(acct.cf), []);
  assert.equal(acct.cf.databases.size, 0);
});
