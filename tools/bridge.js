#!/usr/bin/env node
// Bridges a real Telegram bot to the local worker with no public URL (`npm run dev --
// --telegram`): long-polls getUpdates with the real token and forwards every update to the
// local webhook with the secret, confirming an update only after the worker accepted it.
//
// Telegram refuses getUpdates while a webhook is set; the bridge says so (delete it with
// `npm run webhook:delete`, set it again after).
import path from "node:path";
import { fileURLToPath } from "node:url";
import { readVars } from "./util.js";
import { ALLOWED_UPDATES } from "../scripts/webhook.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");


export async function runBridge({ token, secret, workerUrl, apiBase = "https://api.telegram.org", signal, log = console.log }) {
  let offset = 0;
  const call = async (method, body) => {
    const res = await fetch(`${apiBase}/bot${token}/${method}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal,
    });
    const json = await res.json();
    if (!json.ok) {
      if (res.status === 401 || res.status === 404) throw new Error("Telegram rejected the bot token: put the real one in .dev.vars (TELEGRAM_BOT_TOKEN)");
      if (res.status === 409) throw new Error("a webhook is set for this bot, so Telegram refuses getUpdates: run `npm run webhook:delete` first");
      throw new Error(`${method}: ${json.description}`);
    }
    return json.result;
  };
  const me = await call("getMe", {});
  log(`bridge: @${me.username} → ${workerUrl}/telegram/webhook (send it a message in Telegram)`);
  while (!signal?.aborted) {
    let updates;
    try {
      updates = await call("getUpdates", { offset, timeout: 25, allowed_updates: ALLOWED_UPDATES });
    } catch (e) {
      if (signal?.aborted) return;
      if (/webhook|token/.test(e.message)) throw e;
      log(`bridge: ${e.message}; retrying in 3 s`);
      await new Promise((r) => setTimeout(r, 3000));
      continue;
    }
    for (const update of updates) {
      for (;;) {
        try {
          const res = await fetch(`${workerUrl}/telegram/webhook`, {
            method: "POST",
            headers: { "content-type": "application/json", "X-Telegram-Bot-Api-Secret-Token": secret },
            body: JSON.stringify(update),
          });
          if (res.ok) break;
          log(`bridge: the worker answered ${res.status}; retrying`);
        } catch (e) {
          log(`bridge: the worker is not reachable (${e.cause?.code ?? e.message}); retrying`);
        }
        await new Promise((r) => setTimeout(r, 2000));
      }
      offset = update.update_id + 1;
    }
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const vars = readVars(path.join(root, ".dev.vars"));
  runBridge({
    token: vars.TELEGRAM_BOT_TOKEN ?? "",
    secret: vars.TELEGRAM_WEBHOOK_SECRET ?? "",
    workerUrl: process.env.WORKER_URL ?? "http://127.0.0.1:8787",
  }).catch((e) => {
    console.error(`bridge: ${e.message}`);
    process.exit(1);
  });
}
