// npm run deploy and npm run destroy, end to end without the internet: the real scripts and
// the real wrangler against a fake Cloudflare API and the fake Telegram (tests/support/
// deploy.js). A first deploy from nothing, a second run, destroy, and the failures that stop
// before anything is created. The failures further in are in deploy-failures.test.js (each
// file must finish within the suite's per-file timeout on a busy machine).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { ROOT, TOKEN, GEMINI_KEY, WORKER_URL, MIGRATIONS, TOML, account, run, deploy, firstDeployEnv, creations, uploads, occurrences } from "../support/deploy.js";

let main; // the account the first deploy, the second run and destroy share

test("a first deploy from nothing checks the Gemini key, creates one database and two queues, uploads the worker with its bindings and bot id, sets the four secrets and registers the webhook", async () => {
  main = await account();
  const { cf, tg } = main;
  const r = await deploy(main, firstDeployEnv);
  assert.equal(r.code, 0, r.all);
  assert.deepEqual(cf.unknown, [], "wrangler called only routes the fake knows");

  // Exactly one database and two queues, by the names in wrangler.toml.
  assert.equal(creations(cf).length, 3, JSON.stringify(creations(cf)));
  const dbs = [...cf.databases.values()];
  assert.deepEqual(dbs.map((d) => d.name), ["edge-agent"]);
  assert.deepEqual([...cf.queues.values()].map((q) => q.queue_name).sort(), ["edge-agent-dead-letters", "edge-agent-jobs"]);
  // Every migration ran on it, before the upload.
  const applied = dbs[0].sqlite.prepare("SELECT name FROM d1_migrations ORDER BY id").all().map((row) => row.name);
  assert.deepEqual(applied, MIGRATIONS);
  assert.ok(dbs[0].sqlite.prepare("SELECT name FROM sqlite_master WHERE name = 'messages'").get(), "the schema exists");
  const lastQuery = cf.callsTo("POST", /\/query$/).at(-1).seq;
  assert.ok(lastQuery < uploads(cf)[0].seq, "migrations ran before the upload");

  // The real worker, with its bindings: D1 by the created id, queues, the Durable Object.
  const script = cf.scripts.get("edge-agent");
  assert.equal(script.uploads.length, 1);
  const { metadata, modules } = script.uploads[0];
  const binding = (name) => metadata.bindings.find((b) => b.name === name);
  assert.deepEqual({ ...binding("DB") }, { type: "d1", name: "DB", id: dbs[0].uuid });
  assert.equal(binding("JOBS").type, "queue");
  assert.equal(binding("JOBS").queue_name, "edge-agent-jobs");
  assert.equal(binding("DEAD_LETTERS").queue_name, "edge-agent-dead-letters");
  assert.equal(binding("CHATS").type, "durable_object_namespace");
  assert.equal(binding("CHATS").class_name, "ChatObject");
  assert.deepEqual(metadata.migrations?.steps?.[0]?.new_sqlite_classes, ["ChatObject"], "the Durable Object's first migration");
  assert.equal(binding("TELEGRAM_BOT_TOKEN"), undefined, "no secret travels as a plain binding");
  // What the worker reads its queue names from, and the bot it serves (deploy compares it).
  assert.equal(binding("JOBS_QUEUE").text, "edge-agent-jobs");
  assert.equal(binding("DEAD_LETTER_QUEUE").text, "edge-agent-dead-letters");
  assert.equal(binding("BOT_ID").text, TOKEN.split(":")[0]);
  assert.equal(binding("MINIAPP_URL").text, `${WORKER_URL}/app`, "the Mini App's buttons get the worker's address");
  assert.ok(modules.some((m) => m.type === "application/wasm" && m.size > 100_000), `the wasm worker was uploaded: ${JSON.stringify(modules)}`);
  const jobs = [...cf.queues.values()].find((q) => q.queue_name === "edge-agent-jobs");
  assert.deepEqual(jobs.consumers.map((c) => [c.script, c.dead_letter_queue]), [["edge-agent", "edge-agent-dead-letters"]]);
  assert.deepEqual(cf.schedules.get("edge-agent"), [{ cron: "*/30 * * * *" }]);
  assert.equal(fs.readFileSync(path.join(ROOT, "wrangler.toml"), "utf8"), TOML, "wrangler.toml is left as it was (no ids written)");
  assert.doesNotMatch(TOML, /database_id/);

  // The key was checked against the configured model before anything was created, in a header.
  const check = main.gemini.requests.find((q) => q.get);
  assert.ok(check, "the Gemini key was checked");
  assert.equal(check.path, `/v1beta/models/${/^GEMINI_MODEL\s*=\s*"([^"]+)"/m.exec(TOML)[1]}`);
  assert.equal(check.headers["x-goog-api-key"], GEMINI_KEY);
  assert.ok(check.at < Math.min(...cf.databases.values().map((d) => Date.parse(d.created_at))), "checked before the database was created");

  // The four secrets; the generated ones are 43 random characters, kept in .deploy.vars.
  const secrets = cf.secrets.get("edge-agent");
  assert.deepEqual([...secrets.keys()].sort(), ["ADMIN_TOKEN", "GEMINI_API_KEY", "TELEGRAM_BOT_TOKEN", "TELEGRAM_WEBHOOK_SECRET"]);
  assert.equal(secrets.get("TELEGRAM_BOT_TOKEN"), TOKEN);
  assert.equal(secrets.get("GEMINI_API_KEY"), GEMINI_KEY);
  const webhookSecret = secrets.get("TELEGRAM_WEBHOOK_SECRET");
  const adminToken = secrets.get("ADMIN_TOKEN");
  assert.match(webhookSecret, /^[A-Za-z0-9_-]{43}$/);
  assert.match(adminToken, /^[A-Za-z0-9_-]{43}$/);
  assert.notEqual(webhookSecret, adminToken);
  const vars = main.vars();
  assert.equal(vars.TELEGRAM_WEBHOOK_SECRET, webhookSecret);
  assert.equal(vars.ADMIN_TOKEN, adminToken);
  assert.equal(vars.WORKER_URL, WORKER_URL);
  assert.equal(fs.statSync(main.env.DEPLOY_VARS_FILE).mode & 0o777, 0o600);

  // The webhook with the generated secret, and the worker's menu.
  assert.equal(tg.webhook.url, `${WORKER_URL}/telegram/webhook`);
  assert.equal(tg.webhook.secret_token, webhookSecret);
  assert.ok(tg.webhook.allowed_updates.includes("message_reaction"));
  assert.deepEqual(tg.commands.map((c) => c.command), ["new", "help"]);
  // The menu button opens the Mini App the worker serves.
  assert.deepEqual(tg.menuButton, { type: "web_app", text: "Memories", web_app: { url: `${WORKER_URL}/app` } });
  assert.equal(tg.calls("getWebhookInfo").length, 1);

  // The status; no secret anywhere in the output: without a terminal (CI) the admin token is
  // only written to the record, whose path is named.
  assert.match(r.stdout, /Bot: +@edge_test_bot/);
  assert.match(r.stdout, new RegExp(`Worker: +${WORKER_URL.replaceAll(".", "\\.")}`));
  assert.match(r.stdout, /Webhook: +set/);
  assert.match(r.stdout, /message @edge_test_bot/);
  assert.match(r.stderr, new RegExp(`admin token: generated and written to ${main.env.DEPLOY_VARS_FILE.replaceAll(".", "\\.")}`));
  for (const secret of [TOKEN, GEMINI_KEY, webhookSecret, adminToken]) assert.equal(occurrences(r.all, secret), 0, "a secret was printed");
});

