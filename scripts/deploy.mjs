#!/usr/bin/env node
// npm run deploy: from a BotFather token to a live bot, doing only what is missing, so it is
// safe to run again (scripts/deploy.sh sets up the toolchain and runs this). Every check comes
// before anything is created; a run stopped by one says what to do and a rerun finishes.
//
//   1. Cloudflare: the login's token and account, the token's permissions (reading the
//      account's workers, databases and queues), the workers.dev subdomain (a brand-new
//      account has none: registered on a terminal or with WORKERS_DEV_SUBDOMAIN, else stop)
//   2. the bot token (TELEGRAM_BOT_TOKEN, .deploy.vars, else asked), checked with getMe
//   3. the worker of that name: this bot's (its BOT_ID var), or stop; one deployed before the
//      id was recorded is taken over only when the person says so
//   4. its resources: an existing worker keeps exactly the database and queues it is bound
//      to; a new one gets its own, named after it (WORKER_NAME=x: x, x-jobs, x-dead-letters).
//      A database or queue of that name that belongs to another worker or project: stop
//   5. the Gemini key (GEMINI_API_KEY, else asked when the worker has none), checked against
//      the configured model; a key given in the environment replaces the stored one
//   6. the other secrets the worker lacks: webhook secret and admin token (generated unless
//      given; kept in .deploy.vars, mode 600; the admin token is shown only on a terminal)
//   -- from here on things are created --
//   7. the subdomain (if one was chosen), the D1 database (`wrangler d1 create` if missing)
//      and its migrations (`wrangler d1 migrations apply`); if one fails, stop
//   8. `wrangler deploy` with the configuration written for this worker (wrangler.toml with
//      its names, queue-name vars, BOT_ID and MINIAPP_URL; wrangler provisions the queues), then
//      `wrangler secret bulk`
//   9. the webhook (setWebhook with the secret) and the command menu, then getWebhookInfo and
//      getMe for the status
//
// Without a terminal nothing is asked: values come from the environment, e.g.
// `TELEGRAM_BOT_TOKEN=... GEMINI_API_KEY=... npm run deploy`. Secrets never reach the output
// (but for the admin token on a terminal) or a command line (wrangler gets them on stdin).
//
// For the tests (tests/support/deploy.js): DEPLOY_VARS_FILE moves the record,
// DEPLOY_WORKER_ORIGIN reaches the worker's /health and /telegram/commands somewhere else than
// its workers.dev URL, DEPLOY_HEALTH_WAIT_MS bounds the wait for it (default 90 s);
// TELEGRAM_API_BASE, GEMINI_API_BASE and CLOUDFLARE_API_BASE_URL point at the fakes.
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { registerWebhook, telegramApi, ScriptError } from "./webhook.mjs";
import { root, wrangler, wranglerError, projectNames, projectToml, readState, writeState, stateFile, ask, interactive, fail } from "./wrangler-run.mjs";
import { ApiError, connect, accountState, scriptBindings, bindingsByResource, workersDevSubdomain, d1Rows } from "./cloudflare-api.mjs";
import { resourceNames, boundResources, ownership, recordedBotId, adoptable, queueUser, uploadAdvice, tomlVar, deployConfig } from "./deploy-plan.mjs";

const say = (line) => console.error(`deploy: ${line}`);
const secretPattern = /^[A-Za-z0-9_-]{32,256}$/;
const generate = () => crypto.randomBytes(32).toString("base64url"); // 43 characters
const MIGRATIONS = fs.readdirSync(path.join(root, "migrations")).filter((f) => f.endsWith(".sql")).sort();

/** Step 2: the bot token, checked with Telegram. */
async function botToken(state, apiBase) {
  let token = process.env.TELEGRAM_BOT_TOKEN || state.TELEGRAM_BOT_TOKEN;
  if (!token && interactive()) token = await ask("Bot token from @BotFather (123456789:AA...): ", { hidden: true });
  if (!token) fail("TELEGRAM_BOT_TOKEN is not set. Create a bot with @BotFather (/newbot) and run: TELEGRAM_BOT_TOKEN=123456789:AA... npm run deploy");
  if (!/^\d+:[A-Za-z0-9_-]+$/.test(token)) fail("TELEGRAM_BOT_TOKEN does not look like a bot token (digits, a colon, then letters, like 123456789:AA...). Copy it again from @BotFather.");
  try {
    const me = await telegramApi({ token, apiBase }).call("getMe");
    return { token, me };
  } catch (e) {
    if (e.unauthorized) {
      fail("Telegram does not accept this bot token (401 Unauthorized): it is not a token @BotFather issued, or it was revoked. In @BotFather: /mybots → your bot → API Token, then run again with TELEGRAM_BOT_TOKEN=<that token>.");
    }
    throw e;
  }
}

