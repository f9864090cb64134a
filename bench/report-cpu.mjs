// The "CPU per invocation" and "D1 rows per message" sections of BENCHMARKS.md, from
// .tmp/bench/cpu.json (written by bench/cpu.mjs); empty when that file is missing.
import fs from "node:fs";
import path from "node:path";

const FREE = { rows_read: 5_000_000, rows_written: 100_000, requests: 100_000, cpu_ms: 10 };

const fmt = (n, d = 1) => n.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d });
const int = (n) => Math.floor(n).toLocaleString("en-US");
const range = (x) => `${fmt(x.cpu_ms)} ms (${fmt(x.cpu_ms_min)}–${fmt(x.cpu_ms_max)})`;

/** Messages a day the Free plan's D1 and request limits allow, for a message costing `rows`
 *  and `requests` Worker requests; and which limit binds. */
export function perDay(read, written, requests) {
  const limits = [
    ["rows read", read > 0 ? FREE.rows_read / read : Infinity],
    ["rows written", written > 0 ? FREE.rows_written / written : Infinity],
    ["requests", requests > 0 ? FREE.requests / requests : Infinity],
  ];
  const [by, n] = limits.reduce((a, b) => (b[1] < a[1] ? b : a));
  return { n, by };
}

/** What one message costs in D1 rows: a chatter update, and a reply-asking update with the turn
 *  that answers it (short history, and a 500-message group history). */
export function messageCosts(st) {
  const ask = (hook, turn) => ({ read: hook.rows_read + turn.rows_read, written: hook.rows_written + turn.rows_written });
  return {
    chatter: { read: st.chatter.rows_read, written: st.chatter.rows_written, requests: 1 },
    dm: { ...ask(st.dm_webhook, st.turn_short), requests: 1 },
    // Pessimistic: each turn reads its whole window, as when the chat object's instance (and
    // its copy of the rows) is gone between asks.
    group500: { ...ask(st.group_ask_webhook, st.turn_500_full ?? st.turn_500), requests: 1 },
  };
}

/** Bytes of D1 rows read into the worker (a bundle before rows_bytes was logged: "–"). */
const bytes = (x) => (Number.isFinite(x?.rows_bytes) ? fmt(x.rows_bytes, 0) : "–");

/** The before-and-after table of a run with CPU_BEFORE (the same invocations, an earlier
 *  commit's bundle, measured in the same run), or nothing. */
function beforeAfter(runs) {
  const b = runs.before;
  if (!b?.structured) return "";
  const own = (x) => (x?.own_ms == null ? "–" : `${fmt(x.own_ms)} ms`);
  const line = (name, x, y) => `| ${name} | ${own(x)} | ${own(y)} | ${x ? fmt(x.rows_read, 0) : "–"} | ${y ? fmt(y.rows_read, 0) : "–"} | ${bytes(x)} | ${bytes(y)} |`;
  const [st, sb] = [runs.structured, b.structured];
  return `Before and after, in this run: the same invocations with the bundle of ${b.bundle} (an
earlier commit, over this commit's schema), measured the same way in a second stack that takes
turns with this commit's: before and after alternate repetition by repetition, so a change in
the machine's load reaches both alike:

| invocation | the Worker's own CPU, before | after | rows read, before | after | bytes of rows into the worker, before | after |
|---|---|---|---|---|---|---|
${line("group chatter webhook", sb.chatter, st.chatter)}
${line("DM webhook + hand-off", sb.dm_webhook, st.dm_webhook)}
${line("turn, short history", sb.turn_short, st.turn_short)}
${line(`turn, ${st.turn_500.history_messages}-message history, structured`, sb.turn_500, st.turn_500)}
${line(`the same after an edit (before: the whole window read; after: the edited row read with the new ones)`, sb.turn_500_full, st.turn_500_edit ?? st.turn_500_full)}
${line(`the same, the whole window read (the history version moved)`, sb.turn_500_full, st.turn_500_full)}
${b.embeddings && runs.embeddings ? line("turn with `EMBEDDINGS_MODEL` over 300 stored vectors", b.embeddings.turn_embeddings, runs.embeddings.turn_embeddings) + "\n" : ""}${line("queue job (a retried turn), all its invocations", sb.queue_turn_job, st.queue_turn_job)}
${line("of which the chat object's `job` request, the retried turn", sb.queue_job_object, st.queue_job_object)}
${line("consolidation jobs of one tick", sb.consolidation_jobs, st.consolidation_jobs)}

`;
}

/** The rows of a refused sender's updates and of a media search in a busy bot (the `rows` run;
 *  issue 35, items 3 and 4). */
function refusedAndSearch(r, rows) {
  const line = (name, x) => (x ? rows(name, x) + "\n" : "");
  return (
    line("refused update: a stranger's first (webhook, the chat object's refusal and its one notice)", r.refused_first) +
    line("refused update within the sender's hourly limit (`REFUSED_UPDATES_PER_HOUR`)", r.refused_within_limit) +
    line("refused update reaching the limit (the counter's last write)", r.refused_limit_reached) +
    line("refused update past the limit (a persistent stranger)", r.refused_past_limit) +
    line(`turn whose model calls \`search_memory\` over media, in a bot with ${r.media_search_turn?.media ?? 1000} described media in ${r.media_search_turn?.chats ?? 20} other chats (the turn's alarm)`, r.media_search_turn)
  );
}

