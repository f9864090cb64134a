// CPU per invocation and D1 rows per message, under local workerd (issue 17, sections 2 and 3).
// Writes .tmp/bench/cpu.json (read by bench/report-cpu.mjs for BENCHMARKS.md).
//
// CPU: the workerd process's CPU time, read from /proc/<pid>/task/*/schedstat (nanoseconds
// per thread) before and after one invocation at a time, minus the process's idle CPU over the
// same wall time; the median over repetitions. That is all of workerd: the Worker's own JS and
// wasm, the runtime, and miniflare's local D1 (SQLite and its JS), which on Cloudflare runs
// elsewhere and is not billed to the Worker; so it is an upper bound of what the Free plan's
// 10 ms counts.
//
// The Worker's own share (where `perf` works; CPU_PERF=0 skips it): workerd runs with V8's
// --perf-basic-prof (JIT code named in /tmp/perf-<pid>.map) and `perf record -g` samples it
// every 0.25 ms of CPU; a sample is the Worker's when the innermost JIT frame of its call chain
// is the worker's wasm or its JS glue (index.js), not miniflare's scripts. Samples whose chain
// holds no JIT frame (native code whose caller cannot be unwound) count as not the Worker's,
// so the share is a lower bound; the Worker's own ms = that share of the window's CPU.
//
// Rows: the worker runs with METRICS_LOG, which logs one `metrics {...}` line per invocation
// with the rows D1's result meta reports read and written; this script reads them from the
// harness's logs.
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { performance } from "node:perf_hooks";
import { spawn, spawnSync } from "node:child_process";
import { startStack, groupText, privateText, sleep, ROOT, seedMedia } from "../tests/support/stack.js";
import { embedText, q8 } from "../tests/support/fake-gemini.js";
import { progress, logDrain } from "./progress.mjs";
import { median, workerdPids, workerdPid, cpu } from "./proc.mjs";

// CPU_PROFILE=1 (development only): writes .tmp/bench/profile-<run>-<key>.txt, the Worker's own
// samples of each measured kind of window by function (self: the innermost frame; total: any
// frame of the chain), to see where a turn's CPU goes.
const PROFILE = process.env.CPU_PROFILE === "1";
const REPS = Math.max(3, Number(process.env.CPU_REPS ?? 5));
const PERF = process.env.CPU_PERF !== "0" && spawnSync("perf", ["--version"]).status === 0;
if (PERF) process.env.MINIFLARE_WORKERD_V8_FLAGS = `${process.env.MINIFLARE_WORKERD_V8_FLAGS ?? ""} --perf-basic-prof --interpreted-frames-native-stack --logfile=/dev/null --no-logfile-per-isolate`.trim(); // the map is all perf needs: no V8 log files in the working directory
// CPU_PERF_US (development only) samples more often, for finer profiles (CPU_PROFILE).
const PERF_PERIOD_NS = Number(process.env.CPU_PERF_US ?? 250) * 1000;
// How long one run's attribution (perf script) may take before it is given up: the run's CPU is
// still measured, its Worker's own share is then "not attributed" (and said so). On a 2-core
// machine a run's attribution takes seconds; CPU_PERF_LIMIT_S bounds a slow one (default 240 s).
const PERF_LIMIT_MS = Number(process.env.CPU_PERF_LIMIT_S ?? 240) * 1000;
/** Two runs of the same script, one with the bundle of an earlier commit (CPU_BEFORE), take
 *  turns: only the run that holds the baton does anything, and it hands the baton over at the
 *  start of each repetition (`Bench.pass`), so before and after alternate repetition by
 *  repetition and a drift in the machine's load reaches both alike. Each run measures its own
 *  workerd process, which is idle while the other run works. */
class Baton {
  constructor() {
    this.holder = 0;
    this.wake = [null, null];
    this.ended = [false, false];
  }
  side(i) {
    return { take: () => this.take(i), pass: () => this.pass(i), end: () => this.end(i) };
  }
  async take(i) {
    while (this.holder !== i) await new Promise((r) => (this.wake[i] = r));
  }
  handTo(i) {
    this.holder = i;
    this.wake[i]?.();
  }
  async pass(i) {
    if (this.ended[1 - i]) return;
    this.handTo(1 - i);
    await this.take(i);
  }
  end(i) {
    this.ended[i] = true;
    if (this.holder === i) this.handTo(1 - i);
  }
}

/** Wall-clock time (what a metrics line's `started_ms` is in) minus CLOCK_MONOTONIC (perf's
 *  sample times and `process.hrtime`), in ns; good to well under a millisecond. */
const WALL_MINUS_MONO_NS = (() => {
  const mono = process.hrtime.bigint();
  return BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6)) - mono;
})();

/** A window split by `Bench.attribute` (`split`) as if it were only the invocations whose kind
 *  starts with `kind`: their share of the CPU and own CPU, and their metrics lines. A window
 *  that could not be split (a bundle from before the lines had times) has no own figure. */
