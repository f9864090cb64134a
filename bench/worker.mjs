// Worker benchmarks under local workerd with the fake Telegram and a fake Gemini answering
// after a fixed 300 ms, so the bot's own cost stands out. Writes JSON to the file named on the
// command line (read by report.mjs). Its progress and each table as it is measured go to
// stderr. `--quick` (or BENCH_QUICK=1): start-up, the webhook's latency with fewer updates, the
// answer speed and the size only (the headline figures, in a few minutes).
import fs from "node:fs";
import crypto from "node:crypto";
import path from "node:path";
import zlib from "node:zlib";
import { performance } from "node:perf_hooks";
import http from "node:http";
import { startStack, privateText, sleep, ROOT, WEBHOOK_SECRET } from "../tests/support/stack.js";
import { answerSpeed } from "./answer.mjs";
import { alarmRace } from "./alarms.mjs";
import { progress, pairs, QUICK } from "./progress.mjs";

// Quick mode: fewer updates, and no bursts, media or alarm race.
const SEQUENTIAL = QUICK ? 50 : 200;
const CONCURRENT = QUICK ? 500 : 2000;
const P = progress(`worker${QUICK ? " (quick)" : ""}`, { plan: QUICK ? 6 : 11 });
const f1 = (x) => x.toFixed(1);

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
let step = P.scenario("start-up: the harness, the first request, 50 more", 51);
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
  step.tick();
}
step.done();
P.table("Start-up", pairs([["harness start (workerd, wasm compile, migrations)", `${started.toFixed(0)} ms`], ["first request / later requests (p50)", `${f1(firstRequestMs)} ms / ${f1(percentile(warm, 50))} ms`]]));

// The cost of one update on its own (concurrency 1): group chatter (D1 only) and private
// messages (D1 and the chat object).
async function sequentialLatency(make, label) {
  const xs = [];
  const step = P.scenario(label, SEQUENTIAL);
  for (let i = 0; i < SEQUENTIAL; i++) {
    const t1 = performance.now();
    await post("/telegram/webhook", JSON.stringify(make(i)), { "X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET });
    xs.push(performance.now() - t1);
    step.tick();
  }
  step.done();
  return { updates: SEQUENTIAL, p50_ms: percentile(xs, 50), p99_ms: percentile(xs, 99) };
}
const { groupText } = await import("../tests/support/stack.js");
const sequential = {
  group_chatter: await sequentialLatency((i) => groupText(-1009000000001, 7000 + (i % 5), `chatter ${i}`), `one update at a time: ${SEQUENTIAL} group-chatter updates`),
  private_message: await sequentialLatency((i) => privateText(83_000_000 + i, `hello ${i}`), `one update at a time: ${SEQUENTIAL} private messages`),
};
P.table("One update alone", pairs([
  ["group chatter (D1 only)", `p50 ${f1(sequential.group_chatter.p50_ms)} ms, p99 ${f1(sequential.group_chatter.p99_ms)} ms`],
  ["private message (D1 + chat object)", `p50 ${f1(sequential.private_message.p50_ms)} ms, p99 ${f1(sequential.private_message.p99_ms)} ms`],
]));
await quiesce(); // let those turns finish

// Acknowledgement under concurrency without turns: 2,000 group-chatter updates (D1 only).
async function ackRun(updates, concurrency) {
  const latencies = [];
  let i = 0;
  const step = P.scenario(`${updates.length} group-chatter updates at concurrency ${concurrency}`, updates.length);
  const start = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (i < updates.length) {
      const body = JSON.stringify(updates[i++]);
      const t1 = performance.now();
      await post("/telegram/webhook", body, { "X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET });
      latencies.push(performance.now() - t1);
      step.tick();
    }
  }));
  step.done();
  return { updates: updates.length, p50_ms: percentile(latencies, 50), p99_ms: percentile(latencies, 99), throughput_per_s: latencies.length / ((performance.now() - start) / 1000) };
}
const chatter = await ackRun(Array.from({ length: CONCURRENT }, (_, i) => groupText(-1009000000002 - (i % 200), 7100 + (i % 7), `chatter ${i}`)), 50);

// Webhook acknowledgement: 2,000 updates across 200 chats at concurrency 50 (quick: 500
// across 50).
const chats = Array.from({ length: CONCURRENT / 10 }, (_, i) => 81_000_000 + i * 13);
const updates = Array.from({ length: CONCURRENT }, (_, i) => privateText(chats[i % chats.length], `ack test ${i}`));
step = P.scenario(`${updates.length} private messages across ${chats.length} chats at concurrency 50, then their replies`, updates.length + chats.length);
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
    step.tick();
    costs.push({ sub: Number(res.headers["x-subrequests"]), rt: Number(res.headers["x-d1-round-trips"]), st: Number(res.headers["x-d1-statements"]), status: res.statusCode });
  }
}));
const ackSeconds = (performance.now() - ackStart) / 1000;
await s.tg.waitFor(() => {
  step.set(updates.length + chats.filter((c) => s.tg.sent(c).length >= 1).length);
  return chats.every((c) => s.tg.sent(c).length >= 1);
}, 120_000, "replies to the ack test");
step.done();
P.table("Webhook under load", pairs([
  [`acknowledgement latency, ${latencies.length} private messages across ${chats.length} chats at concurrency 50`, `p50 ${f1(percentile(latencies, 50))} ms, p99 ${f1(percentile(latencies, 99))} ms, ${(latencies.length / ackSeconds).toFixed(0)} updates/s`],
  [`acknowledgement latency, ${chatter.updates} group-chatter updates at concurrency 50`, `p50 ${f1(chatter.p50_ms)} ms, p99 ${f1(chatter.p99_ms)} ms, ${chatter.throughput_per_s.toFixed(0)} updates/s`],
]));
await quiesce();