/** Step 3: a worker of that name is this bot's, or the deploy stops before touching it. */
async function checkOwner(name, bindings, me, state) {
  const owner = ownership(bindings, me.id);
  if (owner === "ours") return;
  if (owner === "foreign") {
    fail(`a worker named "${name}" already exists in your Cloudflare account and it is not this bot (it has no ChatObject Durable Object); deploying would replace it. Deploy under another name: WORKER_NAME=${name}-bot npm run deploy (or delete that worker first).`);
  }
  if (owner === "other-bot") {
    fail(`the worker "${name}" in your Cloudflare account serves another bot (id ${recordedBotId(bindings)}), not @${me.username} (id ${me.id}); deploying would give it this bot's token and webhook. Deploy this bot under its own name: WORKER_NAME=${me.username.toLowerCase().replace(/[^a-z0-9-]/g, "-").slice(0, 40)} npm run deploy.`);
  }
  // Deployed by this project before the bot's id was recorded: which bot is it?
  const stateBot = (state.TELEGRAM_BOT_TOKEN ?? "").split(":")[0];
  if (state.WORKER_NAME === name && stateBot === String(me.id)) return; // deployed from here, with this bot
  if (process.env.DEPLOY_ADOPT_WORKER === name) return;
  if (interactive()) {
    const answer = await ask(`The worker "${name}" was deployed by this project before it recorded which bot it serves. If it is @${me.username}, type the worker's name to go on (anything else stops): `);
    if (answer === name) return;
    fail("not confirmed; nothing was changed.");
  }
  fail(`the worker "${name}" was deployed by this project before it recorded which bot it serves, and no one is here to say whether it is @${me.username}. If it is, run once: DEPLOY_ADOPT_WORKER=${name} npm run deploy (or npm run deploy on a terminal, which asks); if it is another bot, deploy this one under its own name: WORKER_NAME=<name> npm run deploy. Nothing was changed.`);
}

/**
 * Step 4: the resources this deployment uses. A deployed worker keeps what it is bound to
 * (an upgrade loses no data); anything new is named after the worker and must not belong to
 * another worker or project.
 */
async function plan(api, account, name, bindings) {
  const bound = boundResources(bindings, account.databases) ?? {};
  const fresh = resourceNames(name);
  const r = { database: bound.database ?? fresh.database, jobs: bound.jobs ?? fresh.jobs, dead: bound.dead ?? fresh.dead };
  const others = await bindingsByResource(api, account.scripts, name);
  const db = account.databases.find((d) => d.name === r.database);
  if (db && db.uuid !== bound.databaseId) {
    const user = others.database.get(db.uuid);
    if (user) fail(`a D1 database named "${r.database}" already exists and the worker "${user}" uses it; this bot would write into its conversations. Deploy under another name: WORKER_NAME=<name> npm run deploy. Nothing was created.`);
    const tables = (await d1Rows(api, db.uuid, "SELECT name FROM sqlite_master WHERE type = 'table'")).map((row) => row.name);
    const applied = tables.includes("d1_migrations") ? (await d1Rows(api, db.uuid, "SELECT name FROM d1_migrations ORDER BY id")).map((row) => row.name) : null;
    const verdict = adoptable({ tables, applied }, MIGRATIONS);
    if (!verdict.ok) fail(`a D1 database named "${r.database}" already exists and is not this bot's: ${verdict.why}. Deploy under another name (WORKER_NAME=<name> npm run deploy), or delete or rename that database. Nothing was created.`);
    say(`database ${r.database}: exists, ${applied?.length ? "with this project's migrations" : "empty"}; it becomes this bot's`);
  }
  for (const queue of [r.jobs, r.dead]) {
    if (queue === bound.jobs || queue === bound.dead) continue;
    const user = queueUser(queue, account.queues, others, name);
    if (user) fail(`a queue named "${queue}" already exists and the worker "${user}" uses it (a queue has one consumer). Deploy under another name: WORKER_NAME=<name> npm run deploy. Nothing was created.`);
  }
  return r;
}