function partOf(w, kind) {
  const mine = Object.entries(w.parts ?? {}).filter(([k]) => k.startsWith(kind)).map(([, p]) => p);
  const cpu = mine.reduce((a, p) => a + p.cpu_ms, 0);
  const own = mine.reduce((a, p) => a + p.own_ms, 0);
  return { ...w, cpu_ms: w.parts ? cpu : w.cpu_ms, own_ms: w.parts ? own : null, own_share: w.parts && cpu > 0 ? own / cpu : null, lines: w.lines.filter((l) => l.kind.startsWith(kind)) };
}

class Bench {
  /** `others`: workerd processes that were running before this stack started (another run's). */
  constructor(s, side = null, others = []) {
    this.s = s;
    this.side = side;
    this.workerdPids = workerdPids().filter((p) => !others.includes(p));
    this.pid = workerdPid(this.workerdPids);
    // The metrics lines, drained from the harness as they come (see logDrain).
    this.drain = logDrain(s);
    this.idleNsPerMs = 0;
    this.windows = [];
  }
  /** The `metrics` lines logged since the last call. */
  metrics() {
    this.drain.pull();
    return this.drain.kept.splice(0);
  }
  /** Whether a metrics line of an invocation whose kind starts with `kind` came since the
   *  last `metrics()` call (without consuming them). */
  saw(kind) {
    this.drain.pull();
    return this.drain.kept.some((l) => l.kind.startsWith(kind));
  }
  activity() {
    this.drain.pull();
    return this.drain.count + this.s.gemini.requests.length + this.s.tg.requests.length;
  }
  /** Waits until nothing has happened (logs, model or Telegram calls) for `ms`. */
  async quiet(ms = 250) {
    let last = this.activity();
    let since = performance.now();
    while (performance.now() - since < ms) {
      await sleep(20);
      const now = this.activity();
      if (now !== last) {
        last = now;
        since = performance.now();
      }
    }
  }
  /** A point between repetitions: once this stack is quiet, the other run (if any) has its
   *  turn, and this one goes on when it passes the baton back. */
  async pass(ms = 250) {
    if (!this.side) return;
    await this.quiet(ms);
    await this.side.pass();
  }
  async measureIdle(ms = 3000) {
    await this.quiet();
    const c0 = cpu(this.pid).ns;
    const t0 = performance.now();
    await sleep(ms);
    this.idleNsPerMs = (cpu(this.pid).ns - c0) / (performance.now() - t0);
    return this.idleNsPerMs * 1000 / 1e6; // ms of CPU per second idle
  }
  /** Runs `action` once everything is quiet, waits for `until` and quiet again, and returns the
   *  CPU in ms (idle subtracted) with the invocations' metrics lines. */
  async window(action, until = async () => {}, settle = 150) {
    await this.quiet();
    this.metrics();
    const c0 = cpu(this.pid);
    const t0 = performance.now();
    const m0 = process.hrtime.bigint();
    await action();
    await until();
    await this.quiet(settle);
    const c1 = cpu(this.pid);
    const wall = performance.now() - t0;
    const lines = this.metrics();
    const w = { cpu_ms: (c1.ns - c0.ns - this.idleNsPerMs * wall) / 1e6, tick_ms: c1.tick_ms - c0.tick_ms, wall_ms: wall, lines, mono: [m0, process.hrtime.bigint()] };
    this.windows.push(w);
    return w;
  }
  /** Starts sampling workerd with perf (when it works here). */
  async startPerf(file) {
    if (!PERF) return;
    this.perfFile = file;
    // -B -N: no build-id pass over the samples when perf stops and no copy of workerd's binary
    // into ~/.debug (minutes on a fresh machine); perf script finds the binaries by path.
    this.perf = spawn("perf", ["record", "-q", "-B", "-N", "-k", "CLOCK_MONOTONIC", "-e", "cpu-clock", "-c", String(PERF_PERIOD_NS), "-g", "-p", String(this.pid), "-o", file], { stdio: "ignore" });
    await sleep(500);
  }
  /** Stops perf and gives every window measured meanwhile its `own_ms` (see the top). */
  async attribute() {
    if (!this.perf) return;
    const t0 = performance.now();
    let read = 0;
    let stage = "stopping perf record";
    // A line at least every 20 s while perf stops and perf script runs: never silent.
    const ticker = setInterval(() => P.note(`  attributing: ${stage}, ${read.toLocaleString("en-US")} samples read, ${Math.round((performance.now() - t0) / 1000)} s`), 20_000).unref();
    try {
      this.perf.kill("SIGINT");
      await new Promise((r) => this.perf.on("exit", r));
      stage = "perf script";
      const samples = await this.readSamples((n) => (read = n));
      if (!samples) {
        P.note(`  attribution given up after ${Math.round((performance.now() - t0) / 1000)} s (CPU_PERF_LIMIT_S): this run's Worker's own share is not attributed`);
        this.attribution = "timed out";
        return;
      }
      this.attribution = `${samples.length} samples in ${Math.round((performance.now() - t0) / 1000)} s`;
      this.share(samples);
    } finally {
      clearInterval(ticker);
      fs.rmSync(this.perfFile, { force: true });
    }
  }
  /** The recorded samples as [time ns, own, frames (with CPU_PROFILE)], or null when perf script
   *  failed or ran past PERF_LIMIT_MS (killed). `onRead(n)` follows the count. */
  async readSamples(onRead) {
    // --no-inline: never addr2line per frame (what makes perf script take many minutes where
    // inlining is shown by default). perf's text can outgrow a string: read line by line.
    const script = spawn("perf", ["script", "--no-inline", "-i", this.perfFile, "-F", "time,ip,sym"], { stdio: ["ignore", "pipe", "ignore"] });
    const exited = new Promise((r) => script.on("exit", (code, signal) => r(signal ? -1 : code)));
    const limit = setTimeout(() => script.kill("SIGKILL"), PERF_LIMIT_MS).unref();
    const samples = [];
    let cur = null;
    const close = () => cur && samples.push([cur.t, cur.own ?? false, cur.frames]);
    for await (const line of readline.createInterface({ input: script.stdout, crlfDelay: Infinity })) {
      const head = /^\s*(\d+)\.(\d+):/.exec(line);
      if (head) {
        onRead(samples.length + 1);
        close();
        cur = { t: BigInt(head[1]) * 1_000_000_000n + BigInt(head[2].padEnd(9, "0")), own: null, frames: PROFILE ? [] : null };
        continue;
      }
      const frame = /^\s+[0-9a-f]+ (.*)$/.exec(line);
      if (frame && cur?.frames) cur.frames.push(frame[1]);
      if (!frame || !cur || cur.own !== null) continue;
      const sym = frame[1];
      if (!sym.startsWith("JS:")) continue;
      // The innermost JIT frame decides: the worker's, or else miniflare's JS.
      cur.own = isOwnFrame(sym);
    }
    close();
    clearTimeout(limit);
    return (await exited) === 0 ? samples : null;
  }
  /** Gives every window its own share of the samples (see the top). */
  share(samples) {
    samples.sort((a, b) => (a[0] < b[0] ? -1 : 1));
    for (const w of this.windows) {
      const inside = samples.filter(([t]) => t >= w.mono[0] && t <= w.mono[1]);
      const own = inside.filter(([, o]) => o).length;
      w.own_share = inside.length ? own / inside.length : null;
      w.own_ms = inside.length ? (own / inside.length) * w.cpu_ms : null;
      w.sampled_ms = (inside.length * PERF_PERIOD_NS) / 1e6;
      if (PROFILE) w.samples = inside;
      // A window of several invocations (`w.split`) is split among them by their metrics
      // lines' times (the runtime's clock, in ms, which moves only with I/O: an invocation's
      // last synchronous stretch after its last I/O counts to whatever holds it): a sample
      // goes to the innermost invocation running then (the chat object's `arrival` or `job` request
      // inside the webhook or consumer that waits for it); samples outside every span to the
      // window's first invocation.
      if (w.split && inside.length) {
        const spans = w.lines.filter((l) => Number.isFinite(l.started_ms) && Number.isFinite(l.ended_ms));
        if (spans.length === w.lines.length && spans.length > 0) {
          const mono = (ms) => BigInt(Math.round(ms * 1e6)) - WALL_MINUS_MONO_NS;
          const iv = spans.map((l) => ({ kind: l.kind, t0: mono(l.started_ms), t1: mono(l.ended_ms + 1) }));
          const first = iv.reduce((a, b) => (b.t0 < a.t0 ? b : a)).kind;
          const n = {};
          for (const [t, own] of inside) {
            const holding = iv.filter((x) => t >= x.t0 && t < x.t1);
            const k = holding.length ? holding.reduce((a, b) => (b.t0 > a.t0 ? b : a)).kind : first;
            n[k] ??= { all: 0, own: 0 };
            n[k].all += 1;
            n[k].own += own ? 1 : 0;
          }
          w.parts = Object.fromEntries(Object.entries(n).map(([k, c]) => [k, { cpu_ms: (c.all / inside.length) * w.cpu_ms, own_ms: (c.own / inside.length) * w.cpu_ms }]));
        }
      }
    }
  }
}

