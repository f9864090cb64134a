// scripts/deploy-plan.mjs: the deploy's decisions as functions (no Cloudflare needed).
import { test } from "node:test";
import assert from "node:assert/strict";
import { resourceNames, boundResources, ownership, adoptable, deployConfig, tomlVar, uploadAdvice, queueUser } from "../../scripts/deploy-plan.mjs";
import { TOML } from "../support/deploy.js";

const defaults = { jobs: tomlVar(TOML, "JOBS_QUEUE"), dead: tomlVar(TOML, "DEAD_LETTER_QUEUE") };

test("a deployment's configuration is wrangler.toml with its own names everywhere they occur", () => {
  const out = deployConfig(TOML, defaults, { name: "second-bot", ...resourceNames("second-bot"), botId: 555 });
  assert.match(out, /^name = "second-bot"$/m);
  assert.match(out, /^database_name = "second-bot"$/m);
  assert.equal(out.match(/^queue = "second-bot-jobs"$/gm).length, 2, "producer and consumer");
  assert.equal(out.match(/^queue = "second-bot-dead-letters"$/gm).length, 2);
  assert.match(out, /^dead_letter_queue = "second-bot-dead-letters"$/m);
  assert.match(out, /^JOBS_QUEUE = "second-bot-jobs"$/m);
  assert.match(out, /^DEAD_LETTER_QUEUE = "second-bot-dead-letters"$/m);
  assert.match(out, /^BOT_ID = "555"$/m);
  assert.doesNotMatch(out, /"edge-agent/, "no default name is left");
  assert.throws(() => deployConfig(TOML.replace(/^BOT_ID.*$/m, ""), defaults, { name: "x", ...resourceNames("x"), botId: 1 }), /no BOT_ID var/);
});

test("the Mini App's address goes into the vars, unless wrangler.toml gives one", () => {
  const url = "https://second-bot.me.workers.dev/app";
  const out = deployConfig(TOML, defaults, { name: "second-bot", ...resourceNames("second-bot"), botId: 555, miniAppUrl: url });
  assert.equal(tomlVar(out, "MINIAPP_URL"), url);
  assert.equal(out.match(/^MINIAPP_URL/gm).length, 1);
  const own = TOML.replace(/^(BOT_ID.*)$/m, '$1\nMINIAPP_URL = "https://bot.example.com/app"');
  assert.equal(tomlVar(deployConfig(own, defaults, { name: "x", ...resourceNames("x"), botId: 1, miniAppUrl: url }), "MINIAPP_URL"), "https://bot.example.com/app");
  const empty = TOML.replace(/^(BOT_ID.*)$/m, '$1\nMINIAPP_URL = ""');
  const filled = deployConfig(empty, defaults, { name: "x", ...resourceNames("x"), botId: 1, miniAppUrl: url });
  assert.equal(tomlVar(filled, "MINIAPP_URL"), url, "an empty one is filled in");
  assert.equal(filled.match(/^MINIAPP_URL/gm).length, 1);
});

test("whose worker: the chat-object class and the recorded bot id decide", () => {
  const chat = { type: "durable_object_namespace", name: "CHATS", class_name: "ChatObject" };
  assert.equal(ownership([{ type: "plain_text", name: "GREETING", text: "hi" }], 1), "foreign");
  assert.equal(ownership([chat], 1), "unknown-bot");
  assert.equal(ownership([chat, { type: "plain_text", name: "BOT_ID", text: "" }], 1), "unknown-bot");
  assert.equal(ownership([chat, { type: "plain_text", name: "BOT_ID", text: "1" }], 1), "ours");
  assert.equal(ownership([chat, { type: "plain_text", name: "BOT_ID", text: "2" }], 1), "other-bot");
});

test("a worker's bound resources are read from its bindings; a database by its id", () => {
  const bindings = [{ type: "d1", name: "DB", id: "u1" }, { type: "queue", name: "JOBS", queue_name: "q-jobs" }, { type: "queue", name: "DEAD_LETTERS", queue_name: "q-dead" }];
  assert.deepEqual(boundResources(bindings, [{ uuid: "u1", name: "old-db" }]), { database: "old-db", databaseId: "u1", jobs: "q-jobs", dead: "q-dead" });
  assert.equal(boundResources([], []), null);
});

test("an existing database is adopted only when empty or holding only this project's migrations", () => {
  const ours = ["0001_init.sql", "0002_memory.sql"];
  assert.equal(adoptable({ tables: ["_cf_KV"], applied: null }, ours).ok, true);
  assert.equal(adoptable({ tables: ["d1_migrations", "chats"], applied: ["0001_init.sql"] }, ours).ok, true);
  assert.match(adoptable({ tables: ["invoices"], applied: null }, ours).why, /invoices/);
  assert.match(adoptable({ tables: ["d1_migrations"], applied: ["0001_other.sql"] }, ours).why, /0001_other\.sql/);
});

test("a refused upload's advice follows Cloudflare's code, not a word that happens to appear", () => {
  assert.match(uploadAdvice("You need to verify your email address to use Workers. [code: 10034]"), /email address is verified/);
  assert.match(uploadAdvice("Your Worker exceeded the size limit of 3 MiB. [code: 10027]"), /larger than your plan allows/);
  assert.match(uploadAdvice("Cron schedules:\n - This account has reached the Workers Free limit of 5 cron triggers per account. [code: 10072]"), /limit of cron triggers/);
  assert.match(uploadAdvice("Queue consumers:\n - workers.api.error.consumer_exists [code: 11004]"), /already has a consumer/);
  assert.match(uploadAdvice("You have reached the maximum number of queues allowed for your account (10) [code: 11003]"), /queue limit/);
  // A permission error on the same steps is not any of these.
  assert.equal(uploadAdvice("Queue consumers:\n - A request to the Cloudflare API (/accounts/x/queues) failed.\n - Authentication error [code: 10000]"), null);
  assert.equal(uploadAdvice("Cron schedules:\n - Authentication error [code: 10000]"), null);
});

test("a queue's other user is the worker bound to it or its consumer, never the worker itself", () => {
  const queues = [{ queue_name: "q", consumers: [{ script: "me" }] }, { queue_name: "r", consumers: [{ script: "them" }] }];
  const none = { queue: new Map(), database: new Map() };
  assert.equal(queueUser("q", queues, none, "me"), undefined);
  assert.equal(queueUser("r", queues, none, "me"), "them");
  assert.equal(queueUser("q", queues, { queue: new Map([["q", "producer"]]), database: new Map() }, "me"), "producer");
  assert.equal(queueUser("absent", queues, none, "me"), undefined);
});