test("a second run creates nothing, sets no secret again and uploads again", async (t) => {
  if (!main) return t.skip("the first deploy did not run");
  const { cf, tg } = main;
  const before = { calls: cf.calls.length, uploads: uploads(cf).length, secretsPuts: cf.callsTo("PATCH", /secrets-bulk$/).length };
  const webhookSecret = cf.secrets.get("edge-agent").get("TELEGRAM_WEBHOOK_SECRET");
  // No environment this time: the token and the generated secrets come from .deploy.vars.
  // Without its record of where it deployed (another checkout), the deploy looks at the
  // existing worker and recognises it as this bot.
  const file = main.env.DEPLOY_VARS_FILE;
  fs.writeFileSync(file, fs.readFileSync(file, "utf8").replace(/^WORKER_(NAME|URL)=.*\n/gm, ""));
  const r = await deploy(main, {});
  assert.equal(r.code, 0, r.all);
  assert.deepEqual(cf.unknown, []);
  const calls = cf.calls.slice(before.calls);
  assert.ok(calls.some((c) => c.method === "GET" && /\/workers\/scripts\/edge-agent\/settings$/.test(c.path)), "the existing worker's bindings were looked at");
  assert.equal(main.vars().WORKER_NAME, "edge-agent");
  assert.deepEqual(calls.filter((c) => c.method === "POST" && /\/(d1\/database|queues)$/.test(c.path)), [], "nothing created");
  assert.equal(cf.databases.size, 1);
  assert.equal(cf.queues.size, 2);
  assert.equal(uploads(cf).length, before.uploads + 1, "uploaded again");
  assert.equal(cf.scripts.get("edge-agent").uploads.length, 2);
  assert.equal(cf.callsTo("PATCH", /secrets-bulk$/).length, before.secretsPuts, "no secret set again");
  assert.equal(tg.webhook.secret_token, webhookSecret, "the webhook keeps its secret");
  assert.match(r.stderr, /database edge-agent: exists/);
  assert.match(r.stderr, /migrations: up to date/);
  assert.match(r.stdout, /Webhook: +set/);
  assert.doesNotMatch(r.all, new RegExp(cf.secrets.get("edge-agent").get("ADMIN_TOKEN")), "the admin token is printed only the first time");
});

