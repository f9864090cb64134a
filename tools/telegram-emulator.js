// A Telegram Bot API emulator that enforces the real rules the bot depends on: the token in
// the path (401 otherwise), the JSON envelope {ok, result | error_code, description,
// parameters}, Telegram's HTML parser (allowed tags, LIFO nesting, entities), the
// 4096-character limit counted after parsing, the reaction emoji list, 429 with retry_after,
// 403 for blocked chats, message drafts (sendMessageDraft: private chats only), photos uploaded
// with sendPhoto as multipart/form-data (10 MB, PHOTO_INVALID_DIMENSIONS, a 1024-character caption). It records every request, takes a fault script per chat and method,
// and reports what the bot did as events.
//
// Used as the fake Telegram of the end-to-end tests (startFakeTelegram) and inside the local
// playground (createTelegramEmulator, mounted in the playground's server).
import http from "node:http";
import crypto from "node:crypto";
import { waiters } from "./util.js";

export const REACTION_EMOJI = new Set([
  "❤", "👍", "👎", "🔥", "🥰", "👏", "😁", "🤔", "🤯", "😱", "🤬", "😢", "🎉", "🤩", "🤮", "💩", "🙏", "👌", "🕊",
  "🤡", "🥱", "🥴", "😍", "🐳", "❤‍🔥", "🌚", "🌭", "💯", "🤣", "⚡", "🍌", "🏆", "💔", "🤨", "😐", "🍓", "🍾", "💋",
  "🖕", "😈", "😴", "😭", "🤓", "👻", "👨‍💻", "👀", "🎃", "🙈", "😇", "😨", "🤝", "✍", "🤗", "🫡", "🎅", "🎄", "☃",
  "💅", "🤪", "🗿", "🆒", "💘", "🙉", "🦄", "😘", "💊", "🙊", "😎", "👾", "🤷‍♂", "🤷", "🤷‍♀", "😡",
]);

const TAGS = new Set(["a", "b", "strong", "i", "em", "s", "strike", "del", "u", "ins", "tg-spoiler", "tg-emoji",
  "tg-time", "span", "pre", "code", "blockquote"]);

/** Parses Telegram HTML like the Bot API does. Returns {text} or {error} (Telegram's wording). */
export function parseTelegramHtml(html) {
  const stack = [];
  let text = "";
  let i = 0;
  const bytesBefore = (idx) => Buffer.byteLength(html.slice(0, idx));
  while (i < html.length) {
    const c = html[i];
    if (c === "&") {
      const m = /^&(lt|gt|amp|quot|#\d{1,7}|#x[0-9a-fA-F]{1,6});/.exec(html.slice(i));
      if (m) {
        const e = m[1];
        text += e === "lt" ? "<" : e === "gt" ? ">" : e === "amp" ? "&" : e === "quot" ? '"'
          : String.fromCodePoint(e[1] === "x" ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10));
        i += m[0].length;
      } else {
        text += "&"; // Telegram keeps an unknown & as text.
        i += 1;
      }
      continue;
    }
    if (c !== "<") {
      text += c;
      i += 1;
      continue;
    }
    const end = html.indexOf(">", i);
    if (end < 0) return { error: `Unclosed start tag at byte offset ${bytesBefore(i)}` };
    const inner = html.slice(i + 1, end);
    if (inner.startsWith("/")) {
      const name = inner.slice(1).trim().toLowerCase();
      if (stack.length === 0) return { error: `Unexpected end tag at byte offset ${bytesBefore(i)}` };
      const open = stack.pop();
      if (name !== "" && name !== open.name) {
        return { error: `Unmatched end tag at byte offset ${bytesBefore(i)}, expected "</${open.name}>", found "</${name}>"` };
      }
    } else {
      const name = inner.split(/[\s]/)[0].toLowerCase();
      if (!TAGS.has(name)) return { error: `Unsupported start tag "${name}" at byte offset ${bytesBefore(i)}` };
      if (name === "span" && !/class="tg-spoiler"/.test(inner)) {
        return { error: `Tag "span" must have class "tg-spoiler" at byte offset ${bytesBefore(i)}` };
      }
      stack.push({ name });
    }
    i = end + 1;
  }
  if (stack.length) return { error: `Can't find end tag corresponding to start tag "${stack[stack.length - 1].name}"` };
  return { text };
}

// Rich messages (Bot API 10.1): the tags of "Rich message formatting options" and the limits
// of InputRichMessage (32768 characters of text, formula sources included; 500 blocks, nested
// ones, list items and table rows included; nesting 16; 20 table columns). The reference names
// no error wording for a refused rich payload: these are the emulator's own, one per limit
// (the bot matches on the 400, never on the words).
export const RICH_LIMITS = { text: 32768, blocks: 500, depth: 16, columns: 20 };
const RICH_INLINE = new Set(["b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "code", "mark", "sub", "sup",
  "tg-spoiler", "tg-emoji", "tg-time", "tg-math", "a", "tg-reference", "th", "td", "summary", "caption", "cite", "figcaption"]);
const RICH_BLOCKS = new Set(["h1", "h2", "h3", "h4", "h5", "h6", "p", "pre", "footer", "ul", "ol", "li", "blockquote",
  "aside", "details", "table", "tr", "tg-math-block", "figure", "tg-map", "tg-collage", "tg-slideshow", "img", "video", "audio"]);
const RICH_VOID = new Set(["hr", "br", "input", "img"]);

/** Parses rich HTML like sendRichMessage does. Returns {text, blocks, depth, columns} or {error}. */
export function parseRichHtml(html, limits = RICH_LIMITS) {
  const stack = [];
  let text = "";
  let blocks = 0;
  let depth = 0;
  let columns = 0;
  const rows = []; // cells of the open <tr>s
  let i = 0;
  while (i < html.length) {
    const c = html[i];
    if (c === "&") {
      const m = /^&(lt|gt|amp|quot|apos|nbsp|#\d{1,7}|#x[0-9a-fA-F]{1,6});/.exec(html.slice(i));
      const e = m?.[1];
      const named = { lt: "<", gt: ">", amp: "&", quot: '"', apos: "'", nbsp: "\u00a0" };
      text += !m ? "&" : named[e] ?? String.fromCodePoint(e[1] === "x" ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10));
      i += m ? m[0].length : 1;
      continue;
    }
    if (c !== "<") {
      text += c;
      i += 1;
      continue;
    }
    const end = html.indexOf(">", i);
    if (end < 0) return { error: "Bad Request: can't parse rich message: unclosed tag" };
    const inner = html.slice(i + 1, end).trim();
    i = end + 1;
    if (inner.startsWith("/")) {
      const name = inner.slice(1).trim().toLowerCase();
      const open = stack.pop();
      if (!open || open !== name) return { error: `Bad Request: can't parse rich message: unexpected end tag "${name}"` };
      if (name === "tr") columns = Math.max(columns, rows.pop() ?? 0);
      continue;
    }
    const name = inner.split(/\s/)[0].replace(/\/$/, "").toLowerCase();
    if (RICH_VOID.has(name)) {
      if (name === "hr") blocks += 1;
      continue;
    }
    if (!RICH_INLINE.has(name) && !RICH_BLOCKS.has(name)) return { error: `Bad Request: can't parse rich message: unsupported tag "${name}"` };
    if (RICH_BLOCKS.has(name)) blocks += 1;
    if ((name === "td" || name === "th") && rows.length) rows[rows.length - 1] += 1;
    if (name === "tr") rows.push(0);
    stack.push(name);
    depth = Math.max(depth, stack.length);
  }
  if (stack.length) return { error: `Bad Request: can't parse rich message: unclosed tag "${stack[stack.length - 1]}"` };
  const length = [...text].length;
  if (length > limits.text) return { error: "Bad Request: RICH_MESSAGE_TEXT_TOO_LONG" };
  if (blocks > limits.blocks) return { error: "Bad Request: RICH_MESSAGE_TOO_MANY_BLOCKS" };
  if (depth > limits.depth) return { error: "Bad Request: RICH_MESSAGE_TOO_DEEP" };
  if (columns > limits.columns) return { error: "Bad Request: RICH_TABLE_TOO_MANY_COLUMNS" };
  if (!text.trim() && blocks === 0) return { error: "Bad Request: rich message is empty" };
  return { text, blocks, depth, columns };
}