export function cpuSections(root) {
  const file = path.join(root, ".tmp/bench/cpu.json");
  if (!fs.existsSync(file)) return "";
  const { reps, runs } = JSON.parse(fs.readFileSync(file, "utf8"));
  const st = runs.structured;
  const co = runs.compact;
  const own = (x) => (x.own_ms == null ? "not separated" : `${fmt(x.own_ms)} ms (${fmt(100 * x.own_share, 0)}%)`);
  const row = (name, x) => (x == null ? `| ${name} | not measured in this run | | 0 | |` : `| ${name} | ${range(x)} | ${own(x)} | ${x.reps} | ${x.invocations.map((k) => `\`${k.trim()}\``).join(", ")} |`);
  const rows = (name, x) => x == null ? `| ${name} | not measured in this run | | | |` : `| ${name} | ${fmt(x.rows_read, 0)} | ${fmt(x.rows_written, 0)} | ${fmt(x.d1_round_trips, 0)} | ${bytes(x)} |`;
  const c = messageCosts(st);
  const day = Object.fromEntries(Object.entries(c).map(([k, v]) => [k, perDay(v.read, v.written, v.requests)]));
  // A day of a group where one message in ten asks for a reply (over the long history).
  const mix = perDay(0.9 * c.chatter.read + 0.1 * c.group500.read, 0.9 * c.chatter.written + 0.1 * c.group500.written, 1);
  return `
## CPU per invocation

\`node bench/cpu.mjs\` (run by \`npm run bench\`): the CPU time of the workerd process that
runs the worker, read from \`/proc/<pid>/task/*/schedstat\` (nanoseconds, every thread) before
and after one invocation at a time, with nothing else running in the harness, minus workerd's
idle CPU over the same wall time (${fmt(st.idle_cpu_ms_per_s, 2)} ms per second here); the median over the
repetitions (range in brackets). Fake Telegram and Gemini answer at once; their CPU is not
counted. This is **all of workerd**: the Worker's JS and wasm, the runtime, and miniflare's
local D1 (SQLite and its JS), which on Cloudflare runs outside the Worker and is not billed to
it; so it overstates what the Free plan's ${FREE.cpu_ms} ms counts. ${st.perf ? `The Worker's own JS and wasm
are separated with \`perf\`: workerd runs with V8's \`--perf-basic-prof\` and
\`--interpreted-frames-native-stack\`, \`perf record -g\` samples it every 0.25 ms of CPU, and a sample
is the Worker's when the innermost JIT frame of its call chain is the worker's wasm or its JS
glue (\`index.js\`) rather than miniflare's scripts (miniflare's outbound proxy, which every
local fetch passes through and which is not there on Cloudflare, is also named \`index.js\`;
its functions are told apart by name and line, and are not the Worker's; runs before
2026-11-25 counted them as the Worker's, up to 8% of a short turn's own samples); samples
with no JIT frame in their chain
(native code whose caller could not be unwound) are not counted as the Worker's, so that column
is a lower bound: its median share of each window times the window's CPU.` : "The Worker's own share is not separated in this run (`perf` was not available)."} On a machine
shared with other work the figures are inflated and vary from run to run; compare runs on a
quiet machine.

| invocation | all workerd CPU, median (range) | the Worker's own JS + wasm (share) | repetitions | invocations in the window |
|---|---|---|---|---|
${row(`group chatter webhook (the recorded conversation's ${st.chatter.replayed_messages} people's messages, replayed; the first 20 left out as warm-up)`, st.chatter)}
${row("DM webhook + chat-object hand-off (the webhook waits for the object's `arrival`)", st.dm_webhook)}
${row("of which the webhook", st.dm_webhook_edge)}
${row("of which the chat object's `arrival`", st.dm_object_inbox)}
${row("group webhook asking for a reply + hand-off", st.group_ask_webhook)}
${row("turn, short history (a private chat's second message; the alarm runs the turn and sends the reply)", st.turn_short)}
${row(`turn, ${st.turn_500.history_messages}-message group history, \`HISTORY_FORMAT=structured\``, st.turn_500)}
${row(`turn, ${co.turn_500.history_messages}-message group history, \`HISTORY_FORMAT=compact\``, co.turn_500)}
${st.turn_500_edit ? row(`the same, structured, after an edit of an early message (the edited row read with the new ones)`, st.turn_500_edit) + "\n" : ""}${co.turn_500_edit ? row(`the same, compact, after an edit`, co.turn_500_edit) + "\n" : ""}${row(`the same, structured, the whole window read again (the history version moved)`, st.turn_500_full)}
${row(`the same, compact, the whole window read again`, co.turn_500_full)}
${runs.embeddings ? row("turn, short history, with `EMBEDDINGS_MODEL` and 300 stored memories with embeddings (the query embedded, every vector compared; the chat's first turn, not measured, read the vectors, which the isolate keeps)", runs.embeddings.turn_embeddings) + "\n" : ""}${row("queue job: a turn retried through the queue (the consumer, the chat object's `job` request that runs the turn, and the alarm after it), all together", st.queue_turn_job)}
${row("of which the consumer", st.queue_job_consumer)}
${row("of which the chat object's `job` request: the retried turn", st.queue_job_object)}
${row("of which the alarm after it", st.queue_job_alarm)}
${row("cron tick (queues the consolidation jobs)", st.cron_tick)}
${row("consolidation jobs of one tick (queue consumer, a batch)", st.consolidation_jobs)}