// Model calls per burst: 200 chats, each sending 5 messages 100 ms apart (on a fixed schedule,
// as people type, not waiting for acknowledgements).
async function bursts(stack, base, label) {
  const burstChats = Array.from({ length: 200 }, (_, i) => base + i * 17);
  const step = P.scenario(`${label}: 200 chats × 5 messages 100 ms apart, until every chat has its answer`, burstChats.length);
  const t0 = performance.now();
  await Promise.all(burstChats.flatMap((c) => Array.from({ length: 5 }, async (_, k) => {
    await sleep(k * 100);
    await stack.webhook(privateText(c, `burst ${k}`));
  })));
  const ingestMs = performance.now() - t0;
  await stack.tg.waitFor(() => {
    step.set(burstChats.filter((c) => stack.tg.sent(c).length >= 1).length);
    return burstChats.every((c) => stack.tg.sent(c).length >= 1);
  }, 120_000, "burst replies");
  await quiesce();
  step.done();
  const perChat = burstChats.map((c) => stack.gemini.calls(c).length);
  return { chats: burstChats.length, messages_per_chat: 5, ingest_ms: ingestMs, model_calls: perChat.reduce((a, b) => a + b, 0), chats_with_more_than_one_call: perChat.filter((n) => n > 1).length };
}
const burstsDefault = QUICK ? null : await bursts(s, 82_000_000, "bursts, DEBOUNCE_MS 1500");

const turns = await s.sql("SELECT subrequests, d1_round_trips, d1_statements FROM turns WHERE status = 'done' AND subrequests IS NOT NULL");
// Every send in either form (migration 0037: a message chunk is recorded by its message).
const outbox = await s.sql("SELECT COUNT(*) AS n FROM sends WHERE status = 'sent'");
if (turns.length) {
  P.table("Turns", pairs([
    [`subrequests per turn (${turns.length} turns)`, `mean ${f1(mean(turns.map((r) => r.subrequests)))}, max ${Math.max(...turns.map((r) => r.subrequests))}`],
    ["D1 round trips per turn", `mean ${f1(mean(turns.map((r) => r.d1_round_trips)))}, max ${Math.max(...turns.map((r) => r.d1_round_trips))}`],
  ]));
}

const wasmFile = fs.readdirSync(path.join(ROOT, ".tmp/bundle")).find((f) => f.endsWith(".wasm"));
const wasm = fs.readFileSync(path.join(ROOT, ".tmp/bundle", wasmFile));
const js = fs.readFileSync(path.join(ROOT, ".tmp/bundle/index.js"));
await s.close();
agent.destroy();

// The same bursts with a longer debounce: how much of the splitting above is the local
// runtime's saturation (a 1,000-update wave takes seconds to ingest here).
let burstsLong = null;
if (!QUICK) {
  s = await startStack({ latencyMs: 300, vars: { DEBOUNCE_MS: "4000", DEBOUNCE_MAX_MS: "20000" } });
  burstsLong = await bursts(s, 84_000_000, "bursts, DEBOUNCE_MS 4000");
  await s.close();
  P.table("Bursts", pairs([
    ["model calls for 200 chats × 5 messages 100 ms apart (DEBOUNCE_MS 1500)", `${burstsDefault.model_calls} (${burstsDefault.chats_with_more_than_one_call} chats with more than one)`],
    ["the same with DEBOUNCE_MS 4000", `${burstsLong.model_calls}`],
  ]));
}

