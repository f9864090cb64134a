// Every Free-plan limit per message (issue 40): what an answered message costs in Worker
// requests, Durable Object requests, duration and storage rows, Queues operations, D1 rows and
// subrequests, for three workloads, under local workerd with the fake Telegram and a fake
// Gemini that answers like a quick model (first token after MODEL_MS, the answer streamed over
// STREAM_MS more). Writes .tmp/bench/limits.json (read by bench/report-limits.mjs); with
// `--quick` (or BENCH_QUICK=1) fewer messages, into .tmp/bench/quick/limits.json.
//
//  - dm: a DM-only bot: people write in private, a few messages at a sitting, each answered.
//  - group: a lively group: the recorded conversation (tests/fixtures/conversations/group_500.json)
//    replayed, the messages the recorded bot answered asking the bot (@mention), the rest chatter.
//  - crew: crew mode in private chats (tests/e2e/crew.test.js): each message answered by the
//    critic and the builder, the moderator passing.
//
// The cron runs as on Cloudflare, every 30 minutes: here after every sitting (dm, crew) or every
// GROUP_TICK_EVERY messages (group), so each half hour's consolidation job of a conversation with
// new messages is counted with the messages that caused it. The ticks themselves (48 a day
// whatever happens) are summed apart, as a fixed daily cost.
//
// Everything is counted from the worker's `metrics {...}` lines (METRICS_LOG): one per
// invocation, with its kind (`fetch <path>`, `queue <name>`, `cron <schedule>`, `object
// <request>`, `alarm`). Worker requests are the fetch and queue-consumer invocations (a queue
// batch counted as one request, to be safe); Durable Object requests the `object` and `alarm`
// ones; Durable Object duration the wall time while any of them ran (their spans' union, from
// the runtime's clock), billed at 128 MB; Queues operations each message's write plus, per
// delivery, a read and a delete (`2 × queue_sent + queue_received`); D1 rows as D1's result meta
// reports them; the chat object's SQLite rows as its cursors report them (`do_rows_read`,
// `do_rows_written`, where the bundle logs them).
import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { startStack, privateText, groupText, mention, sleep, ROOT } from "../tests/support/stack.js";
import { progress, logDrain, QUICK } from "./progress.mjs";

const MODEL_MS = 1000;
const STREAM_MS = 1000;
const GROUP_TICK_EVERY = 20;
const PASS = { calls: [{ name: "pass", args: {} }] };
// CPU_BEFORE=<a prebuilt bundle of an earlier commit> measures it too, each workload right
// after this commit's (the same machine, minutes apart): the before → after of the table.
const BEFORE = process.env.CPU_BEFORE ? path.resolve(process.env.CPU_BEFORE) : null;
let bundle; // this commit's (.tmp/bundle, or TEST_BUNDLE) unless a before run sets it
const p = progress(`limits${QUICK ? " (quick)" : ""}`, { plan: BEFORE ? 6 : 3 });

const recording = JSON.parse(fs.readFileSync(path.join(ROOT, "tests/fixtures/conversations/group_500.json"), "utf8"));
const people = recording.messages.filter((m) => !m.bot && m.user_id);
const answeredIds = new Set(recording.messages.filter((m) => m.bot && m.reply_to).map((m) => m.reply_to));