/** A rich message's InputRichMessage checked: {parsed} or {error}. The bot sends html only. */
function checkRichMessage(rich, limits) {
  if (!rich || typeof rich !== "object") return { error: "Bad Request: rich_message is required" };
  const forms = ["html", "markdown", "blocks"].filter((k) => rich[k] !== undefined);
  if (forms.length !== 1) return { error: "Bad Request: exactly one of html, markdown or blocks must be used" };
  if (rich.html === undefined) return { error: "Bad Request: the emulator understands only html rich messages" };
  const parsed = parseRichHtml(String(rich.html), limits);
  return parsed.error ? { error: parsed.error } : { parsed };
}

// The Bot API states every answer's length (content-length), as api.telegram.org does.
function json(res, code, headers, body) {
  const text = JSON.stringify(body);
  res.writeHead(code, { ...headers, "content-type": "application/json", "content-length": String(Buffer.byteLength(text)) });
  res.end(text);
}

function ok(res, result) {
  json(res, 200, {}, { ok: true, result });
}

function fail(res, code, description, parameters) {
  const body = { ok: false, error_code: code, description };
  const headers = {};
  if (parameters) {
    body.parameters = parameters;
    if (parameters.retry_after) headers["retry-after"] = String(parameters.retry_after);
  }
  json(res, code, headers, body);
}

