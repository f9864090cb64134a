// Worker benchmarks under local workerd with the fake Telegram and a fake Gemini answering
// after a fixed 300 ms, so the bot's own cost stands out. Prints JSON (read by report.mjs).
import fs from "node:fs";
import crypto from "node:crypto";
import path from "node:path";
import zlib from "node:zlib";
import { performance } from "node:perf_hooks";
import http from "node:http";
import { startStack, privateText, sleep, ROOT, WEBHOOK_SECRET } from "../tests/support/stack.js";
import { answerSpeed } from "./answer.mjs";
import { alarmRace } from "./alarms.mjs";

const percentile = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Waits until no model call has started for `quietMs` (the previous phase is done). */
async function quiesce(quietMs = 3000) {
  let last = -1;
  let since = Date.now();
  for (;;) {
    await sleep(250);
    const n = s.gemini.requests.length + s.tg.requests.length;
    if (n !== last) {
      last = n;
      since = Date.now();
    } else if (Date.now() - since >= quietMs) {
      return;
    }
  }
}

// Startup: workerd process and the wasm, then the first request (instantiation) vs later ones.
const t0 = performance.now();
let s = await startStack({ latencyMs: 300, vars: { DEBOUNCE_MS: "1500", DEBOUNCE_MAX_MS: "8000" } });
const started = performance.now() - t0;
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
/** POSTs and resolves with the answer; a webhook answer other than 200 fails the run (a wrong
 * secret would otherwise measure 401s and wait for replies that never come). */
function post(pathname, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(pathname, s.url), { method: "POST", agent, headers: { "content-type": "application/json", ...headers } }, (res) => {
      res.resume();
      res.on("end", () => (res.statusCode === 200 ? resolve(res) : reject(new Error(`${pathname} answered ${res.statusCode}`))));
    });
    req.on("error", reject);
    req.end(body);
  });
}
function get(pathname) {
  return new Promise((resolve, reject) => {
    http.get(new URL(pathname, s.url), { agent }, (res) => {
      res.resume();
      res.on("end", () => resolve(res));
    }).on("error", reject);
  });
}
let t = performance.now();
await get("/health");
const firstRequestMs = performance.now() - t;
const warm = [];
for (let i = 0; i < 50; i++) {
  t = performance.now();
  await get("/health");
  warm.push(performance.now() - t);
}

