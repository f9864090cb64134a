#!/usr/bin/env node
// npm run destroy: takes the bot off Cloudflare. Removes the webhook (so Telegram stops
// delivering), the worker, and its queues; the D1 database (every conversation) only with
// --delete-database. It touches only what it can show is that worker's: the database and queues
// it is bound to, else those this checkout's deploy recorded (a resource merely named after the
// worker is left alone), none that another worker uses, and the webhook only when it points at
// the worker's address. Asks for confirmation on a terminal; without one, needs --yes.
//
//   npm run destroy
//   npm run destroy -- --yes [--delete-database]
//   WORKER_NAME=x npm run destroy -- --yes
import { telegramApi, ScriptError } from "./webhook.mjs";
import { wrangler, wranglerError, projectNames, readState, writeState, ask, interactive, fail } from "./wrangler-run.mjs";
import { ApiError, connect, accountState, scriptBindings, bindingsByResource } from "./cloudflare-api.mjs";
import { resourceNames, boundResources, isThisProject, recordedBotId, queueUser } from "./deploy-plan.mjs";

const say = (line) => console.error(`destroy: ${line}`);

/**
 * The worker's own resources, and which of them another worker uses (left alone). A worker
 * that is not this project's, or that serves another bot than the one this checkout knows
 * (`botId`, from its token), is not touched.
 */
async function owned(api, account, name, state, botId) {
  const exists = account.scripts.some((s) => (s.id ?? s.name) === name);
  const bindings = exists ? await scriptBindings(api, name) : [];
  if (exists && !isThisProject(bindings)) fail(`the worker "${name}" is not this bot (it has no ChatObject Durable Object); nothing was removed.`);
  const recordedBot = recordedBotId(bindings);
  if (botId && recordedBot && recordedBot !== botId) {
    fail(`the worker "${name}" serves another bot (id ${recordedBot}) than the one this checkout knows (id ${botId}); nothing was removed. Run npm run destroy from the checkout that deployed it, or with that bot's TELEGRAM_BOT_TOKEN.`);
  }
  const bound = boundResources(bindings, account.databases);
  // This checkout's record: its deploy's (WORKER_NAME), or what an earlier destroy of that
  // worker left of it (DESTROYED_WORKER: the database kept, say).
  const ours = state.WORKER_NAME === name || (!state.WORKER_NAME && state.DESTROYED_WORKER === name);
  const recorded = ours && state.DATABASE_NAME ? { database: state.DATABASE_NAME, jobs: state.JOBS_QUEUE, dead: state.DEAD_LETTER_QUEUE } : {};
  const fresh = resourceNames(name);
  const r = {
    database: bound?.database ?? recorded.database ?? fresh.database,
    jobs: bound?.jobs ?? recorded.jobs ?? fresh.jobs,
    dead: bound?.dead ?? recorded.dead ?? fresh.dead,
  };
  // Shown to be this bot's: bound to its worker (checked above), or recorded by this
  // checkout's deploy. A name that only matches the worker's is someone else's until shown.
  const unproven = new Set(["database", "jobs", "dead"].filter((k) => !bound?.[k] && !recorded[k]).map((k) => r[k]));
  const others = await bindingsByResource(api, account.scripts, name);
  const shared = new Map();
  for (const queue of [r.jobs, r.dead]) {
    const user = queueUser(queue, account.queues, others, name);
    if (user) shared.set(queue, user);
  }
  const db = account.databases.find((d) => d.name === r.database);
  if (db && others.database.has(db.uuid)) shared.set(r.database, others.database.get(db.uuid));
  return { ...r, shared, unproven, exists };
}

/** The worker's own address, as far as it can be shown: the one this checkout's deploy
 *  recorded, else https://<worker>.<account's workers.dev subdomain> while the worker exists. */
async function workerUrl(api, name, state, exists) {
  if (state.WORKER_NAME === name && state.WORKER_URL) return state.WORKER_URL;
  if (!exists) return null;
  try {
    const { subdomain } = await api.get(`${api.a}/workers/subdomain`);
    return subdomain ? `https://${name}.${subdomain}.workers.dev` : null;
  } catch (e) {
    if (e instanceof ApiError) return null;
    throw e;
  }
}