async function until(check, ms, what) {
  const end = performance.now() + ms;
  while (!check()) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

/** A stack with the drain of its metrics lines and a wait for quiet. */
async function stackFor(vars, secrets) {
  const s = await startStack({ bundle, latencyMs: MODEL_MS, vars: { METRICS_LOG: "true", USER_TURNS_PER_HOUR: "0", DEBOUNCE_MS: "", DEBOUNCE_MAX_MS: "8000", ...vars }, secrets });
  s.gemini.streamMs = STREAM_MS;
  const logs = logDrain(s);
  const activity = () => logs.count + s.gemini.requests.length + s.tg.requests.length;
  /** Waits until nothing happened (logs, model or Telegram calls) for `ms`. */
  const quiet = async (ms) => {
    let last = -1;
    let since = performance.now();
    while (performance.now() - since < ms) {
      await sleep(50);
      logs.pull();
      const now = activity();
      if (now !== last) {
        last = now;
        since = performance.now();
      }
    }
  };
  /** The cron, then the consolidation jobs it queued (the consumer takes them within seconds). */
  const tick = async () => {
    logs.pull();
    const from = logs.kept.length;
    await s.scheduled();
    const queued = () => logs.since(from).some((l) => l.kind.startsWith("cron"));
    await until(queued, 10_000, "the cron's metrics line").catch(() => {});
    const line = logs.since(from).find((l) => l.kind.startsWith("cron"));
    if (line?.queue_sent > 0) await until(() => logs.since(from).filter((l) => l.kind.startsWith("queue")).reduce((n, l) => n + (l.queue_received ?? 0), 0) >= line.queue_sent, 30_000, "the consolidation jobs").catch(() => {});
    await quiet(1500);
  };
  return { s, logs, quiet, tick };
}

/** Sums the metrics lines of a workload (the cron ticks apart). */
function tally(lines) {
  const isWorker = (k) => k.startsWith("fetch /telegram") || k.startsWith("queue");
  const isObject = (k) => k.startsWith("object") || k === "alarm" || k.startsWith("alarm");
  const sum = (ls, key) => ls.reduce((n, l) => n + (Number.isFinite(l[key]) ? l[key] : 0), 0);
  const has = (ls, key) => ls.some((l) => Number.isFinite(l[key]));
  const work = lines.filter((l) => !l.kind.startsWith("cron"));
  const ticks = lines.filter((l) => l.kind.startsWith("cron"));
  // The chat objects' active time: the union of their invocations' spans.
  const spans = work.filter((l) => isObject(l.kind) && Number.isFinite(l.started_ms) && Number.isFinite(l.ended_ms)).map((l) => [l.started_ms, Math.max(l.ended_ms, l.started_ms)]).sort((a, b) => a[0] - b[0]);
  let activeMs = 0;
  let end = -Infinity;
  for (const [a, b] of spans) {
    if (b <= end) continue;
    activeMs += b - Math.max(a, end);
    end = b;
  }
  const kinds = {};
  for (const l of work) kinds[l.kind] = (kinds[l.kind] ?? 0) + 1;
  const queueOps = (ls) => (has(ls, "queue_sent") ? 2 * sum(ls, "queue_sent") + sum(ls, "queue_received") : null);
  return {
    worker_requests: work.filter((l) => isWorker(l.kind)).length,
    do_requests: work.filter((l) => isObject(l.kind)).length,
    do_active_s: activeMs / 1000,
    do_gb_s: (activeMs / 1000) * 0.125,
    do_rows_read: has(work, "do_rows_read") ? sum(work, "do_rows_read") : null,
    do_rows_written: has(work, "do_rows_written") ? sum(work, "do_rows_written") : null,
    // The ticks' own sends are the consolidation jobs': counted with the work they cause.
    queue_ops: queueOps(work) === null ? null : queueOps(work) + 2 * sum(ticks, "queue_sent"),
    d1_rows_read: sum(work, "rows_read"),
    d1_rows_written: sum(work, "rows_written"),
    subrequests_max: Math.max(0, ...work.map((l) => l.subrequests ?? 0)),
    subrequests_max_kind: work.reduce((a, l) => ((l.subrequests ?? 0) > (a?.subrequests ?? -1) ? l : a), null)?.kind ?? null,
    invocations: kinds,
    ticks: {
      n: ticks.length,
      d1_rows_read: sum(ticks, "rows_read"),
      d1_rows_written: sum(ticks, "rows_written"),
      subrequests_max: Math.max(0, ...ticks.map((l) => l.subrequests ?? 0)),
    },
  };
}

/** Private chats: `users` people, each a sitting of `each` messages, each answered; a cron tick
 *  after each sitting. `crew`: crew mode, each message answered by two personas, the third
 *  passing. */
async function privateChats({ users, each, crew }) {
  const vars = crew ? { CREW: "critic,builder,moderator", CREW_CHATS: "*", CREW_MAX_ROUNDS: "2" } : {};
  const { s, logs, quiet, tick } = await stackFor(vars);
  const step = p.scenario(crew ? `crew: ${users} people × ${each} messages, each answered by two personas` : `DM-only bot: ${users} people × ${each} messages, each answered`, users * each);
  try {
    await s.fetch("/health");
    await quiet(300);
    logs.pull();
    const from = logs.kept.length;
    let answers = 0;
    for (let u = 0; u < users; u++) {
      const uid = (crew ? 89_500_000 : 89_400_000) + u * 7;
      for (let k = 0; k < each; k++) {
        const before = s.tg.sent(uid).length;
        const calls = s.gemini.calls(uid).length;
        if (crew) s.gemini.script(uid, [{ text: `Critic: point ${k} needs a budget.` }, { text: `Builder: step ${k}, fifty euros.` }, PASS]);
        await s.webhook(privateText(uid, `message ${k + 1} of my sitting: what do you think about plan ${k}?`, { name: `Pat${u}` }));
        if (crew) await until(() => s.gemini.calls(uid).length >= calls + 3 && s.tg.sent(uid).length >= before + 2, 90_000, "the crew's answers");
        else await until(() => s.tg.sent(uid).length > before, 60_000, "the answer");
        await quiet(800);
        answers += s.tg.sent(uid).length - before;
        step.tick();
      }
      await tick();
    }
    await quiet(3500); // a re-check alarm still due
    const t = tally(logs.since(from));
    step.done();
    return { messages: users * each, answered: users * each, answers_sent: answers, users, per_sitting: each, ...t };
  } finally {
    await s.close();
  }
}

/** The recorded group conversation's first `n` people's messages; those the recorded bot
 *  answered mention the bot and wait for its answer; a cron tick every GROUP_TICK_EVERY. */
async function group(n) {
  const { s, logs, quiet, tick } = await stackFor({});
  const chat = -1001900000001;
  const msgs = people.slice(0, n);
  const step = p.scenario(`lively group: ${msgs.length} messages of the recorded conversation, ${msgs.filter((m) => answeredIds.has(m.message_id)).length} of them answered`, msgs.length);
  try {
    await s.fetch("/health");
    await quiet(300);
    logs.pull();
    const from = logs.kept.length;
    const sent = new Map();
    const chatter = []; // [rows read, rows written] of each chatter message's webhook
    let answered = 0;
    for (let i = 0; i < msgs.length; i++) {
      const m = msgs[i];
      const asks = answeredIds.has(m.message_id);
      const body = m.text || (m.media ? `[${m.media.kind}] ${m.media.detail}` : "…");
      const text = asks ? `@edge_test_bot ${body}` : body;
      const to = m.reply_to && sent.get(m.reply_to);
      const u = groupText(chat, m.user_id, text, { name: m.name, entities: asks ? mention(text, "edge_test_bot") : undefined, reply_to_message: to || undefined });
      if (m.username) u.message.from.username = m.username;
      sent.set(m.message_id, u.message);
      const before = s.tg.sent(chat).length;
      logs.pull();
      const at = logs.kept.length;
      await s.webhook(u);
      if (!asks) {
        const hook = () => logs.since(at).filter((l) => l.kind.startsWith("fetch /telegram"));
        await until(() => hook().length > 0, 3000, "the webhook's metrics line").catch(() => {});
        const h = hook();
        if (h.length === 1) chatter.push([h[0].rows_read, h[0].rows_written, h[0].do_rows_read ?? null, h[0].do_rows_written ?? null]);
      }
      if (asks) {
        await until(() => s.tg.sent(chat).length > before, 60_000, `the answer to message ${i}`);
        await quiet(800);
        answered++;
      }
      step.tick();
      if ((i + 1) % GROUP_TICK_EVERY === 0) await tick();
    }
    await tick();
    await quiet(3500);
    const t = tally(logs.since(from));
    step.done();
    const median = (xs) => {
      const v = xs.filter((x) => x !== null).sort((a, b) => a - b);
      return v.length ? v[Math.floor((v.length - 1) / 2)] : null;
    };
    const col = (i) => median(chatter.map((c) => c[i]));
    return {
      messages: msgs.length,
      answered,
      recorded: { messages: people.length, answered: answeredIds.size },
      tick_every: GROUP_TICK_EVERY,
      chatter: { n: chatter.length, d1_rows_read: col(0), d1_rows_written: col(1) },
      ...t,
    };
  } finally {
    await s.close();
  }
}

const out = { quick: QUICK, model_ms: MODEL_MS, stream_ms: STREAM_MS, workloads: {} };
if (BEFORE) out.before = { name: process.env.CPU_BEFORE_NAME ?? BEFORE, workloads: {} };
const runs = {
  dm: () => privateChats(QUICK ? { users: 2, each: 4 } : { users: 4, each: 5 }),
  group: () => group(QUICK ? 65 : people.length),
  crew: () => privateChats(QUICK ? { users: 1, each: 3, crew: true } : { users: 2, each: 4, crew: true }),
};
for (const [k, run] of Object.entries(runs)) {
  bundle = undefined;
  out.workloads[k] = await run();
  if (BEFORE) {
    bundle = BEFORE;
    out.before.workloads[k] = await run();
  }
}
const dir = path.join(ROOT, QUICK ? ".tmp/bench/quick" : ".tmp/bench");
fs.mkdirSync(dir, { recursive: true });
fs.writeFileSync(path.join(dir, "limits.json"), JSON.stringify(out, null, 1));
const { limitsTables } = await import("./report-limits.mjs");
p.table("Free-plan limits per answered message", limitsTables(out));
