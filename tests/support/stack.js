// The end-to-end stack: the real wasm worker (built once by scripts/test.sh into
// .tmp/bundle) under workerd via wrangler's test harness, reading the same wrangler.toml, with
// D1 migrations applied and the Durable Object, queues and cron live; a fake Telegram and a
// fake Gemini on loopback. Helpers build real-shaped updates, read D1 and the logs, and call
// the admin API, once for every test file.
import assert from "node:assert/strict";
import { createTestHarness } from "wrangler";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { startFakeTelegram } from "../../tools/telegram-emulator.js";
import { startFakeGemini } from "./fake-gemini.js";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const TOKEN = "123456789:TEST-token_for-the-fake";
export const BOT_ID = 123456789;
// Shared secrets must be 32+ characters (the worker refuses to serve with shorter ones).
export const WEBHOOK_SECRET = "test-webhook-secret-0123456789abcdefXYZ";
export const GEMINI_KEY = "test-gemini-key";
export const ADMIN_TOKEN = "test-admin-token-0123456789abcdefghXYZ";
/** The headers that authorize an admin API call. */
export const ADMIN_HEADERS = { authorization: `Bearer ${ADMIN_TOKEN}` };

let nextUpdateId = 1_000_000 + Math.floor(Math.random() * 1_000_000);
let nextMessageId = 1;

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

/** Prints a line as a TAP comment (`#`), so numbers show in the test output. */
export const log = (...a) => console.log("#", ...a);