/** Removes the bot's webhook only when it points at this worker. */
async function removeWebhook(token, url) {
  if (!token) {
    say("webhook: no bot token known here (TELEGRAM_BOT_TOKEN or .deploy.vars); remove it later with TELEGRAM_BOT_TOKEN=... npm run webhook:delete");
    return;
  }
  const telegram = telegramApi({ token, apiBase: process.env.TELEGRAM_API_BASE || "https://api.telegram.org" });
  const info = await telegram.call("getWebhookInfo");
  if (!info.url) say("webhook: none set");
  else if (!url) say(`webhook: left alone, this checkout cannot show it is this worker's (it points at ${new URL(info.url).origin}); npm run webhook:delete removes it`);
  else if (!info.url.startsWith(url)) say(`webhook: left alone, it points elsewhere (${new URL(info.url).origin})`);
  else {
    await telegram.call("deleteWebhook", {});
    say("webhook: removed");
  }
}

async function main(args) {
  const names = projectNames();
  const state = readState();
  const name = process.env.WORKER_NAME || state.WORKER_NAME || names.worker;
  const deleteDatabase = args.includes("--delete-database");
  const unknown = args.filter((a) => !["--yes", "-y", "--delete-database"].includes(a));
  if (unknown.length) fail(`unknown option ${unknown[0]} (use --yes, --delete-database)`);

  const token = process.env.TELEGRAM_BOT_TOKEN || state.TELEGRAM_BOT_TOKEN;
  const api = await connect();
  const account = await accountState(api);
  const r = await owned(api, account, name, state, token?.split(":")[0]);
  const ours = (resource) => !r.shared.has(resource) && !r.unproven.has(resource);
  const queues = [r.jobs, r.dead].filter(ours);
  const what = [`the webhook`, `the worker ${name}`];
  if (queues.length) what.push(`the queues ${queues.join(", ")}`);
  if (deleteDatabase && ours(r.database)) what.push(`the D1 database ${r.database} (every conversation and memory, for good)`);
  if (!args.includes("--yes") && !args.includes("-y")) {
    if (!interactive()) fail(`this removes ${what.join(", ")}. Run npm run destroy -- --yes to confirm without a terminal.`);
    const answer = await ask(`This removes ${what.join(", ")}.\nType the worker's name (${name}) to go ahead: `);
    if (answer !== name) fail("not confirmed; nothing was removed.");
  }

  // The webhook first: Telegram stops delivering before the worker goes.
  await removeWebhook(token, await workerUrl(api, name, state, r.exists));

  const d = await wrangler(["delete", "--name", name, "--force"]);
  if (d.code !== 0) {
    if (/does not exist|not found/i.test(d.output)) say(`worker ${name}: already gone`);
    else fail(`could not delete the worker ${name}: ${wranglerError(d)}`);
  } else say(`worker ${name}: deleted`);

  for (const [resource, user] of r.shared) say(`${resource}: left alone, the worker ${user} uses it`);
  for (const resource of r.unproven) {
    const present = account.databases.some((d) => d.name === resource) || account.queues.some((q) => q.queue_name === resource);
    if (present && !r.shared.has(resource) && (resource !== r.database || deleteDatabase)) {
      say(`${resource}: left alone, nothing shows it is this bot's (no worker ${name} binds it and this checkout's deploy did not record it)`);
    }
  }
  for (const queue of queues) {
    const q = await wrangler(["queues", "delete", queue]);
    if (q.code !== 0) {
      if (/does not exist|not found/i.test(q.output)) say(`queue ${queue}: already gone`);
      else fail(`could not delete the queue ${queue}: ${wranglerError(q)}`);
    } else say(`queue ${queue}: deleted`);
  }

  if (deleteDatabase && ours(r.database)) {
    const x = await wrangler(["d1", "delete", r.database, "-y"]);
    if (x.code !== 0) {
      if (/couldn't find|not found/i.test(x.output)) say(`database ${r.database}: already gone`);
      else fail(`could not delete the database ${r.database}: ${wranglerError(x)}`);
    } else say(`database ${r.database}: deleted`);
  } else if (ours(r.database)) {
    say(`database ${r.database}: kept (your conversations). npm run destroy -- --delete-database removes it too.`);
  }
  if (state.WORKER_NAME === name || !state.WORKER_NAME) {
    const { WORKER_NAME, WORKER_URL, ...rest } = state;
    void WORKER_NAME;
    void WORKER_URL;
    writeState({ ...rest, DESTROYED_WORKER: name });
  }
  console.log(`Removed ${name}. npm run deploy brings it back${deleteDatabase ? " (with an empty database)" : " with its database as it was"}.`);
}

try {
  await main(process.argv.slice(2));
} catch (e) {
  if (e instanceof ApiError) {
    console.error(`destroy: the Cloudflare API refused ${e.where}: ${e.message}`);
    process.exit(1);
  }
  if (!(e instanceof ScriptError)) throw e;
  console.error(`destroy: ${e.message}`);
  process.exit(1);
}
