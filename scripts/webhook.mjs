#!/usr/bin/env node
// Registers the bot's webhook with Telegram, and shows or deletes it.
//
//   npm run webhook:set -- https://edge-agent.<you>.workers.dev [--drop-pending]
//   npm run webhook:info
//   npm run webhook:delete [-- --drop-pending]
//
// Reads TELEGRAM_BOT_TOKEN and TELEGRAM_WEBHOOK_SECRET from the environment, else from
// .deploy.vars (written by npm run deploy), else from .dev.vars. `set` checks that the worker
// answers /health, that Telegram accepts the token, then calls setWebhook (with the secret and
// allowed_updates including message_reaction), setChatMenuButton (the Mini App at /app) and setMyCommands (the menu the worker
// publishes at /telegram/commands).
//
// scripts/deploy.mjs and scripts/destroy.mjs use the same functions (exported below). The
// bot token only ever appears in the Bot API URL's path, which is never printed.
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { readVars } from "../tools/util.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const ALLOWED_UPDATES = ["message", "edited_message", "message_reaction", "my_chat_member", "stopped_message_generation", "guest_message", "business_connection", "business_message", "edited_business_message", "deleted_business_messages", "callback_query"];

/** A failure with a message meant for the person running the script. */
export class ScriptError extends Error {}

const fail = (message) => {
  throw new ScriptError(message);
};

/** Says what a failed fetch was (never the URL: it may hold the bot token). */
const reason = (e) => e.cause?.code ?? e.cause?.message ?? e.message;