test("npm run destroy asks first, removes the webhook, the worker and the queues, and the database only when told", async (t) => {
  if (!main) return t.skip("the first deploy did not run");
  const { cf, tg } = main;
  const refused = await run(main, "destroy.mjs");
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /--yes/);
  assert.ok(cf.scripts.has("edge-agent"), "nothing removed without confirmation");
  assert.equal(tg.webhook.url, `${WORKER_URL}/telegram/webhook`);

  const r = await run(main, "destroy.mjs", { args: ["--yes"] });
  assert.equal(r.code, 0, r.all);
  assert.equal(tg.webhook.url, "", "the webhook is removed");
  assert.equal(cf.scripts.size, 0, "the worker is deleted");
  assert.equal(cf.queues.size, 0, "the queues are deleted");
  assert.equal(cf.databases.size, 1, "the database is kept");
  assert.match(r.stderr, /database edge-agent: kept/);

  const all = await run(main, "destroy.mjs", { args: ["--yes", "--delete-database"] });
  assert.equal(all.code, 0, all.all);
  assert.equal(cf.databases.size, 0, "the database is deleted with --delete-database");
  assert.match(all.stderr, /worker edge-agent: already gone/);
  assert.deepEqual(cf.unknown, []);
});

test("not logged in to Cloudflare: says to run wrangler login, creates nothing", async () => {
  const acct = await account();
  const r = await deploy(acct, { ...firstDeployEnv, CLOUDFLARE_API_TOKEN: "" });
  assert.equal(r.code, 1, r.all);
  assert.match(r.stderr, /not logged in to Cloudflare.*npm run login/);
  assert.equal(creations(acct.cf).length, 0);
  assert.equal(acct.tg.calls("setWebhook").length, 0);
});

test("a token BotFather did not issue (getMe 401): says so, creates nothing, never prints the token", async () => {
  const acct = await account();
  const wrong = "987654321:not-a-token-botfather-issued";
  const r = await deploy(acct, { ...firstDeployEnv, TELEGRAM_BOT_TOKEN: wrong });
  assert.equal(r.code, 1, r.all);
  assert.match(r.stderr, /401 Unauthorized.*not a token @BotFather issued/);
  assert.equal(occurrences(r.all, wrong), 0);
  assert.equal(creations(acct.cf).length, 0);
  assert.equal(uploads(acct.cf).length, 0);
});