/** A response's body parsed as JSON, or its text when it is not JSON. */
export async function bodyOf(r) {
  const text = await r.text();
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Starts the worker (the prebuilt bundle) with test secrets; `vars` override [vars],
 *  `secrets` override the test secrets; `bundle` another prebuilt bundle (the benchmarks'
 *  before-and-after runs). */
export async function startWorker(vars, secrets = {}, bundle = process.env.TEST_BUNDLE ?? "./.tmp/bundle") {
  const server = createTestHarness({
    root: ROOT,
    workers: [
      {
        configPath: "./wrangler.toml",
        prebuiltWorkerDir: bundle,
        vars: { DEBOUNCE_MS: "300", DEBOUNCE_MAX_MS: "3000", BOT_USERNAME: "", ...vars },
        secrets: {
          TELEGRAM_BOT_TOKEN: TOKEN,
          TELEGRAM_WEBHOOK_SECRET: WEBHOOK_SECRET,
          GEMINI_API_KEY: GEMINI_KEY,
          ADMIN_TOKEN: ADMIN_TOKEN,
          ...secrets,
        },
      },
    ],
  });
  const { url } = await server.listen();
  const worker = server.getWorker();
  await worker.applyD1Migrations("DB");
  return { server, worker, url };
}

/** Starts fakes and the worker. `vars` override wrangler.toml's [vars]; `geminiTokens`
 *  "gemini" makes the fake Gemini count tokens with Gemini's tokenizer (the benchmarks). */
export async function startStack({ vars = {}, latencyMs = 0, secrets = {}, bundle, geminiTokens } = {}) {
  const tg = await startFakeTelegram({ token: TOKEN });
  const gemini = await startFakeGemini({ key: GEMINI_KEY, latencyMs, tokens: geminiTokens });
  const { server, worker, url } = await startWorker({ TELEGRAM_API_BASE: tg.base, GEMINI_API_BASE: gemini.base, ...vars }, secrets, bundle);
  const env = await worker.getEnv();

  const stack = {
    tg,
    gemini,
    server,
    worker,
    env,
    url,
    /** POSTs an update to the webhook (with the right secret unless told otherwise). */
    async webhook(update, { secret = WEBHOOK_SECRET, raw } = {}) {
      const headers = { "content-type": "application/json" };
      if (secret !== null) headers["X-Telegram-Bot-Api-Secret-Token"] = secret;
      return stack.worker.fetch("http://edge.test/telegram/webhook", {
        method: "POST",
        headers,
        body: raw ?? JSON.stringify(update),
      });
    },
    async fetch(pathname, init) {
      return stack.worker.fetch(`http://edge.test${pathname}`, init);
    },
    /** Runs SQL against the worker's D1 and returns the rows. */
    async sql(query, ...params) {
      const r = await stack.env.DB.prepare(query).bind(...params).all();
      return r.results;
    },
    /** Deploys another prebuilt bundle over the same storage (D1, the objects' storage, the
     *  queues), as an upload does after `migrations apply`; the fakes stay. */
    async deploy(bundle) {
      await server.update((o) => ({ ...o, workers: o.workers.map((w) => ({ ...w, prebuiltWorkerDir: bundle })) }));
      stack.worker = server.getWorker();
      stack.env = await stack.worker.getEnv();
    },
    async scheduled(cron = "*/30 * * * *") {
      return stack.worker.scheduled({ cron, scheduledTime: new Date() });
    },
    logs() {
      return server.getLogs();
    },
    /** The `metrics` lines (METRICS_LOG) logged from log line `from` on, parsed, each with its
     *  raw text as `raw`. */
    metricsSince(from) {
      return stack.logs().slice(from).map((l) => String(l.message ?? l)).filter((m) => m.startsWith("metrics ")).map((m) => ({ raw: m, ...JSON.parse(m.slice(8)) }));
    },
    /** Calls the admin API (`path` under /api/v1/) with the admin token, or `token` (null: no
     *  authorization); the status and the answer parsed as JSON (its text when it is not). */
    async api(method, path, body, token = ADMIN_TOKEN) {
      const headers = { "content-type": "application/json" };
      if (token !== null) headers.authorization = `Bearer ${token}`;
      const r = await stack.fetch(`/api/v1/${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: r.status, json: await bodyOf(r) };
    },
    /** When a chat's object next wakes (`GET /api/v1/chats/{conv}/wake`: its alarm, or null),
     *  once `want(ms)` holds of it (waiting up to 5 s for the object to arm after its work);
     *  the last answer otherwise. */
    async nextWake(conv, want = () => true) {
      let at;
      for (let i = 0; i < 50; i++) {
        const r = await stack.fetch(`/api/v1/chats/${conv}/wake`, { headers: ADMIN_HEADERS });
        assert.equal(r.status, 200);
        at = (await r.json()).next_wake_ms;
        if (want(at)) break;
        await sleep(100);
      }
      return at;
    },
    /** Runs the cron, then waits until no conversation is being consolidated and none has
     *  messages left to consolidate (at most 30 s). */
    async consolidate() {
      await stack.scheduled();
      for (let i = 0; i < 100; i++) {
        await sleep(300);
        const busy = await stack.sql("SELECT COUNT(*) AS n FROM conversations WHERE consolidating_until IS NOT NULL");
        const due = await stack.sql(
          "SELECT COUNT(*) AS n FROM messages m LEFT JOIN conversations c ON c.conv = m.conv WHERE m.seq > COALESCE(c.consolidated_seq, 0) AND m.role != 'bot'",
        );
        if (busy[0].n === 0 && due[0].n === 0) return;
      }
      throw new Error("consolidation did not finish");
    },
    /** The final messages (sendMessage calls with a text, not drafts) the fake Telegram got for
     *  `chat`. */
    finalSent(chat) {
      return tg.calls("sendMessage", chat).filter((r) => r.text !== undefined);
    },
    /** Restarts the runtime with storage kept: every instance in flight dies, as in a reset. */
    async restart() {
      await server.update((options) => ({ ...options }));
      stack.env = await stack.worker.getEnv();
    },
    async close() {
      await server.close();
      await tg.close();
      await gemini.close();
    },
  };
  return stack;
}

/** A fresh update id. */
export function updateId() {
  return nextUpdateId++;
}

export function messageId() {
  return nextMessageId++;
}

export function user(id, first_name = `User${id}`, extra = {}) {
  return { id, is_bot: false, first_name, ...extra };
}

/** A private text message update from user `uid`. */
export function privateText(uid, text, { name, message_id = messageId(), update_id = updateId(), entities, reply_to_message } = {}) {
  const from = user(uid, name);
  const message = { message_id, from, chat: { id: uid, first_name: from.first_name, type: "private" }, date: Math.floor(Date.now() / 1000), text };
  if (entities) message.entities = entities;
  if (reply_to_message) message.reply_to_message = reply_to_message;
  return { update_id, message };
}

/** A message in topic `t` (from the emulator's privateTopic) of the private chat `uid`. */
export function inTopic(uid, t, text) {
  const message = { message_id: messageId(), from: user(uid), chat: { id: uid, type: "private", first_name: `User${uid}` }, date: Math.floor(Date.now() / 1000), text, message_thread_id: t.thread, is_topic_message: true, reply_to_message: t.service };
  return { update_id: updateId(), message };
}

/** A group (supergroup) text message. */
export function groupText(chatId, uid, text, { name, message_id = messageId(), update_id = updateId(), entities, reply_to_message, thread } = {}) {
  const from = user(uid, name);
  const message = { message_id, from, chat: { id: chatId, title: "Test group", type: "supergroup", is_forum: Boolean(thread) }, date: Math.floor(Date.now() / 1000), text };
  if (entities) message.entities = entities;
  if (reply_to_message) message.reply_to_message = reply_to_message;
  if (thread) {
    message.message_thread_id = thread;
    message.is_topic_message = true;
  }
  return { update_id, message };
}

/** A private command update: `text` starts with the command, which carries its entity. */
export const cmd = (uid, text) => privateText(uid, text, { entities: [{ type: "bot_command", offset: 0, length: text.split(" ")[0].length }] });

/** A group message that mentions the bot first: `@bot words` (`bot` the test bot's username
 *  unless told); the other options are groupText's. */
export function askInGroup(chat, uid, words, { bot = "edge_test_bot", ...opts } = {}) {
  const t = `@${bot} ${words}`;
  return groupText(chat, uid, t, { entities: mention(t, bot), ...opts });
}

/** A mention entity for `@username` at the start of `text`. */
export function mention(text, username) {
  const at = text.indexOf(`@${username}`);
  return [{ type: "mention", offset: at, length: username.length + 1 }];
}

export function reaction(chatId, uid, messageIdValue, emoji, { update_id = updateId() } = {}) {
  return {
    update_id,
    message_reaction: {
      chat: chatId > 0 ? { id: chatId, type: "private", first_name: "x" } : { id: chatId, title: "Test group", type: "supergroup" },
      message_id: messageIdValue,
      user: user(uid),
      date: Math.floor(Date.now() / 1000),
      old_reaction: [],
      new_reaction: [{ type: "emoji", emoji }],
    },
  };
}

/** A long Markdown answer: 42 paragraphs with bold, about 9,600 characters: three
 *  Telegram messages. */
export const LONG_PARAGRAPHS = Array.from({ length: 42 }, (_, i) =>
  `Paragraph ${i + 1} of the long answer: **step ${i + 1}** is where we look at the details once more, weigh each option with care, write down what we learnt, and then move on to the next part of the plan without rushing anything at all today.`,
);
export const LONG = LONG_PARAGRAPHS.join("\n\n");

/** A unique id for a test's user or chat, so tests sharing a worker do not interfere. */
let nextId = 70_000_000 + Math.floor(Math.random() * 1_000_000) * 10;
/** Seeds `n` described photos sent in `chat` (a media row each, and the message that carried
 *  it), all described with `words`, straight into `db` (the stack's `env.DB`) as the webhook and
 *  a describing turn store them; `tag` keeps file ids apart. */
export async function seedMedia(db, chat, n, words, tag) {
  const stmts = [];
  for (let k = 0; k < n; k++) {
    const fu = `${tag}-${chat}-${k}`;
    const parts = JSON.stringify([{ type: "media", kind: "photo", detail: "photo 720x1280", file_id: `f-${fu}`, file_unique_id: fu }]);
    stmts.push(db.prepare("INSERT INTO media (file_unique_id, kind, status, description, created_at, updated_at) VALUES (?, 'photo', 'ok', ?, 0, ?)").bind(fu, `${words} number ${k}`, k));
    stmts.push(db.prepare("INSERT INTO messages (conv, chat_id, message_id, role, user_id, name, parts, text, date) VALUES (?, ?, ?, 'user', ?, 'Pat', ?, '[photo]', 0)").bind(String(chat), chat, 500_000 + k, Math.abs(chat) % 1_000_000, parts));
  }
  for (let k = 0; k < stmts.length; k += 100) await db.batch(stmts.slice(k, k + 100));
}

export function uniqueId() {
  nextId += 7;
  return nextId;
}