${beforeAfter(runs)}A window with more than one invocation (the DM webhook and the \`arrival\` it waits for; the
queue consumer, the chat object's \`job\` request it waits for, and an alarm after) is also split among
them ("of which" rows): each invocation's metrics line carries the runtime's clock at its start
and end (\`started_ms\`, \`ended_ms\`, in ms; that clock moves only with I/O, so an invocation's
last stretch after its last I/O counts to whatever holds it), the bench maps them onto perf's
sample times, and a sample goes to the innermost invocation running then (samples outside
every span to the window's first invocation). Both columns are split by the samples' shares,
so an "of which" row is approximate to about a millisecond of wall time. A bundle from before
the lines had times shows "–".

The long-history turns replay the people's messages of tests/fixtures/conversations/group_500.json
through the webhook (the recording's other ${st.turn_500.recorded_bot_messages} messages, the bot's, are not replayed: this bot
did not make them), then ask the bot by name: 3 asks to warm up (not measured: the first
runs while V8 still compiles that path), then ${reps} measured: the chat object's copy of the
rows its last turn loaded serves, and each turn reads only the messages that are new. Then
${reps} more asks, each after an edit of the first message, which the turn reads with the new
messages (migration 0019; before it, an edit made the turn read its whole window). Then ${reps}
more, each after the conversation's history version was moved (by SQL, as its triggers move it
when a message leaves the history or a retried turn's answer is placed anew), which makes the
turn read its whole window again, as the first turn of an instance does (on Cloudflare an idle
chat object is evicted after a minute or two, and its copy with it). In the before-and-after
table, "after an edit" compares the before bundle's whole-window turn (what an edit cost it)
with this commit's turn after an edit. Alarms that only re-arm later are not in these windows.

## D1 rows per message

Rows read and written as D1's result meta reports them (\`rows_read\`, \`rows_written\`; D1
counts every index entry written as a row), summed by the storage layer over every statement
of an invocation and logged once per invocation when \`METRICS_LOG\` is set (bench/cpu.mjs
reads those lines). Medians over the same runs as above. The bytes are the rows' JSON as the
worker reads it (\`rows_bytes\`): what crosses from D1 into the wasm.

| per | rows read | rows written | D1 round trips | bytes of rows into the worker |
|---|---|---|---|---|
${rows("group chatter update", st.chatter)}
${rows("reply-asking private update: webhook", st.dm_webhook_edge)}
${rows("reply-asking private update: the chat object's `arrival`", st.dm_object_inbox)}
${rows("turn, short history (alarm, with delivery)", st.turn_short)}
${rows("group update asking for a reply (webhook + `arrival`)", st.group_ask_webhook)}
${rows(`turn, ${st.turn_500.history_messages}-message history, structured`, st.turn_500)}
${rows(`turn, ${co.turn_500.history_messages}-message history, compact`, co.turn_500)}
${st.turn_500_edit ? rows(`the same, structured, after an edit`, st.turn_500_edit) + "\n" : ""}${rows(`the same, structured, the whole window read`, st.turn_500_full)}
${runs.embeddings ? rows("turn, short history, with `EMBEDDINGS_MODEL` over 300 memories with embeddings (the chat's; other chats' grow by 300 per repetition)", runs.embeddings.turn_embeddings) + "\n" : ""}${rows("turn retried through the queue", st.queue_turn_job)}
${rows("cron tick", st.cron_tick)}
${runs.rows ? refusedAndSearch(runs.rows, rows) : ""}
What the Free plan's daily limits (${int(FREE.rows_read)} rows read, ${int(FREE.rows_written)} rows written,
${int(FREE.requests)} Worker requests) allow, from these figures (each update is one Worker request;
the chat object's requests and alarms are Durable Object requests, not counted here; "Free-plan limits
per message" below counts every limit):

| a day of | messages a day | bound by |
|---|---|---|
| group chatter only (${fmt(c.chatter.read, 0)} read, ${fmt(c.chatter.written, 0)} written each) | ${int(day.chatter.n)} | ${day.chatter.by} |
| private messages, each answered (short history; ${fmt(c.dm.read, 0)} read, ${fmt(c.dm.written, 0)} written each) | ${int(day.dm.n)} | ${day.dm.by} |
| group messages each answered over a ${st.turn_500.history_messages}-message history (${fmt(c.group500.read, 0)} read, ${fmt(c.group500.written, 0)} written each) | ${int(day.group500.n)} | ${day.group500.by} |
| a lively group: 9 in 10 messages chatter, 1 in 10 answered over the long history | ${int(mix.n)} | ${mix.by} |
`;
}
