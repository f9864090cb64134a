#!/usr/bin/env node
// npm run deploy: from a BotFather token to a live bot, doing only what is missing, so it is
// safe to run again (scripts/deploy.sh sets up the toolchain and runs this).
//
//   1. the Cloudflare login (wrangler's: `npx wrangler login`, or CLOUDFLARE_API_TOKEN)
//   2. the bot token (TELEGRAM_BOT_TOKEN, .deploy.vars, else asked), checked with getMe
//   3. the worker: if one of that name exists and is not this bot, stop (WORKER_NAME=...)
//   4. the secrets the worker does not have yet: the Gemini key (GEMINI_API_KEY, else asked),
//      the webhook secret and admin token (generated unless given; the admin token is
//      printed once); all kept in .deploy.vars (mode 600, not committed)
//   5. the D1 database, by the name in wrangler.toml (`wrangler d1 create` if missing)
//   6. its migrations (`wrangler d1 migrations apply DB --remote`); if one fails, stop:
//      nothing is deployed
//   7. `wrangler deploy` (runs the build; wrangler provisions the queues by name and binds the
//      database by name, so wrangler.toml holds no ids), then `wrangler secret bulk`
//   8. the webhook (setWebhook with the secret) and the command menu, then getWebhookInfo and
//      getMe for the status
//
// Without a terminal nothing is asked: values come from the environment, e.g.
// `TELEGRAM_BOT_TOKEN=... GEMINI_API_KEY=... npm run deploy`. Secrets never reach the output
// or a command line (wrangler gets them on stdin). WORKER_NAME deploys under another name.
//
// For the tests (tests/support/deploy.js): DEPLOY_VARS_FILE moves the record,
// DEPLOY_WORKER_ORIGIN reaches the worker's /health and /telegram/commands somewhere else than
// its workers.dev URL, DEPLOY_HEALTH_WAIT_MS bounds the wait for it (default 90 s);
// TELEGRAM_API_BASE and wrangler's CLOUDFLARE_API_BASE_URL point at the fakes.
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { registerWebhook, telegramApi, ScriptError } from "./webhook.mjs";
import { wrangler, wranglerError, parseJson, projectNames, readState, writeState, ask, interactive, fail } from "./wrangler-run.mjs";

const say = (line) => console.error(`deploy: ${line}`);
const secretPattern = /^[A-Za-z0-9_-]{32,256}$/;
const generate = () => crypto.randomBytes(32).toString("base64url"); // 43 characters

const NOT_LOGGED_IN = "you are not logged in to Cloudflare. Run `npx wrangler login` (or set CLOUDFLARE_API_TOKEN to an API token with the \"Edit Cloudflare Workers\" template and D1 edit rights), then `npm run deploy` again.";

/** Step 1: the login, by listing the D1 databases (needed anyway). */
async function databases() {
  const r = await wrangler(["d1", "list", "--json"]);
  if (r.code === 0) return parseJson(r.stdout);
  const who = await wrangler(["whoami", "--json"]);
  let loggedIn = false;
  try {
    loggedIn = who.code === 0 && parseJson(who.stdout).loggedIn === true;
  } catch {
    loggedIn = false;
  }
  if (!loggedIn) fail(NOT_LOGGED_IN);
  fail(`could not list your D1 databases: ${wranglerError(r)}`);
}

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

/** Step 3: does the worker exist, which secrets has it, and is it this bot? */
async function worker(name, state) {
  const r = await wrangler(["secret", "list", "--name", name, "--format", "json"]);
  if (r.code !== 0) {
    if (/not found/i.test(r.output) && /Worker/.test(r.output)) return { exists: false, secrets: new Set() };
    fail(`could not read the worker ${name}: ${wranglerError(r)}`);
  }
  const secrets = new Set(parseJson(r.stdout).map((s) => s.name));
  if (state.WORKER_NAME !== name) {
    // Not deployed from here before: make sure it is this bot before replacing it.
    const d = await wrangler(["deployments", "status", "--name", name, "--json"]);
    // A worker with no deployment is a draft (secrets put before any upload): nothing to lose.
    if (d.code !== 0 && !/has no deployments/i.test(d.output)) fail(`could not read the worker ${name}: ${wranglerError(d)}`);
    if (d.code === 0) {
      const versions = parseJson(d.stdout).versions ?? [];
      const current = [...versions].sort((a, b) => b.percentage - a.percentage)[0]?.version_id;
      const v = current ? await wrangler(["versions", "view", current, "--name", name, "--json"]) : { code: 1, output: "no version" };
      if (v.code !== 0) fail(`could not read the worker ${name}: ${wranglerError(v)}`);
      const bindings = parseJson(v.stdout).resources?.bindings ?? [];
      const ours = bindings.some((b) => b.type === "durable_object_namespace" && b.class_name === "ChatObject");
      if (!ours) {
        fail(`a worker named "${name}" already exists in your Cloudflare account and it is not this bot (it has no ChatObject Durable Object); deploying would replace it. Deploy under another name: WORKER_NAME=${name}-bot npm run deploy (or delete that worker first).`);
      }
    }
  }
  return { exists: true, secrets };
}

