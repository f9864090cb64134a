// npm run webhook:set / webhook:info / webhook:delete against the fake Telegram and the
// worker: the right setWebhook and setMyCommands calls, and clear errors for a wrong token or
// an unreachable worker.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import path from "node:path";
import { startStack, TOKEN, WEBHOOK_SECRET, ROOT } from "../support/stack.js";

let s;
before(async () => {
  s = await startStack();
});
after(async () => {
  await s?.close();
});

function run(args, env = {}) {
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(ROOT, "scripts/webhook.mjs"), ...args], {
      cwd: "/",
      env: { PATH: process.env.PATH, TELEGRAM_API_BASE: s.tg.base, TELEGRAM_BOT_TOKEN: TOKEN, TELEGRAM_WEBHOOK_SECRET: WEBHOOK_SECRET, ...env },
    }, (error, stdout, stderr) => resolve({ code: error?.code ?? 0, stdout, stderr }));
  });
}

test("set registers the webhook with the secret, reactions included, and the command menu", async () => {
  const r = await run(["set", s.url.origin, "--allow-http"]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /Webhook set: @edge_test_bot → http:\/\/127\.0\.0\.1:\d+\/telegram\/webhook/);
  assert.equal(s.tg.webhook.url, `${s.url.origin}/telegram/webhook`);
  assert.equal(s.tg.webhook.secret_token, WEBHOOK_SECRET);
  assert.ok(s.tg.webhook.allowed_updates.includes("message_reaction"));
  assert.ok(s.tg.webhook.allowed_updates.includes("stopped_message_generation"), "Telegram's Stop presses come to the bot");
  assert.ok(s.tg.webhook.allowed_updates.includes("guest_message"), "guest mode's summons come to the bot");
  assert.deepEqual(s.tg.commands.map((c) => c.command), ["new", "status", "memory", "forget", "usage", "reminders", "cancel", "rich", "whoami", "help"]);
  assert.deepEqual(s.tg.commands.filter((c) => c.is_ephemeral).map((c) => c.command), ["memory", "forget", "usage", "reminders", "rich", "whoami"], "private answers are marked ephemeral");
  const info = await run(["info"]);
  assert.match(info.stdout, /"url": "http:\/\/127\.0\.0\.1/);
  const del = await run(["delete"]);
  assert.equal(del.code, 0);
  assert.equal(s.tg.webhook.url, "");
});

test("clear errors: wrong token, unreachable worker, plain http, bad secret", async () => {
  const wrong = await run(["set", s.url.origin, "--allow-http"], { TELEGRAM_BOT_TOKEN: "123:wrong" });
  assert.equal(wrong.code, 1);
  assert.match(wrong.stderr, /Telegram rejected the bot token .*@BotFather/);
  const unreachable = await run(["set", "http://127.0.0.1:9", "--allow-http"]);
  assert.equal(unreachable.code, 1);
  assert.match(unreachable.stderr, /could not reach the worker at http:\/\/127\.0\.0\.1:9\/health .*deployed/);
  const http = await run(["set", "http://example.com"]);
  assert.match(http.stderr, /HTTPS/);
  const badSecret = await run(["set", s.url.origin, "--allow-http"], { TELEGRAM_WEBHOOK_SECRET: "has spaces!" });
  assert.match(badSecret.stderr, /may only contain/);
  assert.equal(s.tg.calls("setWebhook").length, 1, "only the first test set a webhook");
});

test("the getUpdates bridge forwards a real bot's updates to the local worker", async () => {
  const { runBridge } = await import("../../tools/bridge.js");
  const { privateText, uniqueId } = await import("../support/stack.js");
  const uid = uniqueId();
  const controller = new AbortController();
  const logs = [];
  const bridge = runBridge({ token: TOKEN, secret: WEBHOOK_SECRET, workerUrl: s.url.origin, apiBase: s.tg.base, signal: controller.signal, log: (l) => logs.push(l) });
  s.tg.queueUpdate(privateText(uid, "via the bridge"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 15_000, "the reply to the bridged update");
  assert.equal(s.tg.sent(uid)[0], "Echo: via the bridge");
  controller.abort();
  await bridge.catch(() => {});
  assert.match(logs[0], /bridge: @edge_test_bot →/);
  // With a webhook set, Telegram refuses getUpdates and the bridge says what to do.
  await run(["set", s.url.origin, "--allow-http"]);
  await assert.rejects(runBridge({ token: TOKEN, secret: WEBHOOK_SECRET, workerUrl: s.url.origin, apiBase: s.tg.base, log: () => {} }), /webhook:delete/);
});
