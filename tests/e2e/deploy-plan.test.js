// scripts/deploy-plan.mjs: the deploy's decisions as functions (no Cloudflare needed).
import { test } from "node:test";
import assert from "node:assert/strict";
import { resourceNames, boundResources, ownership, adoptable, deployConfig, tomlVar } from "../../scripts/deploy-plan.mjs";
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