/** Step 4: the values of the secrets the worker lacks (asked, taken or generated). */
async function secretsToPut(existing, state, token) {
  const put = {};
  const generated = [];
  if (!existing.has("TELEGRAM_BOT_TOKEN") || state.TELEGRAM_BOT_TOKEN !== token) put.TELEGRAM_BOT_TOKEN = token;
  if (!existing.has("GEMINI_API_KEY")) {
    let key = process.env.GEMINI_API_KEY;
    if (!key && interactive()) key = await ask("Gemini API key (https://aistudio.google.com/apikey): ", { hidden: true });
    if (!key) fail("GEMINI_API_KEY is not set. Get a key at https://aistudio.google.com/apikey and run: GEMINI_API_KEY=... npm run deploy");
    put.GEMINI_API_KEY = key;
  }
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

/** Step 5 and 6: the database exists and its migrations are applied. */
async function database(list, dbName) {
  if (list.some((d) => d.name === dbName)) {
    say(`database ${dbName}: exists`);
  } else {
    const c = await wrangler(["d1", "create", dbName]);
    if (c.code !== 0) fail(`could not create the D1 database ${dbName}: ${wranglerError(c)}`);
    say(`database ${dbName}: created`);
  }
  const m = await wrangler(["d1", "migrations", "apply", "DB", "--remote"], { env: { CI: "true" } });
  if (m.code !== 0) {
    fail(`a migration failed on the remote database, so nothing was deployed:\n${wranglerError(m)}\nFix the migration (migrations/), then run npm run deploy again; migrations already applied are not applied twice.`);
  }
  const applied = /No migrations to apply/i.test(m.output) ? "up to date" : "applied";
  say(`migrations: ${applied}`);
}

/** Step 7: wrangler deploy (queues provisioned by name), then the missing secrets. */
async function deployWorker(name, tomlName, put) {
  const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "edge-agent-deploy-")), "output.json");
  const args = ["deploy"];
  if (name !== tomlName) args.push("--name", name);
  say(`worker ${name}: building and uploading (the first build compiles the Rust worker: several minutes)...`);
  const d = await wrangler(args, { env: { WRANGLER_OUTPUT_FILE_PATH: out } });
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
    if (/queue/i.test(error) && /(limit|maximum|quota)/i.test(error)) {
      fail(`Cloudflare refused to create a queue: your account is at its queue limit.\n${error}\nDelete queues you no longer use (npx wrangler queues list, npx wrangler queues delete <name>) or raise the limit (Workers Paid), then run npm run deploy again. The database is ready; nothing was uploaded.`);
    }
    fail(`wrangler deploy failed:\n${error}`);
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

async function main() {
  const names = projectNames();
  const state = readState();
  const name = process.env.WORKER_NAME || state.WORKER_NAME || names.worker;
  const apiBase = process.env.TELEGRAM_API_BASE || "https://api.telegram.org";

  const list = await databases();
  const { token, me } = await botToken(state, apiBase);
  say(`bot @${me.username}: token accepted by Telegram`);
  const w = await worker(name, state);
  const s = await secretsToPut(w.secrets, state, token);
  // Kept before anything is created, so a failure later never loses a generated value.
  writeState({ ...state, TELEGRAM_BOT_TOKEN: token, TELEGRAM_WEBHOOK_SECRET: s.webhookSecret, ADMIN_TOKEN: s.adminToken ?? state.ADMIN_TOKEN });

  await database(list, names.database);
  const url = await deployWorker(name, names.worker, s.put);
  writeState({ ...readState(), WORKER_NAME: name, WORKER_URL: url });
  // Shown as soon as the worker has it (once: a later run finds it set and keeps it).
  if (s.generated.includes("ADMIN_TOKEN")) {
    console.log(`Admin token for the admin API (shown once; also in ${path.basename(process.env.DEPLOY_VARS_FILE || ".deploy.vars")}): ${s.adminToken}`);
  }

  let registered;
  try {
    registered = await registerWebhook({
      workerUrl: url,
      token,
      secret: s.webhookSecret,
      apiBase,
      probeOrigin: process.env.DEPLOY_WORKER_ORIGIN,
      waitMs: Number(process.env.DEPLOY_HEALTH_WAIT_MS ?? 90_000),
      log: say,
    });
  } catch (e) {
    if (e instanceof ScriptError && e.method === "setWebhook") {
      fail(`Telegram refused the webhook URL ${url}/telegram/webhook: ${e.description}. The worker is deployed and its secrets are set; a new workers.dev name can take a few minutes to be reachable, so run npm run deploy again in a minute (only the webhook is left to do).`);
    }
    throw e;
  }
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
  if (!(e instanceof ScriptError)) throw e;
  console.error(`deploy: ${e.message}`);
  process.exit(1);
}