/** Step 5: the Gemini key, checked against the model before anything is created. */
async function geminiKey(hasKey, toml, state) {
  // Given in the environment: checked and put, replacing the worker's. Else the worker's own
  // is kept; a worker without one takes the record's (a run stopped before it put it) or asks.
  let key = process.env.GEMINI_API_KEY || (hasKey ? undefined : state.GEMINI_API_KEY);
  if (!key && !hasKey && interactive()) key = await ask("Gemini API key (https://aistudio.google.com/apikey): ", { hidden: true });
  if (!key) {
    if (hasKey) return null; // kept as it is
    fail("GEMINI_API_KEY is not set. Get a key at https://aistudio.google.com/apikey and run: GEMINI_API_KEY=... npm run deploy");
  }
  const base = (process.env.GEMINI_API_BASE || tomlVar(toml, "GEMINI_API_BASE") || "https://generativelanguage.googleapis.com").replace(/\/$/, "");
  const model = tomlVar(toml, "GEMINI_MODEL");
  let res;
  try {
    // The key goes in a header, never in the URL.
    res = await fetch(`${base}/v1beta/models/${encodeURIComponent(model)}`, { headers: { "x-goog-api-key": key }, signal: AbortSignal.timeout(20_000) });
  } catch (e) {
    fail(`could not reach Gemini to check the API key (${e.cause?.code ?? e.message}); nothing was created. Check your connection and run again.`);
  }
  if (res.ok) return key;
  const error = (await res.json().catch(() => ({}))).error ?? {};
  const reasons = (error.details ?? []).map((d) => d.reason).filter(Boolean);
  const words = `${error.status ?? res.status}: ${error.message ?? `HTTP ${res.status}`}`;
  if (res.status === 429) {
    say(`Gemini key: accepted, but rate-limited right now (${words})`);
    return key;
  }
  if (reasons.includes("API_KEY_INVALID") || (res.status === 400 && /api key/i.test(error.message ?? ""))) {
    fail(`Google does not accept this Gemini API key (${words}). Copy it again from https://aistudio.google.com/apikey and run: GEMINI_API_KEY=... npm run deploy. Nothing was created.`);
  }
  if (res.status === 404) {
    fail(`the Gemini model "${model}" is not available to this key (${words}). Set GEMINI_MODEL in wrangler.toml to a model your key lists (https://ai.google.dev/gemini-api/docs/models), then run again. Nothing was created.`);
  }
  if (res.status === 403) {
    fail(`this Gemini API key may not use the Gemini API (${words}). In Google AI Studio make a key for a project with the Generative Language API enabled, then run again with GEMINI_API_KEY=.... Nothing was created.`);
  }
  fail(`Gemini did not accept the key check (${words}); nothing was created. Run again in a minute.`);
}

/** Step 6: the values of the secrets to put (asked, taken or generated). */
function secretsToPut(existing, state, token, gemini) {
  const put = {};
  const generated = [];
  if (!existing.has("TELEGRAM_BOT_TOKEN") || state.TELEGRAM_BOT_TOKEN !== token) put.TELEGRAM_BOT_TOKEN = token;
  if (gemini) put.GEMINI_API_KEY = gemini;
  // The webhook secret must be known here to register the webhook: one the worker has but
  // this machine does not know is replaced (and the webhook registered with the new one).
  let webhookSecret = process.env.TELEGRAM_WEBHOOK_SECRET || state.TELEGRAM_WEBHOOK_SECRET;
  if (!webhookSecret) {
    webhookSecret = generate();
    generated.push("TELEGRAM_WEBHOOK_SECRET");
  }
  if (!secretPattern.test(webhookSecret)) fail("TELEGRAM_WEBHOOK_SECRET must be 32 to 256 characters of A-Z a-z 0-9 _ - (leave it unset to have one generated).");
  if (!existing.has("TELEGRAM_WEBHOOK_SECRET") || state.TELEGRAM_WEBHOOK_SECRET !== webhookSecret) put.TELEGRAM_WEBHOOK_SECRET = webhookSecret;
  let adminToken = process.env.ADMIN_TOKEN || state.ADMIN_TOKEN;
  if (!existing.has("ADMIN_TOKEN") || (process.env.ADMIN_TOKEN && process.env.ADMIN_TOKEN !== state.ADMIN_TOKEN)) {
    if (!adminToken) {
      adminToken = generate();
      generated.push("ADMIN_TOKEN");
    }
    if (!secretPattern.test(adminToken)) fail("ADMIN_TOKEN must be 32 to 256 characters of A-Z a-z 0-9 _ - (leave it unset to have one generated).");
    put.ADMIN_TOKEN = adminToken;
  }
  return { put, generated, webhookSecret, adminToken };
}