// Media: one chat sends 100 photos, one at a time, each answered; they are 15 distinct files
// (sent again and again). How many description calls and how many bytes reach Gemini. Then
// the wall time of a turn with a 1 MB photo (webhook to reply). A short debounce: this is
// about media, not bursts (and not the per-person turn budget).
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
  const step = P.scenario("media: 100 photos of 15 files, each answered", 100);
  for (let n = 0; n < 100; n++) {
    const i = (n * 7) % 15;
    await s.webhook(photoMessage(uid, `bm-${uid}-${i}`, `bmu-${uid}-${i}`, files[i].length, `picture ${n}`));
    await s.tg.waitFor(() => s.tg.sent(uid).length >= n + 1, 60_000, `media reply ${n}`);
    step.tick();
  }
  await quiesce();
  step.done();
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
let media = null;
if (!QUICK) {
  s = await startStack({ latencyMs: 300, vars: { DEBOUNCE_MS: "100", DEBOUNCE_MAX_MS: "500", USER_TURNS_PER_HOUR: "0" } });
  media = await mediaRun(86_000_001);
  const bigPhoto = [];
  const big = P.scenario("media: a 1 MB photo's turn, webhook to reply", 5);
  for (let k = 0; k < 5; k++) {
    const uid = 86_100_000 + k;
    s.tg.addFile(`big-${uid}`, jpegOf(1024 * 1024, crypto.randomBytes(1024 * 1024)), { uniqueId: `bigu-${uid}` });
    const t1 = performance.now();
    await s.webhook(photoMessage(uid, `big-${uid}`, `bigu-${uid}`, 1024 * 1024, "what is this?"));
    await s.tg.waitFor(() => s.tg.sent(uid).length >= 1, 60_000, "the 1 MB photo's reply");
    bigPhoto.push(performance.now() - t1);
    big.tick();
  }
  big.done();
  media.one_mb_photo_turn_ms = { p50: percentile(bigPhoto, 50), max: Math.max(...bigPhoto) };
  const bigTurns = await s.sql("SELECT subrequests FROM turns WHERE conv LIKE '861000%' AND subrequests IS NOT NULL");
  media.one_mb_photo_subrequests = Math.max(...bigTurns.map((r) => r.subrequests));
  await s.close();
  P.table("Media", pairs([
    [`description calls for ${media.messages} photos of ${media.distinct_files} distinct files`, `${media.description_calls}`],
    ["a turn with a 1 MB photo, webhook to reply", `p50 ${media.one_mb_photo_turn_ms.p50.toFixed(0)} ms, max ${media.one_mb_photo_turn_ms.max.toFixed(0)} ms`],
  ]));
}

// How fast an answer shows: the first sign, the first streamed text, the final message.
step = P.scenario("answer speed: a lone message and a burst, each setting 5 times (bench/answer.mjs)");
const answer = await answerSpeed({ quick: QUICK });
step.done();
P.table("Answer speed (medians, ms from the webhook's answer)", pairs(
  Object.values(answer).filter((x) => x && typeof x === "object").flatMap((series) =>
    Object.entries(series).filter(([, r]) => r && typeof r === "object").map(([name, r]) => [`${series.label ?? ""}: ${name}`, `first sign ${r.sign_ms ?? "–"}, first text ${r.first_text_ms ?? "–"}, final ${r.final_ms ?? "–"}`]),
  ),
));

// The alarm count while one slow delivery runs and the person keeps writing (bench/alarms.mjs).
let alarmRaceResult = null;
if (!QUICK) {
  step = P.scenario("alarms while one slow delivery runs (bench/alarms.mjs)");
  alarmRaceResult = await alarmRace();
  step.done();
  P.table("Alarms while one slow delivery runs", pairs([[`alarms during the delivery (${alarmRaceResult.messages_meanwhile} messages over ${(alarmRaceResult.delivery_ms / 1000).toFixed(1)} s)`, `${alarmRaceResult.alarms_during_delivery}`]]));
}

// Written to the file named on the command line, not stdout: the harness logs to stdout too
// (a queue batch's line landed in the JSON once).
const size = { wasm_bytes: wasm.length, wasm_gzip_bytes: zlib.gzipSync(wasm, { level: 9 }).length, js_bytes: js.length };
P.table("Size", pairs([["wasm after wasm-opt", `${(size.wasm_bytes / 1024).toFixed(0)} KiB raw, ${(size.wasm_gzip_bytes / 1024).toFixed(0)} KiB gzip`], ["JavaScript shim", `${(size.js_bytes / 1024).toFixed(0)} KiB`]]));
const results = JSON.stringify({
  quick: QUICK,
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
  size,
}, null, 1);
const outFile = process.argv.slice(2).find((a) => !a.startsWith("--"));
if (outFile) fs.writeFileSync(outFile, results);
else console.log(results);