/** A Bot API client: `call(method, body)` returns the result or throws a ScriptError. */
export function telegramApi({ token, apiBase = "https://api.telegram.org" }) {
  const base = apiBase.replace(/\/$/, "");
  async function call(method, body = {}) {
    let res;
    try {
      res = await fetch(`${base}/bot${token}/${method}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(20_000),
      });
    } catch (e) {
      fail(`could not reach the Telegram Bot API (${base}): ${reason(e)}`);
    }
    const json = await res.json().catch(() => ({ ok: false, description: `HTTP ${res.status}` }));
    if (!json.ok) {
      if (res.status === 401 || res.status === 404) {
        const e = new ScriptError(`Telegram rejected the bot token (${json.description ?? res.status}). Check TELEGRAM_BOT_TOKEN: it is the token @BotFather gave you, like 123456789:AA...`);
        e.unauthorized = true;
        throw e;
      }
      const e = new ScriptError(`Telegram refused ${method}: ${json.description ?? `HTTP ${res.status}`}`);
      e.method = method;
      e.description = json.description ?? `HTTP ${res.status}`;
      throw e;
    }
    return json.result;
  }
  return { call };
}

/** GETs a JSON path of the worker (`origin` may stand in for the worker URL's origin). */
async function workerJson(url, pathname, origin) {
  const target = new URL(pathname, origin ?? url);
  const r = await fetch(target, { signal: AbortSignal.timeout(15_000) });
  const body = await r.json();
  if (!r.ok) throw new Error(`HTTP ${r.status}`);
  return body;
}

/**
 * Registers the webhook: checks the worker answers /health (retrying for `waitMs`, as a new
 * workers.dev name can take a moment to resolve), that Telegram accepts the token, then
 * setWebhook with the secret and setMyCommands with the worker's menu. `probeOrigin` reaches
 * the worker somewhere else than its public URL (tests). Returns {me, health, commands, url}.
 */
export async function registerWebhook({ workerUrl, token, secret, apiBase, dropPending = false, allowHttp = false, probeOrigin, waitMs = 0, log = () => {} }) {
  let url;
  try {
    url = new URL(workerUrl);
  } catch {
    fail(`not a URL: ${workerUrl}`);
  }
  if (url.protocol !== "https:" && !allowHttp) {
    fail(`Telegram only delivers webhooks over HTTPS; ${url.origin} is not (use the workers.dev URL wrangler deploy printed)`);
  }
  if (url.pathname === "/" || url.pathname === "") url.pathname = "/telegram/webhook";
  if (!secret) fail("TELEGRAM_WEBHOOK_SECRET is not set (the same value you gave wrangler secret put)");
  if (!/^[A-Za-z0-9_-]{1,256}$/.test(secret)) fail("TELEGRAM_WEBHOOK_SECRET may only contain A-Z a-z 0-9 _ - (1 to 256 characters)");
  if (!token) fail("TELEGRAM_BOT_TOKEN is not set");

  const healthUrl = new URL("/health", url);
  const deadline = Date.now() + waitMs;
  let health;
  for (let attempt = 0; ; attempt++) {
    try {
      health = await workerJson(url, "/health", probeOrigin);
      if (!health.ok) throw new Error("it did not answer ok");
      break;
    } catch (e) {
      if (Date.now() >= deadline) {
        const error = new ScriptError(`could not reach the worker at ${healthUrl} (${reason(e)}). Is it deployed (npm run deploy) and is the URL right? A new workers.dev name can take a few minutes to be reachable: try again in a minute.`);
        error.method = "health";
        error.description = reason(e);
        throw error;
      }
      if (attempt === 0) log(`waiting for ${healthUrl.origin} to answer (a new workers.dev name can take a minute)...`);
      await new Promise((r) => setTimeout(r, 3000));
    }
  }
  const telegram = telegramApi({ token, apiBase });
  const me = await telegram.call("getMe");
  await telegram.call("setWebhook", {
    url: url.href,
    secret_token: secret,
    allowed_updates: ALLOWED_UPDATES,
    drop_pending_updates: dropPending,
    max_connections: 40,
  });
  let commands = [];
  try {
    commands = await workerJson(url, "/telegram/commands", probeOrigin);
  } catch (e) {
    log(`the command menu could not be read from the worker (${reason(e)}); skipping setMyCommands`);
  }
  if (commands.length) await telegram.call("setMyCommands", { commands });
  // The menu button opens the Mini App the worker serves at /app (Telegram takes only HTTPS
  // Web App URLs; a local http worker keeps the default menu).
  let menuButton = null;
  if (url.protocol === "https:") {
    menuButton = { type: "web_app", text: "Memories", web_app: { url: new URL("/app", url).href } };
    await telegram.call("setChatMenuButton", { menu_button: menuButton });
  }
  return { me, health, commands, url, menuButton };
}

// --- the command line -------------------------------------------------------------------

function settings() {
  const devVars = readVars(path.join(root, ".dev.vars"));
  const deployVars = readVars(process.env.DEPLOY_VARS_FILE || path.join(root, ".deploy.vars"));
  const setting = (name) => process.env[name] || deployVars[name] || devVars[name] || "";
  return {
    token: setting("TELEGRAM_BOT_TOKEN"),
    secret: setting("TELEGRAM_WEBHOOK_SECRET"),
    apiBase: process.env.TELEGRAM_API_BASE || "https://api.telegram.org",
  };
}

async function set(args) {
  const target = args.find((a) => !a.startsWith("--"));
  if (!target) fail("give the worker's URL: npm run webhook:set -- https://edge-agent.<you>.workers.dev");
  const { token, secret, apiBase } = settings();
  const { me, health, commands, url } = await registerWebhook({
    workerUrl: target,
    token,
    secret,
    apiBase,
    dropPending: args.includes("--drop-pending"),
    allowHttp: args.includes("--allow-http"),
    log: (l) => console.error(`webhook: ${l}`),
  });
  console.log(`Webhook set: @${me.username} → ${url.href}`);
  console.log(`Updates: ${ALLOWED_UPDATES.join(", ")}; ${commands.length} commands in the menu; worker ${health.name} ${health.version}.`);
}

async function info() {
  const { token, apiBase } = settings();
  if (!token) fail("TELEGRAM_BOT_TOKEN is not set");
  const i = await telegramApi({ token, apiBase }).call("getWebhookInfo");
  console.log(JSON.stringify(i, null, 2));
  if (!i.url) console.log("No webhook is set.");
  if (i.last_error_message) console.log(`Last delivery error: ${i.last_error_message}`);
}

async function remove(args) {
  const { token, apiBase } = settings();
  if (!token) fail("TELEGRAM_BOT_TOKEN is not set");
  await telegramApi({ token, apiBase }).call("deleteWebhook", { drop_pending_updates: args.includes("--drop-pending") });
  console.log("Webhook deleted.");
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const [command, ...rest] = process.argv.slice(2);
  const commands = { set, info, delete: remove };
  try {
    if (!commands[command]) fail("usage: webhook.mjs set <worker-url> [--drop-pending] | info | delete [--drop-pending]");
    await commands[command](rest);
  } catch (e) {
    if (!(e instanceof ScriptError)) throw e;
    console.error(`webhook: ${e.message}`);
    process.exit(1);
  }
}
