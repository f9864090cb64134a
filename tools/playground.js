#!/usr/bin/env node
// The local playground (`npm run dev`): a stand-in for the Telegram Bot API that serves a
// small web chat on localhost — a private chat, a group with two simulated people, and a crew
// room where crew mode's personas answer in turn, each shown as its own sender. What
// you type becomes real webhook updates to the worker under `wrangler dev`; what the bot does
// (messages, reactions, stickers, typing) appears in the page. Without GEMINI_API_KEY it also
// serves the offline stand-in model, so everything runs with no tokens at all.
//
//   node tools/playground.js            # reads .dev.vars; PLAYGROUND_PORT (8788), WORKER_URL
//
// The page and its /api/* routes answer only requests addressed to this server by a loopback
// name (the Host header: no DNS rebinding), from its own page (Origin, when a browser sends
// one: no cross-site form or fetch from another tab), and POSTs only as application/json
// (which no cross-site form can send and no cross-site fetch can without a CORS preflight,
// which is never granted). Everything else gets 403 or 415 and reaches no webhook.
import { launchUrl } from "./miniapp-launch.js";
import http from "node:http";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { readVars } from "./util.js";
import { createTelegramEmulator } from "./telegram-emulator.js";
import { handleOfflineModel } from "./offline-model.js";

const here = path.dirname(fileURLToPath(import.meta.url));

export const PEOPLE = {
  you: { id: 1001, first_name: "You", username: "you" },
  alice: { id: 1002, first_name: "Alice", username: "alice" },
  bob: { id: 1003, first_name: "Bob", username: "bob" },
};
export const CHATS = {
  dm: { id: PEOPLE.you.id, type: "private", first_name: "You" },
  group: { id: -1001234000001, type: "supergroup", title: "Playground group" },
  // Crew mode: `npm run dev` sets CREW and CREW_CHATS to this chat, so personas answer here.
  crew: { id: -1001234000002, type: "supergroup", title: "Crew room" },
  // Guest mode (Bot API 10.0): a group the bot is not in; a person summons it as a guest.
  guest: { id: -1001234000003, type: "supergroup", title: "Friends' group (the bot is not a member)" },
};

/** Telegram Business: "You" connect the bot to your business account; Alice and Bob write to
 *  you there as contacts (each business chat's id is the contact's own user id). */
export const BUSINESS = { id: "pg-business-you", owner: PEOPLE.you };

/** Who sent a bot message, as the page shows it: a persona's own bot by its name, else a
 *  persona's display name from the bold first line the main bot puts on its messages (the
 *  line is then not repeated in the text). */
export function crewSender(e, bot) {
  if (e.from && e.from !== bot.username) return { persona: e.fromName ?? e.from, html: e.html, text: e.text };
  const m = /^<b>([^<]{1,64})<\/b>\n/.exec(e.html ?? "");
  if (!m) return { persona: null, html: e.html, text: e.text };
  return { persona: m[1], html: e.html.slice(m[0].length), text: e.text.split("\n").slice(1).join("\n") };
}

/** Whether a request to the page or /api/* comes from the playground's own page: a loopback
 *  Host with this server's port, and no foreign Origin. */
