#!/usr/bin/env node
// Registers the bot's webhook with Telegram, and shows or deletes it.
//
//   npm run webhook:set -- https://edge-agent.<you>.workers.dev [--drop-pending]
//   npm run webhook:info
//   npm run webhook:delete [-- --drop-pending]
//
// Reads TELEGRAM_BOT_TOKEN and TELEGRAM_WEBHOOK_SECRET from the environment, else from
// .dev.vars. `set` checks that the worker answers /health, that Telegram accepts the token,
// then calls setWebhook (with the secret and allowed_updates including message_reaction) and
// setMyCommands (the menu the worker publishes at /telegram/commands).
import path from "node:path";
import { fileURLToPath } from "node:url";
import { readVars } from "../tools/util.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const ALLOWED_UPDATES = ["message", "edited_message", "message_reaction", "my_chat_member"];

function fail(message) {
  console.error(`webhook: ${message}`);
  process.exit(1);
}


const devVars = readVars(path.join(root, ".dev.vars"));
const deployVars = readVars(path.join(root, ".deploy.vars")); // written by scripts/deploy.sh
const setting = (name) => process.env[name] || deployVars[name] || devVars[name] || "";
const token = setting("TELEGRAM_BOT_TOKEN");
const secret = setting("TELEGRAM_WEBHOOK_SECRET");
const apiBase = (process.env.TELEGRAM_API_BASE || "https://api.telegram.org").replace(/\/$/, "");

async function telegram(method, body = {}) {
  let res;
  try {
    res = await fetch(`${apiBase}/bot${token}/${method}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(20_000),
    });
  } catch (e) {
    fail(`could not reach the Telegram Bot API (${apiBase}): ${e.cause?.code ?? e.message}`);
  }
  const json = await res.json().catch(() => ({ ok: false, description: `HTTP ${res.status}` }));
  if (!json.ok) {
    if (res.status === 401 || res.status === 404) {
      fail(`Telegram rejected the bot token (${json.description ?? res.status}). Check TELEGRAM_BOT_TOKEN: it is the token @BotFather gave you, like 123456789:AA...`);
    }
    fail(`Telegram refused ${method}: ${json.description ?? `HTTP ${res.status}`}`);
  }
  return json.result;
}

async function set(args) {
  const target = args.find((a) => !a.startsWith("--"));
  if (!target) fail("give the worker's URL: npm run webhook:set -- https://edge-agent.<you>.workers.dev");
  let url;
  try {
    url = new URL(target);
  } catch {
    fail(`not a URL: ${target}`);
  }
  if (url.protocol !== "https:" && !args.includes("--allow-http")) {
    fail(`Telegram only delivers webhooks over HTTPS; ${url.origin} is not (use the workers.dev URL wrangler deploy printed)`);
  }
  if (url.pathname === "/" || url.pathname === "") url.pathname = "/telegram/webhook";
  if (!secret) fail("TELEGRAM_WEBHOOK_SECRET is not set (the same value you gave wrangler secret put)");
  if (!/^[A-Za-z0-9_-]{1,256}$/.test(secret)) fail("TELEGRAM_WEBHOOK_SECRET may only contain A-Z a-z 0-9 _ - (1 to 256 characters)");
  if (!token) fail("TELEGRAM_BOT_TOKEN is not set");

  let health;
  try {
    const r = await fetch(new URL("/health", url), { signal: AbortSignal.timeout(15_000) });
    health = await r.json();
    if (!r.ok || !health.ok) throw new Error(`HTTP ${r.status}`);
  } catch (e) {
    fail(`could not reach the worker at ${new URL("/health", url)} (${e.cause?.code ?? e.message}). Is it deployed (npm run deploy) and is the URL right?`);
  }
  const me = await telegram("getMe");
  await telegram("setWebhook", {
    url: url.href,
    secret_token: secret,
    allowed_updates: ALLOWED_UPDATES,
    drop_pending_updates: args.includes("--drop-pending"),
    max_connections: 40,
  });
  let commands = [];
  try {
    const r = await fetch(new URL("/telegram/commands", url), { signal: AbortSignal.timeout(15_000) });
    commands = await r.json();
  } catch (e) {
    console.error(`webhook: the command menu could not be read from the worker (${e.message}); skipping setMyCommands`);
  }
  if (commands.length) await telegram("setMyCommands", { commands });
  console.log(`Webhook set: @${me.username} → ${url.href}`);
  console.log(`Updates: ${ALLOWED_UPDATES.join(", ")}; ${commands.length} commands in the menu; worker ${health.name} ${health.version}.`);
}

async function info() {
  if (!token) fail("TELEGRAM_BOT_TOKEN is not set");
  const i = await telegram("getWebhookInfo");
  console.log(JSON.stringify(i, null, 2));
  if (!i.url) console.log("No webhook is set.");
  if (i.last_error_message) console.log(`Last delivery error: ${i.last_error_message}`);
}

async function remove(args) {
  if (!token) fail("TELEGRAM_BOT_TOKEN is not set");
  await telegram("deleteWebhook", { drop_pending_updates: args.includes("--drop-pending") });
  console.log("Webhook deleted.");
}

const [command, ...rest] = process.argv.slice(2);
const commands = { set, info, delete: remove };
if (!commands[command]) fail("usage: webhook.mjs set <worker-url> [--drop-pending] | info | delete [--drop-pending]");
await commands[command](rest);