// Locally every outbound fetch passes through miniflare's outbound worker, a script that is
// also named index.js in V8's map; on Cloudflare there is no such proxy. Its functions are
// known by name and line (V8 names a JIT frame "<name> <script>:<line>:<column>"), and a sample
// whose innermost JIT frame is one of them is not the Worker's.
const outboundProxy = (() => {
  const file = path.join(ROOT, "node_modules/miniflare/dist/src/workers/core/outbound.worker.js");
  const ours = path.join(ROOT, ".tmp/bundle/index.js");
  if (!fs.existsSync(file)) return new Set();
  const defined = (text) =>
    new Set(text.split("\n").flatMap((line, i) => [...line.matchAll(/(?:function\s+|async\s+|^\s*)([A-Za-z_$][\w$]*)\s*\(/g)].map((m) => `${m[1]}@${i + 1}`)));
  const proxy = defined(fs.readFileSync(file, "utf8"));
  const mine = fs.existsSync(ours) ? defined(fs.readFileSync(ours, "utf8")) : new Set();
  return new Set([...proxy].filter((k) => !mine.has(k)));
})();
function isOutboundProxy(sym) {
  const m = /([A-Za-z_$][\w$]*) index\.js:(\d+):\d+/.exec(sym);
  return !!m && outboundProxy.has(`${m[1]}@${m[2]}`);
}

/** A perf frame's symbol without V8's marks ("JS:", "*") and the map file perf names. */
const bare = (frame) => frame.replace(/^JS:\*?/, "").replace(/\s*\(\/tmp\/perf-\d+\.map\)$/, "");

/** Whether a JIT frame is the Worker's own: its JS glue (index.js, but not miniflare's outbound
 *  proxy), or a wasm function (named by Rust path with its tier, and no script of its own).
 *  Both the own-CPU share and the profile's by-caller view decide by this. */
function isOwnFrame(frame) {
  const f = bare(frame);
  return (/ index\.js:/.test(f) && !isOutboundProxy(f)) || (/-(liftoff|turbofan|maglev)$/.test(f) && !/\.js:\d|miniflare:|node:/.test(f)) || /^wasm-/.test(f);
}

/** The own samples of `windows` by function (CPU_PROFILE). */
function writeProfile(name, windows) {
  const self = new Map();
  const total = new Map();
  const caller = new Map();
  const glue = new Map();
  let own = 0;
  let all = 0;
  const bump = (m, k) => m.set(k, (m.get(k) ?? 0) + 1);
  const clip = (f) => bare(f).slice(0, 140);
  const per = [];
  for (const w of windows) {
    let wOwn = 0;
    let wCompile = 0;
    for (const [, o, frames] of w.samples ?? []) {
      all++;
      if (!o || !frames?.length) continue;
      wOwn++;
      // Lazy compilation (a function's first call in the isolate) is counted per window and
      // left out of the table: it shows where a warm isolate spends its time.
      if (frames.some((f) => f.includes("WasmCompileLazy"))) {
        wCompile++;
        continue;
      }
      own++;
      bump(self, clip(frames[0]));
      // The runtime work a sample does is charged to the worker's innermost frame that asked
      // for it (a wasm function or the glue), so calls into the runtime show under their caller.
      const mine = frames.find(isOwnFrame);
      bump(caller, mine ? clip(mine) : "(none)");
      // Time in the JS glue (and the runtime under it), charged to the wasm function that
      // called into the glue.
      if (mine && / index\.js:/.test(mine)) {
        const wasm = frames.find((f) => isOwnFrame(f) && !/ index\.js:/.test(f) && !/^wasm-/.test(bare(f)));
        bump(glue, wasm ? clip(wasm) : "(no wasm caller)");
      }
      for (const f of new Set(frames.map(clip))) bump(total, f);
    }
    per.push(`window: own ${w.own_ms?.toFixed(2)} ms (${wOwn} samples, ${wCompile} in lazy wasm compilation), all workerd ${w.cpu_ms.toFixed(1)} ms`);
  }
  const top = (m) => [...m].sort((a, b) => b[1] - a[1]).slice(0, 250).map(([k, n]) => `${((100 * n) / Math.max(own, 1)).toFixed(1).padStart(5)}%  ${k}`);
  const text = [`${name}: ${own} own samples of ${all} (${windows.length} windows)`, ...per, "", "self:", ...top(self), "", "by the worker's innermost frame:", ...top(caller), "", "the glue's samples by the wasm function that called it:", ...top(glue), "", "total:", ...top(total)].join("\n");
  fs.mkdirSync(path.join(ROOT, ".tmp/bench"), { recursive: true });
  fs.writeFileSync(path.join(ROOT, `.tmp/bench/profile-${name}.txt`), text + "\n");
}

async function waitUntil(check, ms, what) {
  const end = performance.now() + ms;
  while (!check()) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}
const sum = (lines, key, pred = () => true) => lines.filter((l) => pred(l.kind)).reduce((n, l) => n + l[key], 0);
const kinds = (lines) => [...new Set(lines.map((l) => l.kind))].sort();
/** Median CPU, and rows read/written per repetition (median), of a list of windows. */
function summary(windows, pred = () => true) {
  if (windows.length === 0) return null;
  return {
    reps: windows.length,
    cpu_ms: median(windows.map((w) => w.cpu_ms)),
    cpu_ms_min: Math.min(...windows.map((w) => w.cpu_ms)),
    cpu_ms_max: Math.max(...windows.map((w) => w.cpu_ms)),
    own_ms: windows.every((w) => w.own_ms != null) ? median(windows.map((w) => w.own_ms)) : null,
    own_share: windows.every((w) => w.own_share != null) ? median(windows.map((w) => w.own_share)) : null,
    sampled_ms: windows.every((w) => w.sampled_ms != null) ? median(windows.map((w) => w.sampled_ms)) : null,
    rows_read: median(windows.map((w) => sum(w.lines, "rows_read", pred))),
    rows_written: median(windows.map((w) => sum(w.lines, "rows_written", pred))),
    rows_bytes: median(windows.map((w) => sum(w.lines, "rows_bytes", pred))),
    d1_round_trips: median(windows.map((w) => sum(w.lines, "d1_round_trips", pred))),
    invocations: kinds(windows.flatMap((w) => w.lines)),
    invocations_per_rep: median(windows.map((w) => w.lines.filter((l) => pred(l.kind)).length)),
  };
}

/** A run's summaries as a markdown table, printed as soon as the run is measured. */
function runTable(out, keys) {
  const f = (v, d = 1) => (v == null ? "–" : v.toFixed(d));
  const rows = [...new Set(keys)].filter((k) => out[k]).map((k) => {
    const x = out[k];
    return `| ${k} | ${f(x.cpu_ms)} (${f(x.cpu_ms_min)}–${f(x.cpu_ms_max)}) | ${f(x.own_ms)} | ${f(x.rows_read, 0)} | ${f(x.rows_written, 0)} | ${x.reps} |`;
  });
  return ["| invocation | all workerd CPU ms, median (range) | the Worker's own ms | D1 rows read | rows written | repetitions |", "|---|---|---|---|---|---|", ...rows].join("\n");
}

const recording = JSON.parse(fs.readFileSync(path.join(ROOT, "tests/fixtures/conversations/group_500.json"), "utf8"));
// CPU_REPLAY=n replays only the first n (a quick try while developing; the report says how many).
const human = recording.messages.filter((m) => !m.bot && m.user_id).slice(0, Number(process.env.CPU_REPLAY ?? Infinity));

/** The recorded conversation's people's messages into a group, one webhook at a time: each one
 *  is a group-chatter invocation (measured). Replies keep their reply_to when it is a person's. */
async function replay(b, chat, first, step) {
  const sent = new Map();
  const windows = [];
  for (const m of human) {
    step?.tick();
    const u = m === human[0] ? first : groupText(chat, m.user_id, m.text || "(photo)", { name: m.name });
    u.message.from.username = m.username ?? undefined;
    const to = m.reply_to && sent.get(m.reply_to);
    if (to) u.message.reply_to_message = to;
    sent.set(m.message_id, u.message);
    await b.pass(0); // the last window ended quiet
    windows.push(await b.window(() => b.s.webhook(u), async () => {}, 60));
  }
  return windows;
}

/** An edit of `update`'s message (the `n`th), as Telegram sends it. */
function edited(update, n) {
  const m = update.message;
  return { update_id: update.update_id + 700_000 + n, edited_message: { ...m, text: `${m.text} (edited ${n})`, edit_date: m.date + 5 + n } };
}

/** One message that asks for a reply: the webhook with its hand-off to the chat object, then
 *  everything until the reply is sent (the turn's alarm, which also delivers). */
async function askAndAnswer(b, update, chat) {
  await b.pass();
  const before = b.s.tg.sent(chat).length;
  const hook = await b.window(() => b.s.webhook(update), async () => {}, 60);
  const turn = await b.window(async () => {}, () => b.s.tg.waitFor(() => b.s.tg.sent(chat).length > before, 60_000, "the reply"), 300);
  // On a loaded machine the debounce alarm can fire before the webhook's window closed: such
  // a repetition measured the two together and is done again.
  const alarm = (w) => w.lines.some((l) => l.kind.startsWith("alarm"));
  return { hook, turn, clean: !alarm(hook) && alarm(turn) };
}

/** Runs `rep(i)` until REPS of its results are clean (at most 3 × REPS tries), as the
 *  scenario `label` of the progress (`tag`: the run's name). */
async function clean(rep, discarded, label, tag) {
  const step = P.scenario(`${tag}: ${label}`, REPS);
  const out = [];
  for (let i = 0; out.length < REPS && i < 3 * REPS; i++) {
    const r = await rep(i);
    if (r.clean) out.push(r);
    else discarded.n++;
    step.set(out.length);
  }
  step.done();
  return out;
}

async function formatRun(format, bundle, side = null) {
  const others = workerdPids();
  const s = await startStack({
    bundle,
    vars: { METRICS_LOG: "true", HISTORY_FORMAT: format, DEBOUNCE_MS: "400", DEBOUNCE_MAX_MS: "2000", USER_TURNS_PER_HOUR: "0", RETRY_BASE_MS: "1500" },
  });
  const b = new Bench(s, side, others);
  const out = { format, perf: PERF };
  const later = []; // [key, windows, pred]: summarised once perf has attributed the samples
  try {
    await s.fetch("/health");
    out.idle_cpu_ms_per_s = await b.measureIdle();
    await b.startPerf(path.join(ROOT, `.tmp/bench/perf-${format}${bundle ? "-before" : ""}.data`));
    const chat = -1001700000001 - (format === "compact" ? 1 : 0);
    const first = groupText(chat, human[0].user_id, human[0].text || "(photo)", { name: human[0].name });
    const tag = `${format}${bundle ? " (before)" : ""}`;
    const replaying = P.scenario(`${tag}: the recorded group's ${human.length} messages as chatter`, human.length);
    const chatter = await replay(b, chat, first, replaying);
    replaying.done();
    later.push(["chatter", chatter.slice(20)]); // the first few warm the instance up

    // Turns over the replayed history (name trigger), each asked by one of its people. The
    // first few run while V8 still compiles the long-history path (baseline code, then the
    // optimizing tier in the background): warm-up, not measured.
    for (let i = 0; i < 3; i++) await askAndAnswer(b, groupText(chat, 101 + (i % 6), `Edge, are you there? (${i})`, { name: "Alice" }), chat);
    const discarded = { n: 0 };
    const long = await clean((i) => askAndAnswer(b, groupText(chat, 101 + (i % 6), `Edge, what do you make of all this? (${i})`, { name: "Alice" }), chat), discarded, "turns over the long history", tag);
    later.push(["group_ask_webhook", long.map((r) => r.hook)]);
    later.push(["turn_500", long.map((r) => r.turn)]);
    // The same turns after an edit of the first message: since migration 0019 the edited row
    // is read with the new ones (before it, an edit bumped the conversation's history_version
    // and the turn read its whole window, as `turn_500_full` below does).
    const edit = await clean(async (i) => {
      await s.webhook(edited(first, i));
      await sleep(200);
      return askAndAnswer(b, groupText(chat, 101 + (i % 6), `Edge, and after the edit? (${i})`, { name: "Alice" }), chat);
    }, discarded, "turns after an edit", tag);
    later.push(["turn_500_edit", edit.map((r) => r.turn)]);
    // The same turns after the conversation's history_version moved (as its triggers move it
    // when a message leaves the history or a retried turn's answer is placed anew): the chat
    // object's copy of the rows no longer holds and each turn reads its whole window again, as
    // the first turn of a new chat-object instance does.
    const full = await clean(async (i) => {
      await s.sql("UPDATE conversations SET history_version = history_version + 1 WHERE chat_id = ?", chat);
      return askAndAnswer(b, groupText(chat, 101 + (i % 6), `Edge, and after the change? (${i})`, { name: "Alice" }), chat);
    }, discarded, "turns reading the whole window", tag);
    later.push(["turn_500_full", full.map((r) => r.turn)]);

    // Private chats with a short history: a first message warms the chat object up.
    const dm = await clean(async (i) => {
      const uid = 88_000_000 + i * 11 + (format === "compact" ? 1 : 0);
      await askAndAnswer(b, privateText(uid, "hello there"), uid);
      return askAndAnswer(b, privateText(uid, `and how are you? (${i})`), uid);
    }, discarded, "private messages and their turns", tag);
    out.discarded_repetitions = discarded;
    later.push(["dm_webhook", dm.map((r) => r.hook)]);
    for (const r of dm) r.hook.split = true;
    later.push(["dm_webhook_edge", dm.map((r) => r.hook), (k) => k.startsWith("fetch"), (w) => partOf(w, "fetch")]);
    later.push(["dm_object_inbox", dm.map((r) => r.hook), (k) => k.startsWith("object"), (w) => partOf(w, "object")]);
    later.push(["turn_short", dm.map((r) => r.turn)]);

    if (format === "structured") {
      // A turn retried through the queue: the model answers 503 once; measured from after the
      // failed alarm to the reply (the consumer's invocation and the chat object's job request).
      const q = [];
      const retrying = P.scenario(`${tag}: turns retried through the queue`, REPS);
      for (let i = 0; i < REPS; i++) {
        const uid = 88_100_000 + i * 13;
        await askAndAnswer(b, privateText(uid, "hello"), uid);
        s.gemini.script(uid, [{ status: 503 }]);
        const before = s.tg.sent(uid).length;
        await b.window(() => s.webhook(privateText(uid, `retry me (${i})`)), () => s.gemini.waitFor(() => s.gemini.calls(uid).some((r) => r.status === 503), 30_000, "the failed call"), 300);
        const w = await b.window(async () => {}, () => s.tg.waitFor(() => s.tg.sent(uid).length > before, 60_000, "the retried reply"), 300);
        // The consumer hands the job to the chat object, whose `job` request runs the turn; an
        // alarm (the state's next wake) may follow. Split among them.
        w.split = true;
        q.push(w);
        retrying.tick();
      }
      retrying.done();
      later.push(["queue_turn_job", q]);
      later.push(["queue_job_consumer", q, (k) => k.startsWith("queue"), (w) => partOf(w, "queue")]);
      later.push(["queue_job_object", q, (k) => k.startsWith("object"), (w) => partOf(w, "object")]);
      later.push(["queue_job_alarm", q, (k) => k.startsWith("alarm"), (w) => partOf(w, "alarm")]);

      // The cron tick, then the consolidation jobs it queued (the replayed group and the chats).
      const cron = [];
      const jobs = [];
      const ticking = P.scenario(`${tag}: cron ticks and their consolidation jobs`, REPS);
      for (let i = 0; i < REPS; i++) {
        await b.pass();
        // New messages, so the next tick has something to consolidate (40 needed per chat).
        if (i > 0) for (const m of human.slice(0, 45)) await s.webhook(groupText(chat, m.user_id, m.text || "(photo)", { name: m.name }));
        cron.push(await b.window(() => s.scheduled(), async () => {}, 20));
        // The tick returns once the jobs are queued; the consumer takes them within a second.
        jobs.push(await b.window(async () => {}, () => waitUntil(() => b.saw("queue"), 10_000, "the consolidation jobs").catch(() => {}), 500));
        ticking.tick();
      }
      ticking.done();
      // On a loaded machine the consumer may start inside the tick's window: such windows are
      // left out of both (a window without the consumer's invocation is no job's either).
      const hasQueue = (w) => w.lines.some((l) => l.kind.startsWith("queue"));
      later.push(["cron_tick", cron.filter((w) => !hasQueue(w))]);
      later.push(["consolidation_jobs", jobs.filter(hasQueue)]);
    }
    P.note(`${tag}: attributing the samples${b.perf ? " (perf script)" : ""}`);
    await b.attribute();
    out.attribution = b.attribution ?? null;
    for (const [key, windows, pred, view] of later) out[key] = summary(view ? windows.map(view) : windows, pred);
    P.table(`CPU and D1 rows, ${tag} run`, runTable(out, later.map(([key]) => key)));
    if (PROFILE) for (const [key, windows, , view] of later) if (!view) writeProfile(`${format}${bundle ? "-before" : ""}-${key}`, windows);
    out.chatter.replayed_messages = human.length;
    out.turn_500.history_messages = human.length;
    out.turn_500.recorded_bot_messages = recording.messages.filter((m) => m.bot).length;
  } finally {
    b.perf?.kill("SIGINT");
    await s.close();
    // V8's perf maps of this run's workerd processes (--perf-basic-prof writes them to /tmp).
    for (const pid of b.workerdPids) fs.rmSync(`/tmp/perf-${pid}.map`, { force: true });
  }
  return out;
}

/** Turns with EMBEDDINGS_MODEL set over a chat with 300 stored memories that have embeddings
 * (recall reads up to 300): the query is embedded and every vector compared, every turn. */
async function embeddingsRun(bundle, side = null) {
  const others = workerdPids();
  const s = await startStack({ bundle, vars: { METRICS_LOG: "true", EMBEDDINGS_MODEL: "gemini-embedding-001", DEBOUNCE_MS: "400", DEBOUNCE_MAX_MS: "2000", USER_TURNS_PER_HOUR: "0" } });
  const b = new Bench(s, side, others);
  const out = { perf: PERF };
  try {
    await s.fetch("/health");
    out.idle_cpu_ms_per_s = await b.measureIdle();
    await b.startPerf(path.join(ROOT, `.tmp/bench/perf-embeddings${bundle ? "-before" : ""}.data`));
    const discarded = { n: 0 };
    const turns = await clean(async (i) => {
      const uid = 88_200_000 + i * 17;
      const stmts = [];
      for (let k = 0; k < 300; k++) {
        const text = `memory ${k}: likes topic ${k % 37} and the colour ${["red", "green", "blue"][k % 3]}`;
        stmts.push(s.env.DB.prepare("INSERT INTO memories (kind, chat_id, conv, value, embedding, created_at, updated_at) VALUES ('episode', ?, ?, ?, ?, 0, 0)").bind(uid, String(uid), text, q8(embedText(text, 768))));
      }
      for (let k = 0; k < stmts.length; k += 100) await s.env.DB.batch(stmts.slice(k, k + 100));
      await askAndAnswer(b, privateText(uid, "hello there"), uid);
      return askAndAnswer(b, privateText(uid, `which colour do I like? (${i})`), uid);
    }, discarded, "turns with embeddings over 300 memories", `embeddings${bundle ? " (before)" : ""}`);
    await b.attribute();
    out.turn_embeddings = summary(turns.map((r) => r.turn));
    P.table(`CPU and D1 rows, embeddings run${bundle ? " (before)" : ""}`, runTable(out, ["turn_embeddings"]));
    if (PROFILE) writeProfile(`embeddings${bundle ? "-before" : ""}-turn`, turns.map((r) => r.turn));
    out.discarded_repetitions = discarded;
  } finally {
    b.perf?.kill("SIGINT");
    await s.close();
    for (const pid of b.workerdPids) fs.rmSync(`/tmp/perf-${pid}.map`, { force: true });
  }
  return out;
}

/** What a refused sender and a media search cost in D1 rows (issue 35, items 3 and 4), under
 * `DM_POLICY=allowlist`: a stranger's first update (the webhook, the chat object's refusal and
 * its one notice), the next ones within the hour's limit, and those past it (each only the
 * webhook); and a turn whose model calls `search_memory` over media in a busy bot, 1,000
 * described media in 20 other chats, all matching the words searched. */
async function rowsRun(bundle) {
  const others = workerdPids();
  const s = await startStack({ bundle, vars: { METRICS_LOG: "true", DM_POLICY: "allowlist", DEBOUNCE_MS: "400", DEBOUNCE_MAX_MS: "2000", USER_TURNS_PER_HOUR: "0" } });
  const b = new Bench(s, null, others);
  const out = { perf: false };
  try {
    await s.fetch("/health");
    out.idle_cpu_ms_per_s = await b.measureIdle();
    const first = [];
    const within = [];
    const past = [];
    const refusing = P.scenario("rows: refused senders' updates", REPS);
    for (let i = 0; i < REPS; i++) {
      const uid = 88_300_000 + i * 19;
      first.push(await b.window(() => s.webhook(privateText(uid, "hello?")), () => s.tg.waitFor(() => s.tg.sent(uid).length === 1, 30_000, "the notice"), 300));
      for (let k = 1; k < 5; k++) within.push(await b.window(() => s.webhook(privateText(uid, `hello? (${k})`)), async () => {}, 200));
      for (let k = 5; k < 12; k++) past.push(await b.window(() => s.webhook(privateText(uid, `hello? (${k})`)), async () => {}, 100));
      refusing.tick();
    }
    refusing.done();
    out.refused_first = summary(first);
    out.refused_within_limit = summary(within);
    // The sixth update of the hour moves the counter a last time; later ones write nothing.
    out.refused_limit_reached = summary(past.filter((_, k) => k % 7 === 0));
    out.refused_past_limit = summary(past.filter((_, k) => k % 7 !== 0));

    // 1,000 described media in 20 chats, each matching "lighthouse".
    const seed = (chat, n, words, tag) => seedMedia(s.env.DB, chat, n, words, tag);
    for (let c = 0; c < 20; c++) await seed(-1001800000000 - c, 50, "a lighthouse at dusk", "busy");
    const searches = [];
    const searching = P.scenario("rows: media searches in a busy bot", REPS);
    for (let i = 0; i < REPS; i++) {
      const uid = 88_400_000 + i * 23;
      await s.sql("INSERT INTO users (user_id, name, access, updated_at) VALUES (?, 'Pat', 'allowed', 0)", uid);
      await seed(uid, 5, "a lighthouse seen from the ferry", "own");
      // A first turn loads the chat's window (not measured).
      await s.webhook(privateText(uid, "hello there"));
      await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 60_000, "the first reply");
      s.gemini.script(uid, [{ calls: [{ name: "search_memory", args: { query: "lighthouse" } }] }, { text: "The ferry one." }]);
      await b.quiet(300);
      searches.push(await b.window(() => s.webhook(privateText(uid, `which photo had the lighthouse? (${i})`)), () => s.tg.waitFor(() => s.tg.sent(uid).length === 2, 60_000, "the reply"), 300));
      searching.tick();
    }
    searching.done();
    out.media_search_turn = summary(searches, (k) => k.startsWith("alarm"));
    out.media_search_turn.media = 1000;
    out.media_search_turn.chats = 20;
    P.table("D1 rows, refused senders and media searches", runTable(out, ["refused_first", "refused_within_limit", "refused_limit_reached", "refused_past_limit", "media_search_turn"]));
  } finally {
    await s.close();
  }
  return out;
}