// The cost of one update on its own (concurrency 1): group chatter (D1 only) and private
// messages (D1 and the chat object).
async function sequentialLatency(make) {
  const xs = [];
  for (let i = 0; i < 200; i++) {
    const t1 = performance.now();
    await post("/telegram/webhook", JSON.stringify(make(i)), { "X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET });
    xs.push(performance.now() - t1);
  }
  return { p50_ms: percentile(xs, 50), p99_ms: percentile(xs, 99) };
}
const { groupText } = await import("../tests/support/stack.js");
const sequential = {
  group_chatter: await sequentialLatency((i) => groupText(-1009000000001, 7000 + (i % 5), `chatter ${i}`)),
  private_message: await sequentialLatency((i) => privateText(83_000_000 + i, `hello ${i}`)),
};
await quiesce(); // let those turns finish

// Acknowledgement under concurrency without turns: 2,000 group-chatter updates (D1 only).
async function ackRun(updates, concurrency) {
  const latencies = [];
  let i = 0;
  const start = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (i < updates.length) {
      const body = JSON.stringify(updates[i++]);
      const t1 = performance.now();
      await post("/telegram/webhook", body, { "X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET });
      latencies.push(performance.now() - t1);
    }
  }));
  return { p50_ms: percentile(latencies, 50), p99_ms: percentile(latencies, 99), throughput_per_s: latencies.length / ((performance.now() - start) / 1000) };
}
const chatter = await ackRun(Array.from({ length: 2000 }, (_, i) => groupText(-1009000000002 - (i % 200), 7100 + (i % 7), `chatter ${i}`)), 50);

// Webhook acknowledgement: 2,000 updates across 200 chats at concurrency 50.
const chats = Array.from({ length: 200 }, (_, i) => 81_000_000 + i * 13);
const updates = Array.from({ length: 2000 }, (_, i) => privateText(chats[i % 200], `ack test ${i}`));
const latencies = [];
const costs = [];
let next = 0;
const ackStart = performance.now();
await Promise.all(Array.from({ length: 50 }, async () => {
  while (next < updates.length) {
    const u = updates[next++];
    const body = JSON.stringify(u);
    const t1 = performance.now();
    const res = await post("/telegram/webhook", body, { "X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET });
    latencies.push(performance.now() - t1);
    costs.push({ sub: Number(res.headers["x-subrequests"]), rt: Number(res.headers["x-d1-round-trips"]), st: Number(res.headers["x-d1-statements"]), status: res.statusCode });
  }
}));
const ackSeconds = (performance.now() - ackStart) / 1000;
await s.tg.waitFor(() => chats.every((c) => s.tg.sent(c).length >= 1), 120_000, "replies to the ack test");
await quiesce();

// Model calls per burst: 200 chats, each sending 5 messages 100 ms apart (on a fixed schedule,
// as people type, not waiting for acknowledgements).
async function bursts(stack, base) {
  const burstChats = Array.from({ length: 200 }, (_, i) => base + i * 17);
  const t0 = performance.now();
  await Promise.all(burstChats.flatMap((c) => Array.from({ length: 5 }, async (_, k) => {
    await sleep(k * 100);
    await stack.webhook(privateText(c, `burst ${k}`));
  })));
  const ingestMs = performance.now() - t0;
  await stack.tg.waitFor(() => burstChats.every((c) => stack.tg.sent(c).length >= 1), 120_000, "burst replies");
  await quiesce();
  const perChat = burstChats.map((c) => stack.gemini.calls(c).length);
  return { chats: burstChats.length, messages_per_chat: 5, ingest_ms: ingestMs, model_calls: perChat.reduce((a, b) => a + b, 0), chats_with_more_than_one_call: perChat.filter((n) => n > 1).length };
}
const burstsDefault = await bursts(s, 82_000_000);

const turns = await s.sql("SELECT subrequests, d1_round_trips, d1_statements FROM turns WHERE status = 'done' AND subrequests IS NOT NULL");
const outbox = await s.sql("SELECT COUNT(*) AS n FROM outbox WHERE status = 'sent'");

const wasmFile = fs.readdirSync(path.join(ROOT, ".tmp/bundle")).find((f) => f.endsWith(".wasm"));
const wasm = fs.readFileSync(path.join(ROOT, ".tmp/bundle", wasmFile));
const js = fs.readFileSync(path.join(ROOT, ".tmp/bundle/index.js"));
await s.close();
agent.destroy();

// The same bursts with a longer debounce: how much of the splitting above is the local
// runtime's saturation (a 1,000-update wave takes seconds to ingest here).
s = await startStack({ latencyMs: 300, vars: { DEBOUNCE_MS: "4000", DEBOUNCE_MAX_MS: "20000" } });
const burstsLong = await bursts(s, 84_000_000);
await s.close();

// Media: one chat sends 100 photos, one at a time, each answered; they are 15 distinct files
// (sent again and again). How many description calls and how many bytes reach Gemini. Then
// the wall time of a turn with a 1 MB photo (webhook to reply). A short debounce: this is
// about media, not bursts (and not the per-person turn budget).
s = await startStack({ latencyMs: 300, vars: { DEBOUNCE_MS: "100", DEBOUNCE_MAX_MS: "500", USER_TURNS_PER_HOUR: "0" } });
function photoMessage(uid, fileId, uniqueId, size, caption) {
  const u = privateText(uid, caption);
  delete u.message.text;
  u.message.caption = caption;
  u.message.photo = [{ file_id: fileId, file_unique_id: uniqueId, width: 800, height: 600, file_size: size }];
  return u;
}
const isDescribe = (r) => Boolean(r.body?.generationConfig?.responseSchema?.properties?.description);
// Photos of a given size that start as a real JPEG does (the fake Gemini checks the magic bytes).
const JPEG = fs.readFileSync(path.join(ROOT, "tests/fixtures/media/photo.jpg"));
const jpegOf = (size, fill) => Buffer.concat([JPEG, Buffer.isBuffer(fill) ? fill : Buffer.alloc(size - JPEG.length, fill)]).subarray(0, size);
const inlineBytes = (r) => (r.body?.contents ?? []).flatMap((c) => c.parts ?? []).filter((p) => p.inlineData).reduce((n, p) => n + Buffer.from(p.inlineData.data, "base64").length, 0);
async function mediaRun(uid) {
  const files = Array.from({ length: 15 }, (_, i) => jpegOf(20_000 + i * 1000, i + 1));
  files.forEach((b, i) => s.tg.addFile(`bm-${uid}-${i}`, b, { uniqueId: `bmu-${uid}-${i}` }));
  const before = s.gemini.requests.length;
  for (let n = 0; n < 100; n++) {
    const i = (n * 7) % 15;
    await s.webhook(photoMessage(uid, `bm-${uid}-${i}`, `bmu-${uid}-${i}`, files[i].length, `picture ${n}`));
    await s.tg.waitFor(() => s.tg.sent(uid).length >= n + 1, 60_000, `media reply ${n}`);
  }
  await quiesce();
  const reqs = s.gemini.requests.slice(before).filter((r) => r.body);
  const turnsOnly = reqs.filter((r) => !isDescribe(r));
  return {
    messages: 100,
    distinct_files: files.length,
    description_calls: reqs.filter(isDescribe).length,
    turn_calls: turnsOnly.length,
    bytes_in_turns: turnsOnly.reduce((n, r) => n + inlineBytes(r), 0),
    bytes_in_descriptions: reqs.filter(isDescribe).reduce((n, r) => n + inlineBytes(r), 0),
    bytes_of_the_photos: Array.from({ length: 100 }, (_, n) => files[(n * 7) % 15].length).reduce((a, b) => a + b, 0),
  };
}
const media = await mediaRun(86_000_001);
const bigPhoto = [];
for (let k = 0; k < 5; k++) {
  const uid = 86_100_000 + k;
  s.tg.addFile(`big-${uid}`, jpegOf(1024 * 1024, crypto.randomBytes(1024 * 1024)), { uniqueId: `bigu-${uid}` });
  const t1 = performance.now();
  await s.webhook(photoMessage(uid, `big-${uid}`, `bigu-${uid}`, 1024 * 1024, "what is this?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length >= 1, 60_000, "the 1 MB photo's reply");
  bigPhoto.push(performance.now() - t1);
}
media.one_mb_photo_turn_ms = { p50: percentile(bigPhoto, 50), max: Math.max(...bigPhoto) };
const bigTurns = await s.sql("SELECT subrequests FROM turns WHERE conv LIKE '861000%' AND subrequests IS NOT NULL");
media.one_mb_photo_subrequests = Math.max(...bigTurns.map((r) => r.subrequests));
await s.close();

// How fast an answer shows: the first sign, the first streamed text, the final message.
const answer = await answerSpeed();

// The alarm count while one slow delivery runs and the person keeps writing (bench/alarms.mjs).
const alarmRaceResult = await alarmRace();

// Written to the file named on the command line, not stdout: the harness logs to stdout too
// (a queue batch's line landed in the JSON once).
const results = JSON.stringify({
  startup: { stack_ms: started, first_request_ms: firstRequestMs, warm_request_p50_ms: percentile(warm, 50) },
  webhook: {
    updates: latencies.length,
    non_200: costs.filter((c) => c.status !== 200).length,
    p50_ms: percentile(latencies, 50),
    p99_ms: percentile(latencies, 99),
    max_ms: Math.max(...latencies),
    throughput_per_s: latencies.length / ackSeconds,
    subrequests: { mean: mean(costs.map((c) => c.sub)), max: Math.max(...costs.map((c) => c.sub)) },
    d1_round_trips: { mean: mean(costs.map((c) => c.rt)), max: Math.max(...costs.map((c) => c.rt)) },
    d1_statements: { mean: mean(costs.map((c) => c.st)), max: Math.max(...costs.map((c) => c.st)) },
  },
  bursts: { debounce_1500_ms: burstsDefault, debounce_4000_ms: burstsLong },
  ingest_sequential: sequential,
  chatter_concurrent: chatter,
  turn: {
    turns: turns.length,
    subrequests: { mean: mean(turns.map((r) => r.subrequests)), max: Math.max(...turns.map((r) => r.subrequests)) },
    d1_round_trips: { mean: mean(turns.map((r) => r.d1_round_trips)), max: Math.max(...turns.map((r) => r.d1_round_trips)) },
    d1_statements: { mean: mean(turns.map((r) => r.d1_statements)), max: Math.max(...turns.map((r) => r.d1_statements)) },
    delivered_messages: outbox[0].n,
  },
  media,
  answer,
  alarm_race: alarmRaceResult,
  size: { wasm_bytes: wasm.length, wasm_gzip_bytes: zlib.gzipSync(wasm, { level: 9 }).length, js_bytes: js.length },
}, null, 1);
if (process.argv[2]) fs.writeFileSync(process.argv[2], results);
else console.log(results);