export function sameSite(req, port) {
  const hosts = [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`];
  const host = String(req.headers.host ?? "").toLowerCase();
  if (!hosts.includes(host)) return false;
  const origin = req.headers.origin;
  if (origin === undefined) return true; // not a browser's cross-site request (curl, tests)
  return hosts.some((h) => origin.toLowerCase() === `http://${h}`);
}

/** Message entities Telegram would attach: a leading bot command, @mentions. */
export function entitiesOf(text) {
  const entities = [];
  const cmd = /^\/[A-Za-z0-9_]+(@[A-Za-z0-9_]+)?/.exec(text);
  if (cmd) entities.push({ type: "bot_command", offset: 0, length: cmd[0].length });
  for (const m of text.matchAll(/@[A-Za-z0-9_]{3,}/g)) {
    if (cmd && m.index < cmd[0].length) continue;
    entities.push({ type: "mention", offset: m.index, length: m[0].length });
  }
  return entities;
}

export async function startPlayground({ port = 8788, host = "127.0.0.1", token, secret, workerUrl, offlineModel = true, botName = "Edge", crewBots = {} }) {
  const bot = { id: Number(token.split(":")[0]), first_name: botName, username: "edge_playground_bot" };
  // One message id sequence for people and bot, starting where no earlier run can have been
  // (the local D1 keeps messages across restarts; ids must not repeat).
  const telegram = createTelegramEmulator({ token, bot, firstMessageId: Date.now() });
  // The stand-in bot has guest mode on (BotFather's setting), for "summon as guest".
  telegram.setGuestMode(true);
  const log = []; // everything shown in the page, in order
  const clients = new Set();
  let nextUpdateId = Date.now() % 1_000_000_000;
  // Crew personas' own bots (CREW_BOT_TOKEN_<NAME> in .dev.vars): the stand-in serves them too.
  const actorNames = new Map();
  for (const [name, botToken] of Object.entries(crewBots)) {
    const username = `${name.toLowerCase()}_playground_bot`;
    telegram.addBot(botToken, { first_name: name[0] + name.slice(1).toLowerCase(), username });
    actorNames.set(username, name[0] + name.slice(1).toLowerCase());
  }
  const chatName = (id) => Object.keys(CHATS).find((k) => CHATS[k].id === id) ?? String(id);

  function publish(event) {
    log.push(event);
    if (log.length > 2000) log.shift();
    for (const c of clients) c.write(`data: ${JSON.stringify(event)}\n\n`);
  }

  telegram.on((e) => {
    // A message the bot sent for you to a contact shows in the Business panel.
    if (e.business) return publish({ ...e, chat: "business", from: "bot", to: Object.values(PEOPLE).find((p) => p.id === e.chat_id)?.first_name });
    const chat = chatName(e.chat_id);
    if (chat !== "crew" || e.type !== "message") return publish({ ...e, chat, from: "bot" });
    // In the crew room each persona shows as its own sender.
    const who = crewSender({ ...e, fromName: actorNames.get(e.from) }, bot);
    publish({ ...e, ...who, chat, from: "bot" });
  });

  async function deliver(update) {
    const res = await fetch(`${workerUrl}/telegram/webhook`, {
      method: "POST",
      headers: { "content-type": "application/json", "X-Telegram-Bot-Api-Secret-Token": secret },
      body: JSON.stringify(update),
    });
    if (!res.ok) throw new Error(`the worker answered ${res.status}`);
  }

  /** Puts a file a person sends into the Telegram stand-in (getFile and the download serve it)
   *  and into the message as Telegram would: a photo, voice note, audio, video, sticker or
   *  document, by its MIME type (or `kind`). At most 20 MB, like the Bot API. */
  function attach(message, file) {
    const bytes = Buffer.from(String(file.data ?? ""), "base64");
    if (!bytes.length) throw new Error("the file is empty");
    if (bytes.length > 20 * 1024 * 1024) throw new Error("files up to 20 MB");
    const mime = String(file.mime ?? "application/octet-stream").toLowerCase();
    const name = String(file.name ?? "file").replace(/[^\w.\- ]/g, "_").slice(0, 60);
    const hash = crypto.createHash("sha256").update(bytes).digest("hex").slice(0, 16);
    const fileId = `pg-${hash}-${message.message_id}`;
    const meta = { file_id: fileId, file_unique_id: `pgu-${hash}`, file_size: bytes.length };
    telegram.addFile(fileId, bytes, { uniqueId: meta.file_unique_id, path: `files/${fileId}/${name}` });
    const kind = file.kind ?? (mime === "image/webp" ? "sticker" : mime.startsWith("image/") ? "photo" : mime === "audio/ogg" ? "voice" : mime.startsWith("audio/") ? "audio" : mime.startsWith("video/") ? "video" : "document");
    if (kind === "photo") message.photo = [meta];
    else if (kind === "sticker") message.sticker = { ...meta, type: "regular", width: 512, height: 512, emoji: "🙂", is_animated: false, is_video: false };
    else if (kind === "voice") message.voice = { ...meta, mime_type: mime, duration: 1 };
    else if (kind === "audio") message.audio = { ...meta, mime_type: mime, file_name: name, duration: 1 };
    else if (kind === "video") message.video = { ...meta, mime_type: mime, file_name: name, duration: 1 };
    else message.document = { ...meta, mime_type: mime, file_name: name };
    return `[${kind} ${name}, ${bytes.length} bytes]`;
  }

  // Topics the person opened in the private chat (Bot API 9.3): thread id → the service
  // message every message of the topic replies to.
  const dmTopics = new Map();

  /** The person opens a topic in the private chat; named by them, or implicitly ("New topic",
   *  which the bot renames from the first message). */
  async function openTopic({ name }) {
    const given = typeof name === "string" && name.trim() ? name.trim().slice(0, 128) : null;
    const t = telegram.privateTopic(CHATS.dm.id, given ? { name: given, implicit: false } : {});
    dmTopics.set(t.thread, t.service);
    publish({ type: "topic", chat: "dm", thread: t.thread, name: given ?? "New topic" });
    return t.thread;
  }

  async function send({ chat, as, text, reply_to, file, topic }) {
    const c = CHATS[chat];
    const from = PEOPLE[chat === "dm" ? "you" : as] ?? PEOPLE.alice;
    text = typeof text === "string" ? text : "";
    if (!c || (!text.trim() && !file)) throw new Error("chat and text (or a file) are required");
    const message = { message_id: telegram.nextMessageId(), from: { ...from, is_bot: false }, chat: c, date: Math.floor(Date.now() / 1000) };
    const entities = entitiesOf(text);
    let shown = text;
    if (file) {
      shown = `${attach(message, file)}${text ? ` ${text}` : ""}`;
      if (text) message.caption = text;
      if (entities.length) message.caption_entities = entities;
    } else {
      message.text = text;
      if (entities.length) message.entities = entities;
    }
    const thread = chat === "dm" && topic ? Number(topic) : null;
    if (thread !== null) {
      if (!dmTopics.has(thread)) throw new Error("no such topic");
      Object.assign(message, { message_thread_id: thread, is_topic_message: true, reply_to_message: dmTopics.get(thread) });
    }
    if (reply_to) {
      const original = log.find((e) => e.type === "message" && e.chat === chat && e.message_id === reply_to);
      if (original) {
        const author = original.from === "bot" ? { ...bot, is_bot: true } : { ...(PEOPLE[original.as] ?? PEOPLE.alice), is_bot: false };
        message.reply_to_message = { message_id: reply_to, from: author, chat: c, date: message.date, text: original.text };
      }
    }
    publish({ type: "message", chat, from: from.first_name, as: chat === "dm" ? "you" : as, message_id: message.message_id, text: shown, reply_to: reply_to ?? null, thread });
    await deliver({ update_id: nextUpdateId++, message });
    return message.message_id;
  }

  async function react({ chat, as, message_id, emoji }) {
    const c = CHATS[chat];
    const user = PEOPLE[chat === "dm" ? "you" : as] ?? PEOPLE.alice;
    publish({ type: "reaction", chat, from: user.first_name, message_id, emoji });
    await deliver({
      update_id: nextUpdateId++,
      message_reaction: { chat: c, message_id, user: { ...user, is_bot: false }, date: Math.floor(Date.now() / 1000), old_reaction: [], new_reaction: [{ type: "emoji", emoji }] },
    });
  }

  /** Stop pressed on a draft in the web chat: the update Telegram would send (Bot API 10.3). */
  async function stop({ chat, draft_id }) {
    const c = CHATS[chat];
    if (!c || !Number.isInteger(draft_id)) throw new Error("which draft?");
    await deliver(telegram.pressStop(c.id, draft_id, { update_id: nextUpdateId++ }));
  }

  /** "Summon as guest": the `guest_message` Telegram would send when a person calls the bot into
   *  a chat it is not a member of (Bot API 10.0); the answer shows as it is edited in. */
  async function summon({ as, text }) {
    const from = PEOPLE[as] ?? PEOPLE.alice;
    text = typeof text === "string" ? text.trim() : "";
    if (!text) throw new Error("what should the guest answer?");
    const update = telegram.guestMessage(CHATS.guest.id, from.id, text, { name: from.first_name, update_id: nextUpdateId++ });
    publish({ type: "message", chat: "guest", from: from.first_name, as, message_id: update.guest_message.message_id, text, reply_to: null });
    await deliver(update);
    return update.guest_message.message_id;
  }

  /** "Connect my Business account": the `business_connection` Telegram sends when you add the
   *  bot in Settings → Telegram Business → Chatbots (with the rights to reply and to mark read). */
  async function connectBusiness() {
    const update = telegram.connectBusiness(BUSINESS.owner.id, { id: BUSINESS.id, name: BUSINESS.owner.first_name, update_id: nextUpdateId++ });
    publish({ type: "business", text: "You connected the bot to your Telegram Business account." });
    await deliver(update);
  }

  /** A contact (Alice or Bob) writes to your business account. */
  async function businessWrite({ as, text }) {
    const from = PEOPLE[as === "bob" ? "bob" : "alice"];
    text = typeof text === "string" ? text.trim() : "";
    if (!text) throw new Error("what does the contact write?");
    const update = telegram.businessMessage(BUSINESS.id, from.id, text, { name: from.first_name, update_id: nextUpdateId++ });
    publish({ type: "message", chat: "business", from: from.first_name, as, message_id: update.business_message.message_id, text, reply_to: null });
    await deliver(update);
    return update.business_message.message_id;
  }

  /** You press an inline button (a suggestion's Send or Skip) under the bot's message in your
   *  private chat: the `callback_query` Telegram sends. */
  async function pressButton({ message_id, data }) {
    if (!Number.isInteger(message_id) || typeof data !== "string") throw new Error("which button?");
    await deliver(telegram.pressButton(CHATS.dm.id, message_id, PEOPLE.you.id, data, { update_id: nextUpdateId++ }));
  }

  const page = fs.readFileSync(path.join(here, "playground.html"), "utf8");

  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url, "http://x");
    try {
      if (url.pathname.startsWith("/bot") || url.pathname.startsWith("/file/bot")) return await telegram.handle(req, res);
      if (offlineModel && (await handleOfflineModel(req, res))) return;
      if (!sameSite(req, server.address().port)) {
        res.writeHead(403, { "content-type": "text/plain" });
        return res.end("forbidden: the playground answers only its own page on localhost");
      }
      if (req.method === "GET" && url.pathname === "/") {
        res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
        return res.end(page.replace("__CONFIG__", JSON.stringify({ offlineModel, bot: bot.username, botName, people: PEOPLE })));
      }
      // The Mini App as Alice or Bob: init data signed with the stand-in bot token.
      if (req.method === "GET" && url.pathname === "/miniapp") {
        const person = PEOPLE[url.searchParams.get("as") ?? "alice"];
        if (!person) return void res.writeHead(404).end("unknown person");
        res.writeHead(302, { location: launchUrl(workerUrl, person, token) });
        return void res.end();
      }
      if (req.method === "GET" && url.pathname === "/api/events") {
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
        for (const e of log) res.write(`data: ${JSON.stringify(e)}\n\n`);
        clients.add(res);
        req.on("close", () => clients.delete(res));
        return;
      }
      const routes = ["/api/send", "/api/react", "/api/stop", "/api/topic", "/api/guest", "/api/business/connect", "/api/business/send", "/api/press"];
      if (req.method === "POST" && routes.includes(url.pathname)) {
        const type = String(req.headers["content-type"] ?? "").split(";")[0].trim().toLowerCase();
        if (type !== "application/json") {
          res.writeHead(415, { "content-type": "text/plain" });
          return res.end("send application/json");
        }
        let raw = "";
        for await (const chunk of req) {
          raw += chunk;
          if (raw.length > 28 * 1024 * 1024) throw new Error("the request is too large (files up to 20 MB)");
        }
        const body = JSON.parse(raw || "{}");
        const handlers = { "/api/send": send, "/api/stop": stop, "/api/react": react, "/api/topic": openTopic, "/api/guest": summon, "/api/business/connect": connectBusiness, "/api/business/send": businessWrite, "/api/press": pressButton };
        const id = await handlers[url.pathname](body);
        res.writeHead(200, { "content-type": "application/json" });
        return res.end(JSON.stringify({ ok: true, message_id: id ?? null }));
      }
      res.writeHead(404);
      res.end("not found");
    } catch (e) {
      publish({ type: "error", text: e.message });
      res.writeHead(502, { "content-type": "application/json" });
      res.end(JSON.stringify({ ok: false, error: e.message }));
    }
  });
  await new Promise((r) => server.listen(port, host, r));
  const base = `http://${host}:${server.address().port}`;
  return {
    base,
    telegram,
    log,
    send,
    setWorkerUrl(url) {
      workerUrl = url.replace(/\/$/, "");
    },
    close: () => {
      for (const c of clients) c.end();
      return new Promise((r) => server.close(r));
    },
  };
}


if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const vars = readVars(path.join(here, "..", ".dev.vars"));
  const playground = await startPlayground({
    port: Number(process.env.PLAYGROUND_PORT ?? 8788),
    token: vars.TELEGRAM_BOT_TOKEN ?? "123456789:local-development-token",
    secret: vars.TELEGRAM_WEBHOOK_SECRET ?? "",
    workerUrl: process.env.WORKER_URL ?? "http://127.0.0.1:8787",
    offlineModel: !vars.GEMINI_API_KEY,
    botName: process.env.BOT_NAME ?? "Edge",
    crewBots: Object.fromEntries(Object.entries(vars).filter(([k]) => k.startsWith("CREW_BOT_TOKEN_")).map(([k, v]) => [k.slice("CREW_BOT_TOKEN_".length), v])),
  });
  console.log(`playground: open ${playground.base} (${vars.GEMINI_API_KEY ? "real Gemini" : "offline stand-in model"})`);
}