/** Runs `after(side)` and `before(side)` taking turns (see Baton); each holds the baton from
 *  its start (the stack's start-up too) to its end (its profile's attribution too). */
async function alternating(after, before) {
  const baton = new Baton();
  const holding = async (side, run) => {
    await side.take();
    try {
      return await run(side);
    } finally {
      side.end();
    }
  };
  return Promise.all([holding(baton.side(0), after), holding(baton.side(1), before)]);
}

// CPU_RUNS (development only) picks runs: structured, compact, embeddings, rows.
const picked = (process.env.CPU_RUNS ?? "structured,compact,embeddings,rows").split(",");
// The progress: scenarios per run (see formatRun, embeddingsRun, rowsRun), twice where a
// before bundle alternates with this one.
const twice = process.env.CPU_BEFORE ? 2 : 1;
const P = progress("cpu", { plan: (picked.includes("structured") ? 7 * twice : 0) + (picked.includes("compact") ? 5 : 0) + (picked.includes("embeddings") ? twice : 0) + (picked.includes("rows") ? 2 : 0) });
const runs = {};
// CPU_BEFORE=<a prebuilt bundle of an earlier commit> measures it too, in the same run and
// alternating with this commit's repetition by repetition, for a before-and-after table (the
// structured and embeddings runs; the schema is this commit's).
const before = process.env.CPU_BEFORE ? path.resolve(process.env.CPU_BEFORE) : null;
if (before) runs.before = { bundle: process.env.CPU_BEFORE_NAME ?? before };
if (picked.includes("structured")) {
  if (before) [runs.structured, runs.before.structured] = await alternating((side) => formatRun("structured", undefined, side), (side) => formatRun("structured", before, side));
  else runs.structured = await formatRun("structured");
}
if (picked.includes("compact")) runs.compact = await formatRun("compact");
if (picked.includes("embeddings")) {
  if (before) [runs.embeddings, runs.before.embeddings] = await alternating((side) => embeddingsRun(undefined, side), (side) => embeddingsRun(before, side));
  else runs.embeddings = await embeddingsRun();
}
if (picked.includes("rows")) runs.rows = await rowsRun();
fs.mkdirSync(path.join(ROOT, ".tmp/bench"), { recursive: true });
fs.writeFileSync(path.join(ROOT, ".tmp/bench/cpu.json"), JSON.stringify({ reps: REPS, runs }, null, 1));
P.note("wrote .tmp/bench/cpu.json (bench/report.mjs makes BENCHMARKS.md's sections of it)");
