#!/usr/bin/env node
// npm run destroy: takes the bot off Cloudflare. Removes the webhook (so Telegram stops
// delivering), the worker, and its queues; the D1 database (every conversation) only with
// --delete-database. Asks for confirmation on a terminal; without one, needs --yes.
//
//   npm run destroy
//   npm run destroy -- --yes [--delete-database]
import { telegramApi, ScriptError } from "./webhook.mjs";
import { wrangler, wranglerError, projectNames, readState, writeState, ask, interactive, fail } from "./wrangler-run.mjs";

const say = (line) => console.error(`destroy: ${line}`);

async function main(args) {
  const names = projectNames();
  const state = readState();
  const name = process.env.WORKER_NAME || state.WORKER_NAME || names.worker;
  const deleteDatabase = args.includes("--delete-database");
  const unknown = args.filter((a) => !["--yes", "-y", "--delete-database"].includes(a));
  if (unknown.length) fail(`unknown option ${unknown[0]} (use --yes, --delete-database)`);

  const what = [`the webhook`, `the worker ${name}`, `the queues ${names.queues.join(", ")}`];
  if (deleteDatabase) what.push(`the D1 database ${names.database} (every conversation and memory, for good)`);
  if (!args.includes("--yes") && !args.includes("-y")) {
    if (!interactive()) fail(`this removes ${what.join(", ")}. Run npm run destroy -- --yes to confirm without a terminal.`);
    const answer = await ask(`This removes ${what.join(", ")}.\nType the worker's name (${name}) to go ahead: `);
    if (answer !== name) fail("not confirmed; nothing was removed.");
  }

  // The webhook first: Telegram stops delivering before the worker goes.
  const token = process.env.TELEGRAM_BOT_TOKEN || state.TELEGRAM_BOT_TOKEN;
  if (token) {
    const telegram = telegramApi({ token, apiBase: process.env.TELEGRAM_API_BASE || "https://api.telegram.org" });
    const info = await telegram.call("getWebhookInfo");
    if (!info.url) say("webhook: none set");
    else if (state.WORKER_URL && !info.url.startsWith(state.WORKER_URL)) say(`webhook: left alone, it points elsewhere (${new URL(info.url).origin})`);
    else {
      await telegram.call("deleteWebhook", {});
      say("webhook: removed");
    }
  } else {
    say("webhook: no bot token known here (TELEGRAM_BOT_TOKEN or .deploy.vars); remove it later with TELEGRAM_BOT_TOKEN=... npm run webhook:delete");
  }

  const d = await wrangler(["delete", "--name", name, "--force"]);
  if (d.code !== 0) {
    if (/does not exist|not found/i.test(d.output)) say(`worker ${name}: already gone`);
    else fail(`could not delete the worker ${name}: ${wranglerError(d)}`);
  } else say(`worker ${name}: deleted`);

  for (const queue of names.queues) {
    const q = await wrangler(["queues", "delete", queue]);
    if (q.code !== 0) {
      if (/does not exist|not found/i.test(q.output)) say(`queue ${queue}: already gone`);
      else fail(`could not delete the queue ${queue}: ${wranglerError(q)}`);
    } else say(`queue ${queue}: deleted`);
  }

  if (deleteDatabase) {
    const r = await wrangler(["d1", "delete", names.database, "-y"]);
    if (r.code !== 0) {
      if (/couldn't find|not found/i.test(r.output)) say(`database ${names.database}: already gone`);
      else fail(`could not delete the database ${names.database}: ${wranglerError(r)}`);
    } else say(`database ${names.database}: deleted`);
  } else {
    say(`database ${names.database}: kept (your conversations). npm run destroy -- --delete-database removes it too.`);
  }
  const { WORKER_NAME, WORKER_URL, ...rest } = state;
  void WORKER_NAME;
  void WORKER_URL;
  writeState(rest);
  console.log(`Removed ${name}. npm run deploy brings it back${deleteDatabase ? " (with an empty database)" : " with its database as it was"}.`);
}

try {
  await main(process.argv.slice(2));
} catch (e) {
  if (!(e instanceof ScriptError)) throw e;
  console.error(`destroy: ${e.message}`);
  process.exit(1);
}