/** Step 7: the database exists and its migrations are applied. */
async function database(account, dbName, config) {
  if (account.databases.some((d) => d.name === dbName)) {
    say(`database ${dbName}: exists`);
  } else {
    const c = await wrangler(["d1", "create", dbName]);
    if (c.code !== 0) fail(`could not create the D1 database ${dbName}: ${wranglerError(c)}`);
    say(`database ${dbName}: created`);
  }
  const m = await wrangler(["d1", "migrations", "apply", "DB", "--remote", "--config", config], { env: { CI: "true" } });
  if (m.code !== 0) {
    fail(`a migration failed on the remote database, so nothing was deployed:\n${wranglerError(m)}\nFix the migration (migrations/), then run npm run deploy again; migrations already applied are not applied twice.`);
  }
  const applied = /No migrations to apply/i.test(m.output) ? "up to date" : "applied";
  say(`migrations: ${applied}`);
}

/** Step 8: wrangler deploy (queues provisioned by name), then the secrets to put. */
async function deployWorker(name, config, put) {
  const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "edge-agent-deploy-")), "output.json");
  say(`worker ${name}: building and uploading (the first build compiles the Rust worker: several minutes)...`);
  const d = await wrangler(["deploy", "--config", config], { env: { WRANGLER_OUTPUT_FILE_PATH: out } });
  let targets = [];
  try {
    for (const line of fs.readFileSync(out, "utf8").split("\n")) {
      if (line.trim()) {
        const entry = JSON.parse(line);
        if (entry.type === "deploy") targets = entry.targets ?? [];
      }
    }
  } catch {
    targets = [];
  } finally {
    fs.rmSync(path.dirname(out), { recursive: true, force: true });
  }
  if (d.code !== 0) {
    const error = wranglerError(d);
    const advice = uploadAdvice(error);
    fail(advice ? `${advice}\nCloudflare said: ${error}` : `wrangler deploy failed:\n${error}`);
  }
  const url = targets.find((t) => /^https:\/\/[^ ]+\.workers\.dev$/.test(t));
  if (!url) fail(`the worker was deployed but has no workers.dev URL (targets: ${targets.join(", ") || "none"}). Set workers_dev = true in wrangler.toml, or register a workers.dev subdomain in the Cloudflare dashboard (Workers & Pages), then run npm run deploy again.`);
  say(`worker ${name}: uploaded → ${url}`);
  const names = Object.keys(put);
  if (names.length) {
    const s = await wrangler(["secret", "bulk", "--name", name], { input: JSON.stringify(put) });
    if (s.code !== 0) fail(`could not set the worker's secrets (${names.join(", ")}): ${wranglerError(s)}`);
    say(`secrets set: ${names.join(", ")}`);
  } else {
    say("secrets: all four already set");
  }
  return url;
}

/** Step 9: the webhook and the menu; a worker not reachable yet gets the rerun hint. */
async function webhook(url, token, secret, apiBase) {
  try {
    return await registerWebhook({
      workerUrl: url,
      token,
      secret,
      apiBase,
      probeOrigin: process.env.DEPLOY_WORKER_ORIGIN,
      waitMs: Number(process.env.DEPLOY_HEALTH_WAIT_MS ?? 90_000),
      log: say,
    });
  } catch (e) {
    if (e instanceof ScriptError && e.method === "health") {
      fail(`the worker is deployed and its secrets are set, but ${url} does not answer yet (${e.description}). A new workers.dev name can take a few minutes to be reachable: run npm run deploy again in a minute (only the webhook is left to do).`);
    }
    if (e instanceof ScriptError && e.method === "setWebhook") {
      fail(`Telegram refused the webhook URL ${url}/telegram/webhook: ${e.description}. The worker is deployed and its secrets are set; a new workers.dev name can take a few minutes to be reachable, so run npm run deploy again in a minute (only the webhook is left to do).`);
    }
    throw e;
  }
}