/** The emulator without a server: `handle(req, res)` serves /bot<token>/<method>. */
export function createTelegramEmulator({ token, bot = { id: Number(token.split(":")[0]), first_name: "Edge", username: "edge_test_bot" }, firstMessageId = 10_000 } = {}) {
  const requests = [];
  const faults = []; // {method, chatId?, skip, times, status, description?, retry_after?}
  const delays = []; // {method, chatId?, times, ms}: answer late
  const blocked = new Set();
  const stickerSets = new Map();
  const files = new Map(); // file_id -> { file_unique_id, bytes, path, size }
  let nextMessageId = firstMessageId;
  let webhook = { url: "", allowed_updates: [] };
  const pendingUpdates = []; // for getUpdates
  let commands = [];
  let menuButton = { type: "default" };
  const members = new Map(); // chat id -> Map(user id -> status) (getChatMember)
  const markups = new Map(); // "chat:message" -> the reply markup's JSON (editMessageReplyMarkup)
  const { notify, waitFor } = waiters();
  const listeners = [];
  const actors = new Map(); // token → bot: other bots in the same chats (crew mode's persona bots)
  // Rich messages: whether this Bot API server has the methods (an older one answers 404
  // "method not found"), and its limits (lowered by tests).
  const rich = { available: true, limits: { ...RICH_LIMITS } };
  // Drafts shown, by "chat:thread:draft_id": {can_stop, stopped, ended, at}. A draft ends when
  // the bot sends a message to its chat, or 30 s after its last update (the reference's
  // "temporary 30-second preview"); a Stop can be pressed only on a shown draft with can_stop.
  const drafts = new Map();
  // Ephemeral messages (Bot API 10.2/10.3), by "chat:ephemeral_message_id": {user, at}; the
  // chats where the bot is an admin (it may then send ephemeral messages at any time).
  const ephemerals = new Map();
  const admins = new Set();
  let nextEphemeralId = 1;
  // Topics of private chats (Bot API 9.3/9.4), by "chat:thread": {name, is_name_implicit}.
  const topics = new Map();
  // The bot's topics in private chats (getMe's has_topics_enabled) and the chats refusing them.
  const privateTopics = { enabled: false, refused: new Set() };
  const bots = new Set(); // other bots' user ids in groups (an ephemeral message never goes to one)
  // Guest mode (Bot API 10.0): whether getMe says supports_guest_queries (BotFather's
  // setting), the open guest queries by guest_query_id {chat, user, at, answered}, and the
  // guest messages the bot sent by inline_message_id {chat, query, text, html, edits}. The
  // reference states no answer window: the emulator assumes inline queries' 10 s
  // (GUEST_QUERY_WINDOW_MS) and edits of the sent message at any time.
  const guest = { enabled: false, queries: new Map(), messages: new Map(), nextId: 1 };
  // Telegram Business: connections by id, as getBusinessConnection answers them (it answers a
  // disabled one too, from its cache; an unknown or empty id: "business connection not found",
  // the Bot API server's wording, tdlib/telegram-bot-api Client.cpp).
  // `incoming`: when each contact (by "connection:chat") last wrote, for the 24-hour rule
  // (BUSINESS_PEER_USAGE_MISSING past it); a connection off or without can_reply refuses a
  // send with BOT_ACCESS_FORBIDDEN (assumed: Telegram's own code, which the Bot API server
  // passes through; the reference states none).
  // Business chats number their messages in one sequence of the owner's account (`nextMessageId`:
  // the contacts', the owner's and the bot's sends alike); updates of a connection come in
  // order (`nextUpdateId`), and a connection keeps the `date` it was made.
  const business = { connections: new Map(), nextMessageId: 1, nextUpdateId: 500_000_000 + Math.floor(Math.random() * 1e8), incoming: new Map(), read: new Map() };
  // Inline buttons' presses (callback queries) by id: {at, answered, text}. Telegram's clients
  // wait about 15 s for an answer (assumed: the reference says only "must be called"); later,
  // a second time, or an unknown id: "query is too old…" (the Bot API server's wording).
  const callbacks = new Map();
  let nextCallbackId = 1;
  // The bot's sent messages by "chat:message_id": {text, html} (editMessageText of a chat message).
  const sentTexts = new Map();
  const draftKey = (chat, thread, id) => `${chat}:${thread ?? ""}:${id}`;
  function showDraft(body) {
    const key = draftKey(body.chat_id, body.message_thread_id, body.draft_id);
    const d = drafts.get(key) ?? { stopped: false };
    drafts.set(key, { ...d, chat: body.chat_id, thread: body.message_thread_id ?? null, draft_id: body.draft_id, can_stop: body.can_stop === true, keep_on_stop: body.keep_on_stop === true, ended: false, at: Date.now() });
    return d.stopped;
  }
  function endDrafts(chat) {
    for (const d of drafts.values()) if (d.chat === chat) d.ended = true;
  }

  /** Reports a bot action (message, reaction, sticker, typing) to listeners. */
  function emit(event) {
    for (const l of listeners) l(event);
  }

  /** `GET /file/bot<token>/<file_path>`: a file's bytes, as Telegram serves downloads. */
  function download(req, res) {
    const m = /^\/file\/bot([^/]+)\/(.+)$/.exec(new URL(req.url, "http://x").pathname);
    if (!m) return false;
    const file = [...files.values()].find((f) => f.path === m[2]);
    requests.push({ method: "download", body: { file_path: m[2] }, at: Date.now() });
    notify();
    if (m[1] !== token) fail(res, 401, "Unauthorized");
    else if (!file) fail(res, 404, "Not Found");
    else {
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": String(file.bytes.length) });
      res.end(file.bytes);
    }
    return true;
  }

  async function handleRequest(req, res) {
    if (req.method === "GET" && download(req, res)) return;
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const bytes = Buffer.concat(chunks);
    const m = /^\/bot([^/]+)\/([A-Za-z]+)$/.exec(new URL(req.url, "http://x").pathname);
    if (!m) return fail(res, 404, "Not Found");
    const actor = m[1] === token ? null : actors.get(m[1]);
    if (m[1] !== token && !actor) return fail(res, 401, "Unauthorized");
    const method = m[2];
    let body = {};
    const multipart = /^multipart\/form-data;\s*boundary=("?)([^";]+)\1/i.exec(req.headers["content-type"] ?? "");
    if (multipart) {
      // An upload (sendPhoto): the fields as text, the files as bytes (body.files).
      if (bytes.length > UPLOAD_LIMIT) return fail(res, 413, "Request Entity Too Large");
      body = parseMultipart(bytes, multipart[2]);
      if (!body) return fail(res, 400, "Bad Request: can't parse multipart/form-data");
      if (body.chat_id !== undefined && /^-?\d+$/.test(body.chat_id)) body.chat_id = Number(body.chat_id);
    } else {
      try {
        const raw = bytes.toString("utf8");
        body = raw ? JSON.parse(raw) : {};
      } catch {
        return fail(res, 400, "Bad Request: can't parse JSON");
      }
    }
    // `from`: which bot called (the main bot, or an added bot by its token).
    const entry = { method, body, at: Date.now(), from: actor ?? bot };
    requests.push(entry);
    // A slow answer (the request is recorded on arrival, answered after the delay).
    const slow = delays.find((d) => d.method === method && (d.chatId === undefined || d.chatId === body.chat_id) && d.times > 0);
    if (slow) {
      slow.times -= 1;
      notify();
      await new Promise((r) => setTimeout(r, slow.ms));
    }
    try {
      handle(method, body, res, entry);
    } finally {
      notify();
    }
  }

  function handle(method, body, res, entry) {
    const chatId = body.chat_id;
    const fault = faults.find((f) => f.method === method && (f.chatId === undefined || f.chatId === chatId) && f.times > 0);
    if (fault && fault.skip > 0) {
      fault.skip -= 1;
    } else if (fault) {
      fault.times -= 1;
      entry.fault = fault.status;
      if (fault.status === 429) {
        return fail(res, 429, `Too Many Requests: retry after ${fault.retry_after}`, { retry_after: fault.retry_after });
      }
      return fail(res, fault.status, fault.description ?? (fault.status >= 500 ? "Internal Server Error" : "Bad Request"));
    }
    if (chatId !== undefined && blocked.has(chatId)) {
      entry.fault = 403;
      return fail(res, 403, "Forbidden: bot was blocked by the user");
    }
    switch (method) {
      case "getMe":
        return ok(res, { ...(entry.from ?? bot), is_bot: true, can_join_groups: true, can_read_all_group_messages: false, has_topics_enabled: privateTopics.enabled, ...(guest.enabled && entry.from === bot ? { supports_guest_queries: true } : {}) });
      // A topic in a private chat (Bot API 9.4; forum groups are not emulated here): only when
      // the bot's topics are on (BotFather) and not refused for that chat, "the chat is not a
      // forum" otherwise (the wording people report); a name of 1-128 characters
      // (TOPIC_TITLE_EMPTY / TOPIC_NAME_INVALID: MTProto's names, the reference states none).
      case "createForumTopic": {
        if (chatId === undefined || chatId === null || chatId === "") return fail(res, 400, "Bad Request: chat_id is empty");
        if (!(Number(chatId) > 0) || !privateTopics.enabled || privateTopics.refused.has(Number(chatId))) return fail(res, 400, "Bad Request: the chat is not a forum");
        const name = typeof body.name === "string" ? body.name : "";
        if (!name) return fail(res, 400, "Bad Request: TOPIC_TITLE_EMPTY");
        if ([...name].length > 128) return fail(res, 400, "Bad Request: TOPIC_NAME_INVALID");
        const thread = nextMessageId++;
        const created = { name, icon_color: body.icon_color ?? 7322096 };
        const service = { message_id: thread, date: Math.floor(Date.now() / 1000), chat: { id: chatId, type: "private" }, message_thread_id: thread, is_topic_message: true, forum_topic_created: created };
        topics.set(`${chatId}:${thread}`, { name, is_name_implicit: false, service });
        emit({ type: "topic", chat_id: chatId, thread, name, created: true });
        return ok(res, { message_thread_id: thread, name, icon_color: created.icon_color });
      }
      case "answerGuestQuery":
        return answerGuestQuery(body, res, entry);
      case "answerCallbackQuery": {
        const q = callbacks.get(String(body.callback_query_id ?? ""));
        if (!q || q.answered || Date.now() - q.at > 15_000) return fail(res, 400, "Bad Request: query is too old and response timeout expired or query ID is invalid");
        if (body.text !== undefined && [...String(body.text)].length > 200) return fail(res, 400, "Bad Request: MESSAGE_TOO_LONG");
        Object.assign(q, { answered: true, text: body.text ?? "" });
        return ok(res, true);
      }
      // readBusinessMessage: the connection must be on with can_read_messages (else
      // BOT_ACCESS_FORBIDDEN, assumed as for sends) and the chat active in the last 24 hours.
      case "readBusinessMessage": {
        const c = business.connections.get(String(body.business_connection_id ?? ""));
        if (!c) return fail(res, 400, "Bad Request: business connection not found");
        if (!c.is_enabled || !c.rights?.can_read_messages) return fail(res, 400, "Bad Request: BOT_ACCESS_FORBIDDEN");
        const last = business.incoming.get(`${c.id}:${chatId}`);
        if (last === undefined || Date.now() - last > 24 * 3600 * 1000) return fail(res, 400, "Bad Request: BUSINESS_PEER_USAGE_MISSING");
        if (!Number.isInteger(body.message_id) || body.message_id <= 0) return fail(res, 400, "Bad Request: invalid message identifier specified");
        business.read.set(`${c.id}:${chatId}`, Math.max(business.read.get(`${c.id}:${chatId}`) ?? 0, body.message_id));
        return ok(res, true);
      }
      case "getBusinessConnection": {
        const c = business.connections.get(String(body.business_connection_id ?? ""));
        if (!c) return fail(res, 400, "Bad Request: business connection not found");
        return ok(res, c);
      }
      case "editMessageText":
        return editMessageText(body, res, entry);
      case "sendMessage": {
        if (chatId === undefined || chatId === null || chatId === "") return fail(res, 400, "Bad Request: chat_id is empty");
        if (typeof body.text !== "string" || body.text === "") return fail(res, 400, "Bad Request: message text is empty");
        let text = body.text;
        if (body.parse_mode) {
          if (String(body.parse_mode).toLowerCase() !== "html") return fail(res, 400, "Bad Request: unsupported parse_mode");
          const parsed = parseTelegramHtml(body.text);
          if (parsed.error) return fail(res, 400, `Bad Request: can't parse entities: ${parsed.error}`);
          text = parsed.text;
        }
        text = text.trim();
        if (!text) return fail(res, 400, "Bad Request: text must be non-empty");
        if ([...text].length > 4096) return fail(res, 400, "Bad Request: message is too long");
        const badButton = (body.reply_markup?.inline_keyboard ?? []).flat().find((b) => b.callback_data !== undefined && !(Buffer.byteLength(String(b.callback_data)) >= 1 && Buffer.byteLength(String(b.callback_data)) <= 64));
        if (badButton) return fail(res, 400, "Bad Request: BUTTON_DATA_INVALID");
        if (body.business_connection_id !== undefined) {
          const c = business.connections.get(String(body.business_connection_id));
          if (!c) return fail(res, 400, "Bad Request: business connection not found");
          if (!c.is_enabled || !c.rights?.can_reply) return fail(res, 400, "Bad Request: BOT_ACCESS_FORBIDDEN");
          const last = business.incoming.get(`${c.id}:${chatId}`);
          if (last === undefined || Date.now() - last > 24 * 3600 * 1000) return fail(res, 400, "Bad Request: BUSINESS_PEER_USAGE_MISSING");
          entry.business = c.id;
        }
        if (body.ephemeral_message_parameters) {
          // Only the receiver sees it. Groups only; without admin rights, only as a reply to
          // the receiver's ephemeral message within 15 s of it. The reference states no error
          // wording: these are the emulator's own.
          const receiver = body.ephemeral_message_parameters.receiver_user_id;
          if (!Number.isInteger(receiver)) return fail(res, 400, "Bad Request: receiver_user_id is required");
          if (!(Number(chatId) < 0)) return fail(res, 400, "Bad Request: EPHEMERAL_PEER_INVALID");
          // Never to a bot; only to a member (a person the emulator was told left or was
          // removed is not one; others are taken as members: group messages reach the worker
          // straight from the tests). Wording: MTProto's error names, the reference has none.
          if (receiver === bot.id || [...actors.values()].some((a) => a.id === receiver) || bots.has(receiver)) return fail(res, 400, "Bad Request: USER_IS_BOT");
          if (["left", "kicked"].includes(members.get(Number(chatId))?.get(receiver))) return fail(res, 400, "Bad Request: USER_NOT_PARTICIPANT");
          if (!admins.has(chatId)) {
            const replied = ephemerals.get(`${chatId}:${body.reply_parameters?.ephemeral_message_id}`);
            if (!replied || replied.user !== receiver) return fail(res, 400, "Bad Request: EPHEMERAL_REPLY_REQUIRED");
            if (Date.now() - replied.at > 15_000) return fail(res, 400, "Bad Request: EPHEMERAL_REPLY_EXPIRED");
          }
          entry.text = text;
          entry.ephemeral = receiver;
          const message = { message_id: 0, ephemeral_message_id: nextEphemeralId++, receiver_user: { id: receiver, is_bot: false, first_name: "" }, from: { ...(entry.from ?? bot), is_bot: true }, chat: { id: chatId }, date: Math.floor(Date.now() / 1000), text };
          emit({ type: "message", ephemeral: true, receiver, chat_id: chatId, from: message.from.username, message_id: 0, text, html: body.parse_mode ? body.text : null, reply_to: null, thread: body.message_thread_id ?? null });
          return ok(res, message);
        }
        entry.text = text;
        const message = { message_id: nextMessageId++, from: { ...(entry.from ?? bot), is_bot: true }, chat: { id: chatId }, date: Math.floor(Date.now() / 1000), text };
        if (body.message_thread_id) message.message_thread_id = body.message_thread_id;
        if (entry.business) {
          // Sent in the owner's chat with the contact: the owner's account is the sender, the
          // bot the business bot, the id from that account's sequence.
          Object.assign(message, { message_id: business.nextMessageId++, business_connection_id: entry.business, from: business.connections.get(entry.business).user, sender_business_bot: { ...bot, is_bot: true } });
        }
        entry.message_id = message.message_id;
        sentTexts.set(`${chatId}:${message.message_id}`, { text, html: body.parse_mode ? body.text : null });
        if (body.reply_markup?.inline_keyboard) markups.set(`${chatId}:${message.message_id}`, JSON.stringify(body.reply_markup));
        endDrafts(chatId);
        // Inline buttons that send a callback query (a suggestion's Send and Skip), and the
        // business connection a message went through: the playground shows both.
        const buttons = (body.reply_markup?.inline_keyboard ?? []).flat().filter((b) => b.callback_data !== undefined).map((b) => ({ text: b.text, data: b.callback_data }));
        emit({ type: "message", chat_id: chatId, from: message.from.username, message_id: message.message_id, text, html: body.parse_mode ? body.text : null, reply_to: body.reply_parameters?.message_id ?? null, thread: body.message_thread_id ?? null, ...(buttons.length ? { buttons } : {}), ...(entry.business ? { business: entry.business } : {}) });
        return ok(res, message);
      }
      case "setMessageReaction": {
        const reaction = body.reaction ?? [];
        for (const r of reaction) {
          if (r.type !== "emoji") return fail(res, 400, "Bad Request: can't parse ReactionType: invalid reaction type specified");
          if (!REACTION_EMOJI.has(r.emoji)) return fail(res, 400, "Bad Request: REACTION_INVALID");
        }
        emit({ type: "reaction", chat_id: chatId, message_id: body.message_id, emoji: reaction.map((r) => r.emoji).join("") });
        return ok(res, true);
      }
      case "getFile": {
        const f = files.get(body.file_id);
        if (!f) return fail(res, 400, "Bad Request: invalid file_id");
        if (f.size > 20 * 1024 * 1024) return fail(res, 400, "Bad Request: file is too big");
        return ok(res, { file_id: body.file_id, file_unique_id: f.file_unique_id, file_size: f.size, file_path: f.path });
      }
      case "sendMessageDraft": {
        // Bot API 9: a partial message streamed to a private chat; an empty text shows
        // "Thinking…". Private chats only (positive ids), a non-zero draft id, text checked
        // like sendMessage's (entities, at most 4096 characters after parsing).
        if (chatId === undefined || chatId === null || chatId === "") return fail(res, 400, "Bad Request: chat_id is empty");
        if (!(Number(chatId) > 0)) return fail(res, 400, "Bad Request: TEXTDRAFT_PEER_INVALID");
        // sendMessageDraft takes no business_connection_id: a business chat has no drafts. The
        // Bot API would ignore the field and stream into the bot's own chat with that id (the
        // contact's private chat with the bot), so the fake refuses it loudly instead (assumed
        // wording).
        if (body.business_connection_id !== undefined) return fail(res, 400, "Bad Request: drafts are not available in business chats");
        if (!Number.isInteger(body.draft_id) || body.draft_id === 0) return fail(res, 400, "Bad Request: draft_id must be non-zero");
        let text = body.text ?? "";
        if (typeof text !== "string") return fail(res, 400, "Bad Request: text must be a string");
        if (body.parse_mode && text) {
          if (String(body.parse_mode).toLowerCase() !== "html") return fail(res, 400, "Bad Request: unsupported parse_mode");
          const parsed = parseTelegramHtml(text);
          if (parsed.error) return fail(res, 400, `Bad Request: can't parse entities: ${parsed.error}`);
          text = parsed.text;
        }
        if ([...text].length > 4096) return fail(res, 400, "Bad Request: text is too long");
        // After a Stop the client shows no further drafts of that id ("stop further drafts");
        // the reference states no error for them: they are accepted and not shown.
        if (showDraft(body)) entry.afterStop = true;
        entry.draft = text;
        emit({ type: "draft", chat_id: chatId, draft_id: body.draft_id, text, can_stop: body.can_stop === true, thread: body.message_thread_id ?? null });
        return ok(res, true);
      }
      case "sendRichMessage": {
        if (!rich.available) return fail(res, 404, "Not Found: method not found");
        if (chatId === undefined || chatId === null || chatId === "") return fail(res, 400, "Bad Request: chat_id is empty");
        const checked = checkRichMessage(body.rich_message, rich.limits);
        if (checked.error) return fail(res, 400, checked.error);
        entry.rich = body.rich_message.html;
        entry.text = checked.parsed.text;
        const message = { message_id: nextMessageId++, from: { ...(entry.from ?? bot), is_bot: true }, chat: { id: chatId }, date: Math.floor(Date.now() / 1000), rich_message: { blocks: [] } };
        if (body.message_thread_id) message.message_thread_id = body.message_thread_id;
        endDrafts(chatId);
        emit({ type: "rich", chat_id: chatId, from: message.from.username, message_id: message.message_id, html: body.rich_message.html, text: checked.parsed.text, reply_to: body.reply_parameters?.message_id ?? null, thread: body.message_thread_id ?? null });
        return ok(res, message);
      }
      case "sendRichMessageDraft": {
        // A rich draft: private chats only, a non-zero draft id, the payload checked as for
        // sendRichMessage (the reference states no separate draft limit).
        if (!rich.available) return fail(res, 404, "Not Found: method not found");
        if (!(Number(chatId) > 0)) return fail(res, 400, "Bad Request: TEXTDRAFT_PEER_INVALID");
        // sendMessageDraft takes no business_connection_id: a business chat has no drafts. The
        // Bot API would ignore the field and stream into the bot's own chat with that id (the
        // contact's private chat with the bot), so the fake refuses it loudly instead (assumed
        // wording).
        if (body.business_connection_id !== undefined) return fail(res, 400, "Bad Request: drafts are not available in business chats");
        if (!Number.isInteger(body.draft_id) || body.draft_id === 0) return fail(res, 400, "Bad Request: draft_id must be non-zero");
        const checked = checkRichMessage(body.rich_message, rich.limits);
        if (checked.error) return fail(res, 400, checked.error);
        if (showDraft(body)) entry.afterStop = true;
        entry.draft = checked.parsed.text;
        emit({ type: "draft", chat_id: chatId, draft_id: body.draft_id, text: checked.parsed.text, html: body.rich_message.html, rich: true, can_stop: body.can_stop === true, thread: body.message_thread_id ?? null });
        return ok(res, true);
      }
      case "editForumTopic": {
        // A forum supergroup's or a private chat's topic: 0-128 characters (empty keeps the
        // name); an unknown or deleted topic is "message thread not found".
        const topic = topics.get(`${chatId}:${body.message_thread_id}`);
        if (!topic) return fail(res, 400, "Bad Request: message thread not found");
        if (body.name !== undefined && [...String(body.name)].length > 128) return fail(res, 400, "Bad Request: TOPIC_NAME_INVALID");
        if (body.name) Object.assign(topic, { name: String(body.name), is_name_implicit: false });
        emit({ type: "topic", chat_id: chatId, thread: body.message_thread_id, name: topic.name });
        return ok(res, true);
      }
      case "sendChatAction":
        if (!body.action) return fail(res, 400, "Bad Request: wrong parameter action in request");
        if (body.business_connection_id !== undefined) {
          // In a business chat, as a send: the connection on, with the right to reply.
          const c = business.connections.get(String(body.business_connection_id));
          if (!c) return fail(res, 400, "Bad Request: business connection not found");
          if (!c.is_enabled || !c.rights?.can_reply) return fail(res, 400, "Bad Request: BOT_ACCESS_FORBIDDEN");
          emit({ type: "typing", chat_id: chatId, thread: null, business: c.id });
          return ok(res, true);
        }
        emit({ type: "typing", chat_id: chatId, thread: body.message_thread_id ?? null });
        return ok(res, true);
      case "getStickerSet": {
        const set = stickerSets.get(body.name);
        if (!set) return fail(res, 400, "Bad Request: STICKERSET_INVALID");
        return ok(res, set);
      }
      case "sendSticker":
        if (!body.sticker) return fail(res, 400, "Bad Request: there is no sticker in the request");
        {
          const sticker = [...stickerSets.values()].flatMap((s) => s.stickers).find((s) => s.file_id === body.sticker);
          const message_id = nextMessageId++;
          emit({ type: "sticker", chat_id: chatId, message_id, emoji: sticker?.emoji ?? "🖼", thread: body.message_thread_id ?? null });
          return ok(res, { message_id, chat: { id: chatId }, date: Math.floor(Date.now() / 1000), sticker: { file_id: body.sticker } });
        }
      case "sendPhoto":
        return sendPhoto(body, res, entry);
      case "setWebhook":
        if (body.secret_token && !/^[A-Za-z0-9_-]{1,256}$/.test(body.secret_token)) {
          return fail(res, 400, "Bad Request: secret token contains unallowed characters");
        }
        webhook = { url: body.url ?? "", allowed_updates: body.allowed_updates ?? [], secret_token: body.secret_token };
        return ok(res, true);
      case "deleteWebhook":
        webhook = { url: "", allowed_updates: [] };
        return ok(res, true);
      case "getWebhookInfo":
        return ok(res, { url: webhook.url, has_custom_certificate: false, pending_update_count: 0, allowed_updates: webhook.allowed_updates });
      case "setMyCommands":
        commands = body.commands ?? [];
        return ok(res, true);
      // The menu button (Bot API): a Web App button's URL must be HTTPS, as Telegram refuses
      // others; the default menu when none was set.
      case "setChatMenuButton": {
        const b = body.menu_button ?? { type: "default" };
        if (!["default", "commands", "web_app"].includes(b.type)) return fail(res, 400, "Bad Request: unsupported menu button type");
        if (b.type === "web_app") {
          if (typeof b.text !== "string" || !b.text) return fail(res, 400, "Bad Request: menu button text is empty");
          if (!/^https:\/\//.test(b.web_app?.url ?? "")) return fail(res, 400, `Bad Request: Web App URL '${b.web_app?.url ?? ""}' is invalid: Only HTTPS links are allowed`);
        }
        menuButton = b;
        return ok(res, true);
      }
      case "getChatMenuButton":
        return ok(res, menuButton);
      // A member of a group, as the bot sees it: a chat it knows nothing of is "chat not
      // found"; a user who is not in it is "left" (Telegram answers so for non-members).
      // The bot itself: "administrator" where setAdmin made it one, else "member" (it gets
      // the group's messages), in any group (what `bot::to_one_person` asks before an any-time
      // ephemeral message).
      case "getChatMember": {
        const chat = members.get(Number(chatId)) ?? (body.user_id === bot.id && Number(chatId) < 0 ? new Map() : null);
        if (!chat) return fail(res, 400, "Bad Request: chat not found");
        if (!Number.isInteger(body.user_id)) return fail(res, 400, "Bad Request: invalid user_id specified");
        const status = body.user_id === bot.id ? (admins.has(Number(chatId)) ? "administrator" : "member") : chat.get(body.user_id) ?? "left";
        return ok(res, { status, user: { id: body.user_id, is_bot: false, first_name: "User" }, ...(status === "restricted" ? { is_member: true } : {}) });
      }
      // Buttons under a message the bot sent (the Mini App's under /memory and /reminders).
      // As Telegram: the message must exist; a Web App button needs an HTTPS URL and a
      // private chat; the same markup again is "not modified".
      case "editMessageReplyMarkup": {
        if (chatId === undefined || chatId === null || chatId === "") return fail(res, 400, "Bad Request: chat_id is empty");
        const id = body.message_id;
        if (!Number.isInteger(id) || id <= 0 || id >= nextMessageId) return fail(res, 400, "Bad Request: message to edit not found");
        const rows = body.reply_markup?.inline_keyboard;
        if (!Array.isArray(rows) || !rows.every(Array.isArray)) return fail(res, 400, "Bad Request: can't parse reply keyboard markup JSON object");
        for (const b of rows.flat()) {
          if (typeof b.text !== "string" || !b.text) return fail(res, 400, "Bad Request: text buttons are unallowed in the inline keyboard");
          if (b.web_app) {
            if (!/^https:\/\//.test(b.web_app.url ?? "")) return fail(res, 400, `Bad Request: inline keyboard button Web App URL '${b.web_app.url ?? ""}' is invalid: Only HTTPS links are allowed`);
            if (Number(chatId) < 0) return fail(res, 400, "Bad Request: BUTTON_TYPE_INVALID");
          }
        }
        const key = `${chatId}:${id}`;
        const json = JSON.stringify(body.reply_markup);
        if (markups.get(key) === json) return fail(res, 400, "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message");
        markups.set(key, json);
        emit({ type: "markup", chat_id: chatId, message_id: id, reply_markup: body.reply_markup });
        return ok(res, { message_id: id, chat: { id: chatId }, date: Math.floor(Date.now() / 1000), reply_markup: body.reply_markup });
      }
      case "getUpdates": {
        if (webhook.url) {
          return fail(res, 409, "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first");
        }
        const offset = body.offset ?? 0;
        while (pendingUpdates.length && pendingUpdates[0].update_id < offset) pendingUpdates.shift();
        const batch = pendingUpdates.slice(0, body.limit ?? 100);
        if (batch.length || !body.timeout) return ok(res, batch);
        // Long polling, shortened: answer empty after a moment.
        return setTimeout(() => ok(res, pendingUpdates.filter((u) => u.update_id >= offset).slice(0, 100)), 200);
      }
      default:
        return fail(res, 404, "Not Found: method not found");
    }
  }

  /** `answerGuestQuery` (Bot API 10.0): one InlineQueryResult for an open guest query, once.
   *  An unknown query id, or one older than the window, is Telegram's "query is too old"; a
   *  second answer is refused the same way (the query is used up). The result is checked as an
   *  inline result: an id of 1-64 bytes, a known type, input_message_content with a message
   *  text of 1-4096 characters after entities parsing. Returns SentGuestMessage. */
  function answerGuestQuery(body, res, entry) {
    const q = guest.queries.get(body.guest_query_id);
    const TOO_OLD = "Bad Request: query is too old and response timeout expired or query ID is invalid";
    if (typeof body.guest_query_id !== "string" || !q || q.answered || Date.now() - q.at > GUEST_QUERY_WINDOW_MS) return fail(res, 400, TOO_OLD);
    const r = body.result;
    if (!r || typeof r !== "object") return fail(res, 400, "Bad Request: result is required");
    if (typeof r.id !== "string" || !r.id || Buffer.byteLength(r.id) > 64) return fail(res, 400, "Bad Request: RESULT_ID_INVALID");
    if (r.type !== "article") return fail(res, 400, "Bad Request: RESULT_TYPE_INVALID");
    const content = r.input_message_content;
    if (!content || typeof content.message_text !== "string") return fail(res, 400, "Bad Request: input_message_content is required");
    const checked = checkText(content.message_text, content.parse_mode);
    if (checked.error) return fail(res, 400, checked.error);
    q.answered = true;
    const inline_message_id = `AgAAA${guest.nextId++}${crypto.randomBytes(6).toString("base64url")}`;
    guest.messages.set(inline_message_id, { chat: q.chat, query: body.guest_query_id, text: checked.text, html: content.parse_mode ? content.message_text : null, edits: 0 });
    entry.text = checked.text;
    emit({ type: "guest", chat_id: q.chat, inline_message_id, text: checked.text, html: content.parse_mode ? content.message_text : null, caller: q.user, edited: false });
    return ok(res, { inline_message_id });
  }

  /** A message text as sendMessage checks it: `{text}` or `{error}`. */
  function checkText(raw, parseMode) {
    let text = raw;
    if (parseMode) {
      if (String(parseMode).toLowerCase() !== "html") return { error: "Bad Request: unsupported parse_mode" };
      const parsed = parseTelegramHtml(raw);
      if (parsed.error) return { error: `Bad Request: can't parse entities: ${parsed.error}` };
      text = parsed.text;
    }
    text = text.trim();
    if (!text) return { error: "Bad Request: message text is empty" };
    if ([...text].length > 4096) return { error: "Bad Request: MESSAGE_TOO_LONG" };
    return { text };
  }

  /** `editMessageText`, for inline messages (`inline_message_id`: the guest messages the bot
   *  sent) only; the same text again is "message is not modified", an unknown id
   *  "MESSAGE_ID_INVALID". Returns true, as for inline messages. */
  /** editMessageText of a chat message the bot sent: the text, and the buttons as given (none
   *  given: none left, as Telegram removes an inline keyboard an edit does not repeat). */
  function editChatMessage(body, res, entry) {
    const key = `${body.chat_id}:${body.message_id}`;
    const m = sentTexts.get(key);
    if (!m) return fail(res, 400, "Bad Request: message to edit not found");
    if (typeof body.text !== "string" || !body.text) return fail(res, 400, "Bad Request: message text is empty");
    const checked = checkText(body.text, body.parse_mode);
    if (checked.error) return fail(res, 400, checked.error);
    const html = body.parse_mode ? body.text : null;
    const markup = body.reply_markup ? JSON.stringify(body.reply_markup) : undefined;
    if (checked.text === m.text && html === m.html && markup === markups.get(key)) return fail(res, 400, "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message");
    Object.assign(m, { text: checked.text, html });
    if (markup === undefined) markups.delete(key);
    else markups.set(key, markup);
    entry.text = checked.text;
    emit({ type: "edit", chat_id: body.chat_id, message_id: body.message_id, text: checked.text, html });
    return ok(res, { message_id: body.message_id, chat: { id: body.chat_id }, date: Math.floor(Date.now() / 1000), text: checked.text });
  }

  function editMessageText(body, res, entry) {
    if (body.inline_message_id === undefined) return editChatMessage(body, res, entry);
    const m = guest.messages.get(body.inline_message_id);
    if (!m) return fail(res, 400, "Bad Request: MESSAGE_ID_INVALID");
    if (typeof body.text !== "string") return fail(res, 400, "Bad Request: message text is empty");
    // LinkPreviewOptions is an object; anything else is refused as Telegram refuses a field it
    // cannot parse.
    const lp = body.link_preview_options;
    if (lp !== undefined && (typeof lp !== "object" || lp === null || Array.isArray(lp) || (lp.is_disabled !== undefined && typeof lp.is_disabled !== "boolean"))) {
      return fail(res, 400, "Bad Request: can't parse link preview options JSON object");
    }
    const checked = checkText(body.text, body.parse_mode);
    if (checked.error) return fail(res, 400, checked.error);
    const html = body.parse_mode ? body.text : null;
    if (checked.text === m.text && html === m.html) return fail(res, 400, "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message");
    Object.assign(m, { text: checked.text, html, edits: m.edits + 1 });
    entry.text = checked.text;
    emit({ type: "guest", chat_id: m.chat, inline_message_id: body.inline_message_id, text: checked.text, html, edited: true });
    return ok(res, true);
  }

  /** `sendPhoto` with an uploaded file, with the Bot API's limits: at most 10 MB, width and
   *  height at most 10000 in total and a ratio of at most 20 (PHOTO_INVALID_DIMENSIONS), a
   *  caption of at most 1024 characters; a file that is no image is IMAGE_PROCESS_FAILED. The
   *  photo is kept as a file (getFile and download serve it, as Telegram does for the bot). */
  function sendPhoto(body, res, entry) {
    const chatId = body.chat_id === undefined ? undefined : Number(body.chat_id);
    if (chatId === undefined || Number.isNaN(chatId)) return fail(res, 400, "Bad Request: chat_id is empty");
    const file = body.files?.photo;
    if (!file) {
      if (typeof body.photo === "string" && files.has(body.photo)) return fail(res, 400, "Bad Request: this emulator takes uploaded photos only");
      return fail(res, 400, "Bad Request: there is no photo in the request");
    }
    if (file.bytes.length > 10 * 1024 * 1024) return fail(res, 400, "Bad Request: PHOTO_SAVE_FILE_INVALID");
    const size = imageSize(file.bytes);
    if (!size) return fail(res, 400, "Bad Request: IMAGE_PROCESS_FAILED");
    if (size.width + size.height > 10000 || Math.max(size.width, size.height) / Math.max(1, Math.min(size.width, size.height)) > 20) {
      return fail(res, 400, "Bad Request: PHOTO_INVALID_DIMENSIONS");
    }
    const caption = body.caption ?? "";
    if ([...caption].length > 1024) return fail(res, 400, "Bad Request: message caption is too long");
    const message_id = nextMessageId++;
    const fileId = `photo-${message_id}`;
    files.set(fileId, { file_unique_id: `u-${fileId}`, bytes: file.bytes, path: `photos/${fileId}`, size: file.bytes.length });
    entry.photo = { bytes: file.bytes, caption, filename: file.filename, contentType: file.contentType };
    entry.body.chat_id = chatId;
    const reply = body.reply_parameters ? JSON.parse(body.reply_parameters) : null;
    // A small picture travels with the event (the playground shows it).
    const data_url = file.bytes.length <= 1024 * 1024 ? `data:${file.contentType || "image/png"};base64,${file.bytes.toString("base64")}` : null;
    emit({ type: "photo", chat_id: chatId, from: (entry.from ?? bot).username, message_id, caption, bytes: file.bytes.length, data_url, reply_to: reply?.message_id ?? null, thread: body.message_thread_id ? Number(body.message_thread_id) : null });
    const photo = [{ file_id: fileId, file_unique_id: `u-${fileId}`, width: size.width, height: size.height, file_size: file.bytes.length }];
    return ok(res, { message_id, from: { ...(entry.from ?? bot), is_bot: true }, chat: { id: chatId }, date: Math.floor(Date.now() / 1000), photo, ...(caption ? { caption } : {}) });
  }

  return {
    handle: handleRequest,
    /** The next message id of the (one, shared) sequence, as Telegram numbers a chat. */
    nextMessageId: () => nextMessageId++,
    on(listener) {
      listeners.push(listener);
    },
    bot,
    requests,
    get webhook() {
      return webhook;
    },
    get commands() {
      return commands;
    },
    /** Sets a user's status in a group ("creator", "administrator", "member", "left", …). */
    setMember(chatId, userId, status) {
      if (!members.has(chatId)) members.set(chatId, new Map());
      members.get(chatId).set(userId, status);
    },
    /** The inline keyboard under a bot message (editMessageReplyMarkup), or undefined. */
    markupOf(chatId, messageId) {
      const m = markups.get(`${chatId}:${messageId}`);
      return m === undefined ? undefined : JSON.parse(m);
    },
    /** The menu button setChatMenuButton set (`{type: "default"}` until then). */
    get menuButton() {
      return menuButton;
    },
    /** Requests of `method` (optionally to `chatId`). */
    calls(method, chatId) {
      return requests.filter((r) => r.method === method && (chatId === undefined || r.body.chat_id === chatId));
    },
    /** Successful sendMessage texts to a chat, as Telegram would show them. */
    sent(chatId) {
      return requests.filter((r) => r.method === "sendMessage" && r.body.chat_id === chatId && r.text !== undefined).map((r) => r.text);
    },
    /** Queues an update for getUpdates (the bridge's source). */
    queueUpdate(update) {
      pendingUpdates.push(update);
    },
    /** Answers the next `times` calls of `method` (to `chatId`) after `ms` milliseconds.
     *  Returns the delay: setting its `times` to 0 lifts it. */
    delay(d) {
      const delay = { times: 1, ...d };
      delays.push(delay);
      return delay;
    },
    /** Fails the next `times` calls of `method` (to `chatId`), after letting `skip` pass.
     *  Returns the fault: setting its `times` to 0 lifts it. */
    fault(f) {
      const fault = { times: 1, skip: 0, ...f };
      faults.push(fault);
      return fault;
    },
    /** Another bot this emulator serves (its own token, `/bot<token>/<method>`), as a crew
     *  persona's bot; its calls are recorded with `from` set to it. */
    addBot(botToken, other) {
      actors.set(botToken, { id: Number(botToken.split(":")[0]), ...other });
    },
    block(chatId) {
      blocked.add(chatId);
    },
    /** Rich messages: `available` false answers as a server without the methods; `limits`
     *  lowers Telegram's (for tests). */
    setRich({ available, limits } = {}) {
      if (available !== undefined) rich.available = available;
      if (limits) Object.assign(rich.limits, limits);
    },
    /** The person presses Stop on draft `draftId` of `chatId` (Bot API 10.3): returns the
     *  `stopped_message_generation` update Telegram would send, or throws when the client shows
     *  no Stop there (no such draft, no can_stop, or the draft ended: a message came, or 30 s
     *  passed). `late: true` builds the update anyway (a press that crossed the final message). */
    pressStop(chatId, draftId, { thread, late = false, update_id } = {}) {
      const d = drafts.get(draftKey(chatId, thread, draftId));
      if (!late) {
        if (!d) throw new Error(`no draft ${draftId} in chat ${chatId}`);
        if (!d.can_stop) throw new Error(`draft ${draftId} was sent without can_stop: no Stop button`);
        if (d.ended || Date.now() - d.at > 30_000) throw new Error(`draft ${draftId} is gone: nothing to press`);
      }
      if (d) d.stopped = true;
      const stopped = { chat: { id: chatId, type: "private" }, draft_id: draftId };
      if (thread) stopped.message_thread_id = thread;
      return { update_id: update_id ?? Math.floor(Math.random() * 1e9), stopped_message_generation: stopped };
    },
    /** A person sends an ephemeral message in a group chat (only they and the bot see it):
     *  returns its ephemeral_message_id, to put in the update (message_id 0). `agoMs`: sent
     *  that long ago (a late webhook). */
    ephemeralMessage(chatId, userId, { agoMs = 0 } = {}) {
      const id = nextEphemeralId++;
      ephemerals.set(`${chatId}:${id}`, { user: userId, at: Date.now() - agoMs });
      return id;
    },
    /** Guest mode on or off (BotFather): getMe's supports_guest_queries. */
    setGuestMode(on = true) {
      guest.enabled = on;
    },
    /** A person summons the bot as a guest into `chatId` (a chat it is not in): returns the
     *  `guest_message` update Telegram would send. `agoMs`: the query was made that long ago.
     *  `chatType`, `replyTo` (a text the message replies to), `update_id`. */
    guestMessage(chatId, userId, text, { agoMs = 0, chatType = chatId > 0 ? "private" : "supergroup", replyTo, update_id, name = `User${userId}` } = {}) {
      const query = `gq${guest.nextId++}x${Math.floor(Math.random() * 1e9)}`;
      guest.queries.set(query, { chat: chatId, user: userId, at: Date.now() - agoMs, answered: false });
      const message = { message_id: nextMessageId++, date: Math.floor((Date.now() - agoMs) / 1000), chat: { id: chatId, type: chatType }, from: { id: userId, is_bot: false, first_name: name }, text, guest_query_id: query };
      if (replyTo) message.reply_to_message = { message_id: nextMessageId++, date: message.date - 60, chat: { id: chatId, type: chatType }, from: { id: userId + 1, is_bot: false, first_name: "Other" }, text: replyTo };
      return { update_id: update_id ?? Math.floor(Math.random() * 1e9), guest_message: message };
    },
    /** A guest message the bot sent, by inline_message_id: {chat, query, text, html, edits}. */
    guestSent(inlineMessageId) {
      return guest.messages.get(inlineMessageId);
    },
    /** Every guest message the bot sent into `chatId`, with its inline_message_id. */
    guestMessages(chatId) {
      return [...guest.messages.entries()].filter(([, m]) => m.chat === chatId).map(([id, m]) => ({ inline_message_id: id, ...m }));
    },
    /** A person connects the bot to their Telegram Business account (Settings → Telegram
     *  Business → Chatbots), or changes or removes the connection: returns the
     *  `business_connection` update Telegram sends. `rights`: BusinessBotRights (omitted when
     *  null: no rights); `enabled` false for a removal. */
    connectBusiness(owner, { id = `bc${owner}x${Math.floor(Math.random() * 1e9)}`, rights = { can_reply: true, can_read_messages: true }, enabled = true, update_id, name = `Owner${owner}` } = {}) {
      const c = { id, user: { id: owner, is_bot: false, first_name: name }, user_chat_id: owner, date: business.connections.get(id)?.date ?? Math.floor(Date.now() / 1000), is_enabled: enabled };
      if (rights) c.rights = rights;
      // The server still sends the pre-9.0 field, a copy of rights.can_reply.
      c.can_reply = Boolean(rights?.can_reply);
      business.connections.set(id, c);
      return { update_id: update_id ?? business.nextUpdateId++, business_connection: c };
    },
    /** A message in a business chat of connection `id`: from the contact (`from` = the chat),
     *  or, with `fromOwner`, the owner's own. Returns the `business_message` update. */
    businessMessage(id, contact, text, { fromOwner = false, offline = false, agoMs = 0, update_id, name = `Contact${contact}` } = {}) {
      const c = business.connections.get(id);
      const owner = c?.user ?? { id: 1, is_bot: false, first_name: "Owner" };
      const from = fromOwner ? owner : { id: contact, is_bot: false, first_name: name };
      const message = { business_connection_id: id, message_id: business.nextMessageId++, from, chat: { id: contact, type: "private", first_name: name }, date: Math.floor((Date.now() - agoMs) / 1000), text };
      if (offline) message.is_from_offline = true;
      if (!fromOwner) business.incoming.set(`${id}:${contact}`, Date.now() - agoMs);
      return { update_id: update_id ?? Math.floor(Math.random() * 1e9), business_message: message };
    },
    /** The person presses inline button `data` under the bot's message `messageId` in `chatId`
     *  (it must be there): returns the `callback_query` update. `userId`: who pressed. */
    pressButton(chatId, messageId, userId, data, { update_id } = {}) {
      const markup = markups.get(`${chatId}:${messageId}`);
      const buttons = markup ? JSON.parse(markup).inline_keyboard.flat() : [];
      if (!buttons.some((b) => b.callback_data === data)) throw new Error(`no button ${data} under message ${messageId} in ${chatId}`);
      const id = `cq${nextCallbackId++}x${Math.floor(Math.random() * 1e9)}`;
      callbacks.set(id, { at: Date.now(), answered: false });
      const message = { message_id: messageId, chat: { id: chatId, type: "private" }, date: Math.floor(Date.now() / 1000), text: sentTexts.get(`${chatId}:${messageId}`)?.text ?? "" };
      return { update_id: update_id ?? Math.floor(Math.random() * 1e9), callback_query: { id, from: { id: userId, is_bot: false, first_name: `User${userId}` }, message, chat_instance: String(chatId), data } };
    },
    /** The newest message the bot marked read in a business chat (readBusinessMessage). */
    businessRead(id, contact) {
      return business.read.get(`${id}:${contact}`);
    },
    /** How a press was answered (answerCallbackQuery): {answered, text}. */
    callbackAnswer(queryId) {
      return callbacks.get(queryId);
    },
    /** A message the bot sent to a chat, as it now reads (after edits), with its buttons. */
    message(chatId, messageId) {
      const m = sentTexts.get(`${chatId}:${messageId}`);
      return m && { ...m, reply_markup: markups.has(`${chatId}:${messageId}`) ? JSON.parse(markups.get(`${chatId}:${messageId}`)) : undefined };
    },
    /** The bot's message `messageId` in private chat `chatId` as Telegram puts it in a reply's
     *  `reply_to_message` (its text as it reads now, the bot as sender). */
    replyTo(chatId, messageId) {
      const m = sentTexts.get(`${chatId}:${messageId}`);
      if (!m) throw new Error(`no bot message ${messageId} in ${chatId}`);
      return { message_id: messageId, from: { ...bot, is_bot: true }, chat: { id: chatId, type: "private" }, date: Math.floor(Date.now() / 1000), text: m.text };
    },
    /** The bot is an admin of `chatId` (ephemeral messages at any time). */
    setAdmin(chatId, admin = true) {
      if (admin) admins.add(chatId);
      else admins.delete(chatId);
    },
    /** The person opens a topic in their private chat with the bot (Bot API 9.3): returns its
     *  thread id and the service message every message of the topic replies to. `implicit`:
     *  Telegram marks its name as not given by its creator. */
    privateTopic(chatId, { name = "New topic", implicit = true } = {}) {
      const thread = nextMessageId++;
      topics.set(`${chatId}:${thread}`, { name, is_name_implicit: implicit });
      const created = { name, icon_color: 7322096 };
      if (implicit) created.is_name_implicit = true;
      const service = { message_id: thread, date: Math.floor(Date.now() / 1000), chat: { id: chatId, type: "private" }, message_thread_id: thread, is_topic_message: true, forum_topic_created: created };
      return { thread, service };
    },
    /** The bot's topics in private chats (BotFather): `enabled` as getMe says; `refuse`: a
     *  chat where createForumTopic is refused all the same. */
    setPrivateTopics({ enabled, refuse } = {}) {
      if (enabled !== undefined) privateTopics.enabled = enabled;
      if (refuse !== undefined) privateTopics.refused.add(refuse);
    },
    /** A user id that is a bot (a receiver Telegram refuses for ephemeral messages). */
    addBotUser(userId) {
      bots.add(userId);
    },
    /** A private topic as Telegram now names it. */
    topic(chatId, thread) {
      return topics.get(`${chatId}:${thread}`);
    },
    /** The drafts shown (see pressStop). */
    drafts(chatId) {
      return [...drafts.values()].filter((d) => d.chat === chatId);
    },
    /** Successful sendRichMessage texts to a chat. */
    richSent(chatId) {
      return requests.filter((r) => r.method === "sendRichMessage" && r.body.chat_id === chatId && r.rich !== undefined).map((r) => r.text);
    },
    /** A file the bot can fetch with getFile and download; `size` reports another size than
     * the bytes have (a 48 MB video without 48 MB of bytes). */
    addFile(fileId, bytes, { uniqueId = `u-${fileId}`, path = `files/${fileId}`, size } = {}) {
      files.set(fileId, { file_unique_id: uniqueId, bytes: Buffer.from(bytes), path, size: size ?? Buffer.from(bytes).length });
    },
    addStickerSet(name, stickers) {
      stickerSets.set(name, { name, title: name, sticker_type: "regular", stickers });
    },
    /** Resolves when `check()` is true (re-checked on every request), or rejects at the timeout. */
    waitFor,
  };
}

/** How long a guest query can be answered (assumed: the reference states none; inline
 *  queries' answers are expected within 10 s). */
export const GUEST_QUERY_WINDOW_MS = 10_000;

/** The most of an upload the emulator reads (the Bot API takes files up to 50 MB). */
const UPLOAD_LIMIT = 50 * 1024 * 1024;

/** A multipart/form-data body: text fields, and files as {filename, contentType, bytes} under
 *  `files`; null when it is not well formed. */
export function parseMultipart(bytes, boundary) {
  const delimiter = Buffer.from(`--${boundary}`);
  const out = { files: {} };
  let at = bytes.indexOf(delimiter);
  if (at < 0) return null;
  for (;;) {
    at += delimiter.length;
    if (bytes.subarray(at, at + 2).toString() === "--") return out;
    if (bytes.subarray(at, at + 2).toString() !== "\r\n") return null;
    const headEnd = bytes.indexOf("\r\n\r\n", at);
    if (headEnd < 0) return null;
    const head = bytes.subarray(at + 2, headEnd).toString("utf8");
    const next = bytes.indexOf(Buffer.concat([Buffer.from("\r\n"), delimiter]), headEnd + 4);
    if (next < 0) return null;
    const value = bytes.subarray(headEnd + 4, next);
    const name = /name="([^"]*)"/.exec(head)?.[1];
    const filename = /filename="([^"]*)"/.exec(head)?.[1];
    if (!name) return null;
    if (filename !== undefined) out.files[name] = { filename, contentType: /content-type:\s*([^\r\n]+)/i.exec(head)?.[1] ?? "", bytes: Buffer.from(value) };
    else out[name] = value.toString("utf8");
    at = next + 2;
  }
}