async function main() {
  const toml = projectToml();
  const names = projectNames();
  const state = readState();
  const name = process.env.WORKER_NAME || state.WORKER_NAME || names.worker;
  if (!/^[a-z0-9](?:[a-z0-9-]{0,48}[a-z0-9])?$/.test(name)) fail(`WORKER_NAME "${name}" cannot name a worker and its queues: 1 to 50 lowercase letters, digits and dashes, not starting or ending with a dash.`);
  const apiBase = process.env.TELEGRAM_API_BASE || "https://api.telegram.org";

  // Checks: nothing is created until all of them pass.
  const api = await connect();
  const account = await accountState(api);
  const subdomain = await workersDevSubdomain(api);
  const { token, me } = await botToken(state, apiBase);
  say(`bot @${me.username}: token accepted by Telegram`);
  const exists = account.scripts.some((s) => (s.id ?? s.name) === name);
  const bindings = exists ? await scriptBindings(api, name) : [];
  if (exists) await checkOwner(name, bindings, me, state);
  const resources = await plan(api, account, name, bindings);
  const secrets = new Set(bindings.filter((b) => b.type === "secret_text").map((b) => b.name));
  const gemini = await geminiKey(secrets.has("GEMINI_API_KEY"), toml, state);
  if (gemini) say("Gemini key: accepted by Google");
  const s = secretsToPut(secrets, state, token, gemini);
  // Kept before anything is created, so a failure later never loses a generated value.
  writeState({ ...state, TELEGRAM_BOT_TOKEN: token, GEMINI_API_KEY: gemini ?? state.GEMINI_API_KEY, TELEGRAM_WEBHOOK_SECRET: s.webhookSecret, ADMIN_TOKEN: s.adminToken ?? state.ADMIN_TOKEN });

  // Creating.
  if (subdomain.register) await subdomain.register();
  const config = path.join(root, `.deploy.${process.pid}.wrangler.toml`);
  // The address wrangler will give the worker, known before the upload: the Mini App's buttons need it.
  const miniAppUrl = `https://${name}.${subdomain.subdomain}.workers.dev/app`;
  fs.writeFileSync(config, deployConfig(toml, names, { name, ...resources, botId: me.id, miniAppUrl }));
  let url;
  try {
    await database(account, resources.database, config);
    url = await deployWorker(name, config, s.put);
  } finally {
    fs.rmSync(config, { force: true });
  }
  writeState({ ...readState(), WORKER_NAME: name, WORKER_URL: url, DATABASE_NAME: resources.database, JOBS_QUEUE: resources.jobs, DEAD_LETTER_QUEUE: resources.dead });
  // The admin token is shown once, and only to a person: without a terminal (CI) its output
  // is a log, so it is only in the record.
  if (s.generated.includes("ADMIN_TOKEN")) {
    const file = stateFile();
    if (interactive()) console.log(`Admin token for the admin API (shown once; also in ${path.basename(file)}): ${s.adminToken}`);
    else say(`admin token: generated and written to ${file} (ADMIN_TOKEN=...); it is not printed without a terminal, so it stays out of logs`);
  }

  const registered = await webhook(url, token, s.webhookSecret, apiBase);
  say(`webhook registered, ${registered.commands.length} commands in the menu`);

  const telegram = telegramApi({ token, apiBase });
  const info = await telegram.call("getWebhookInfo");
  const bot = await telegram.call("getMe");
  const webhookState = info.url === registered.url.href
    ? `set${info.pending_update_count ? `, ${info.pending_update_count} updates waiting` : ""}${info.last_error_message ? `; last delivery error: ${info.last_error_message}` : ""}`
    : `NOT set (Telegram reports ${info.url || "no webhook"})`;
  const lines = [
    "",
    `  Bot:      @${bot.username} (${bot.first_name})`,
    `  Worker:   ${url}`,
    `  Webhook:  ${webhookState}`,
  ];
  lines.push("", `Next: message @${bot.username} in Telegram (https://t.me/${bot.username}).`, "");
  console.log(lines.join("\n"));
  if (info.url !== registered.url.href) process.exit(1);
}

try {
  await main();
} catch (e) {
  if (e instanceof ApiError) {
    console.error(`deploy: the Cloudflare API refused ${e.where}: ${e.message}`);
    process.exit(1);
  }
  if (!(e instanceof ScriptError)) throw e;
  console.error(`deploy: ${e.message}`);
  process.exit(1);
}