/** An image's width and height from its header (PNG, JPEG, WebP VP8/VP8L/VP8X), or null. */
export function imageSize(b) {
  if (b.subarray(0, 8).equals(Buffer.from("89504e470d0a1a0a", "hex")) && b.length >= 24) {
    return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
  }
  if (b[0] === 0xff && b[1] === 0xd8) {
    let i = 2;
    while (i + 9 < b.length) {
      if (b[i] !== 0xff) return null;
      const marker = b[i + 1];
      const len = b.readUInt16BE(i + 2);
      if (marker >= 0xc0 && marker <= 0xcf && ![0xc4, 0xc8, 0xcc].includes(marker)) return { height: b.readUInt16BE(i + 5), width: b.readUInt16BE(i + 7) };
      i += 2 + len;
    }
    return null;
  }
  if (b.subarray(0, 4).toString("latin1") === "RIFF" && b.subarray(8, 12).toString("latin1") === "WEBP") {
    const kind = b.subarray(12, 16).toString("latin1");
    if (kind === "VP8X") return { width: 1 + b.readUIntLE(24, 3), height: 1 + b.readUIntLE(27, 3) };
    if (kind === "VP8 ") return { width: b.readUInt16LE(26) & 0x3fff, height: b.readUInt16LE(28) & 0x3fff };
    if (kind === "VP8L") { const v = b.readUInt32LE(21); return { width: (v & 0x3fff) + 1, height: ((v >> 14) & 0x3fff) + 1 }; }
  }
  return null;
}

/** The emulator on its own server on 127.0.0.1 (the tests' fake Telegram). */
export async function startFakeTelegram(options) {
  const emulator = createTelegramEmulator(options);
  const server = http.createServer((req, res) => emulator.handle(req, res));
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  emulator.base = `http://127.0.0.1:${server.address().port}`;
  emulator.close = () => new Promise((r) => server.close(r));
  return emulator;
}
