// The "Free-plan limits per message" section of BENCHMARKS.md and its short copy in README.md,
// from .tmp/bench/limits.json (written by bench/limits.mjs).
import fs from "node:fs";
import path from "node:path";

const DO_PRICING = "https://developers.cloudflare.com/durable-objects/platform/pricing/";
/** The Workers Free plan's daily limits (read 2026-11-26 on the pages linked). */
export const FREE = [
  { key: "worker_requests", name: "Worker requests", limit: 100_000, src: "https://developers.cloudflare.com/workers/platform/limits/#daily-request" },
  { key: "do_requests", name: "Durable Object requests (alarms included)", limit: 100_000, src: DO_PRICING },
  { key: "do_gb_s", name: "Durable Object duration, GB-s", limit: 13_000, src: DO_PRICING, digits: 2 },
  { key: "do_rows_read", name: "Durable Object SQLite rows read", limit: 5_000_000, src: DO_PRICING },
  { key: "do_rows_written", name: "Durable Object SQLite rows written", limit: 100_000, src: DO_PRICING },
  { key: "queue_ops", name: "Queues operations", limit: 10_000, src: "https://developers.cloudflare.com/queues/platform/pricing/" },
  { key: "d1_rows_read", name: "D1 rows read", limit: 5_000_000, src: "https://developers.cloudflare.com/d1/platform/pricing/" },
  { key: "d1_rows_written", name: "D1 rows written", limit: 100_000, src: "https://developers.cloudflare.com/d1/platform/pricing/" },
];
const SUBREQUESTS = { limit: 50, src: "https://developers.cloudflare.com/workers/platform/limits/#subrequests" };
const TICKS_A_DAY = 48; // the cron, every 30 minutes (wrangler.toml)

const fmt = (n, d = 1) => n.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d });
const int = (n) => Math.floor(n).toLocaleString("en-US");
const NAMES = { dm: "DM-only bot", group: "lively group", crew: "crew" };

/** What the cron's 48 ticks a day cost whatever happens (per tick: the workloads' mean). */
function fixedDaily(ws) {
  const t = ws.map((w) => w.ticks).filter((x) => x?.n > 0);
  const per = (k) => (t.length ? t.reduce((a, x) => a + x[k], 0) / t.reduce((a, x) => a + x.n, 0) : 0);
  // A tick is counted as a Worker request (to be safe: Cloudflare's pages do not say whether
  // Cron Triggers count against the daily requests).
  return { worker_requests: TICKS_A_DAY, d1_rows_read: TICKS_A_DAY * per("d1_rows_read"), d1_rows_written: TICKS_A_DAY * per("d1_rows_written") };
}

/** Per answered message, and the answered messages a day each limit allows; which binds. */
export function perDay(w, fixed) {
  const per = Object.fromEntries(FREE.map((l) => [l.key, w[l.key] == null ? null : w[l.key] / w.answered]));
  const allows = FREE.filter((l) => per[l.key] > 0).map((l) => ({ ...l, per: per[l.key], n: (l.limit - (fixed[l.key] ?? 0)) / per[l.key] })).sort((a, b) => a.n - b.n);
  return { per, allows, binds: allows[0] ?? null, next: allows[1] ?? null };
}

export function limitsTables(r) {
  const keys = ["dm", "group", "crew"].filter((k) => r.workloads[k]);
  const days = daysOf(r.workloads, keys);
  const was = r.before ? daysOf(r.before.workloads, keys) : null;
  const ws = keys.map((k) => r.workloads[k]);
  const cell = (v, d = 1) => (v == null ? "–" : fmt(v, d));
  // With a before run: "after (before)" in each cell.
  const pair = (i, f) => (was ? `${f(days[i])} (${f(was[i])})` : f(days[i]));
  const head = keys.map((k) => NAMES[k]);
  const perRows = FREE.map((l) => `| [${l.name}](${l.src}) | ${keys.map((_, i) => pair(i, (d) => cell(d.per[l.key], l.digits ?? 1))).join(" | ")} | ${int(l.limit)} |`);
  const subOf = (w) => `${w.subrequests_max} (\`${w.subrequests_max_kind}\`)`;
  const sub = `| [subrequests, most in one invocation](${SUBREQUESTS.src}) | ${keys.map((k, i) => (was ? `${subOf(ws[i])} (${subOf(r.before.workloads[k])})` : subOf(ws[i]))).join(" | ")} | ${SUBREQUESTS.limit} per invocation |`;
  const dayRows = keys.map((k, i) => {
    const d = days[i];
    const w = ws[i];
    const msgs = k === "group" ? ` (${int((d.binds.n * w.messages) / w.answered)} messages in all)` : "";
    const before = was ? ` | ${was[i].binds ? `${int(was[i].binds.n)}, ${was[i].binds.name}` : "–"}` : "";
    return `| ${NAMES[k]} | ${d.binds ? int(d.binds.n) + msgs : "–"} | ${d.binds?.name ?? "–"} | ${d.next ? `${d.next.name} (${int(d.next.n)})` : "–"}${before} |`;
  });
  const beforeHead = was ? ` | before (${r.before.name}): a day, binds first` : "";
  return `| per answered message${was ? " (before in brackets)" : ""} | ${head.join(" | ")} | Free plan, a day |
|---|${keys.map(() => "---").join("|")}|---|
${perRows.join("\n")}
${sub}

| workload | answered messages a day | binds first | next${beforeHead} |
|---|---|---|---|${was ? "---|" : ""}
${dayRows.join("\n")}`;
}

/** Each workload's figures per answered message and a day (the ticks' fixed cost taken off). */
function daysOf(workloads, keys) {
  const ws = keys.map((k) => workloads[k]);
  const fixed = fixedDaily(ws);
  return ws.map((w) => perDay(w, fixed));
}

export function limitsSection(root) {
  const file = path.join(root, ".tmp/bench/limits.json");
  if (!fs.existsSync(file)) return "";
  const r = JSON.parse(fs.readFileSync(file, "utf8"));
  const { dm, group, crew } = r.workloads;
  const fixed = fixedDaily(Object.values(r.workloads));
  return `
## Free-plan limits per message

\`node bench/limits.mjs\` (run by \`npm run bench\`${r.quick ? "; this run in quick mode, with fewer messages" : ""}): three workloads under local workerd, the fake
Gemini answering like a quick model (its first token after ${fmt(r.model_ms / 1000, 1)} s, the answer streamed over
${fmt(r.stream_ms / 1000, 1)} s more), the production debounce (adaptive, \`DEBOUNCE_MAX_MS\` 8000):
${dm ? `- **DM-only bot**: ${dm.users} people in private chats, a sitting of ${dm.per_sitting} messages each, every message answered.\n` : ""}${group ? `- **lively group**: the first ${group.messages} of the ${group.recorded.messages} people's messages of the recorded group conversation (tests/fixtures/conversations/group_500.json), in order; the ${group.answered} the recorded bot answered (${group.recorded.answered} of ${group.recorded.messages} in the whole recording, about 1 in ${fmt(group.recorded.messages / group.recorded.answered, 1)}) mention the bot, the rest is chatter. Per answered message, the chatter around it included.\n` : ""}${crew ? `- **crew**: crew mode (\`CREW=critic,builder,moderator\`) in private chats, ${crew.users} people × ${crew.per_sitting} messages, each answered by the critic and the builder while the moderator passes (three model calls, two messages sent).\n` : ""}
The cron runs as on Cloudflare every 30 minutes: here once after every sitting, and in the
group every ${group?.tick_every ?? 20} messages, so the consolidation job it queues for each conversation with new
messages (a model call, its rows and 3 Queues operations) counts with the messages that caused
it. Fewer messages per conversation and half hour cost more Queues operations per message: at
worst (every message in a half hour of its own) 3 per message, which caps a bot at
${int(10_000 / 3)} such messages a day. The ticks themselves are a fixed daily cost taken off
the limits before dividing: ${TICKS_A_DAY} a day, counted as Worker requests (Cloudflare's pages do not say
whether Cron Triggers count), ${fmt(fixed.d1_rows_read / TICKS_A_DAY, 0)} D1 rows read and ${fmt(fixed.d1_rows_written / TICKS_A_DAY, 0)} written each.

How each is counted, from the worker's \`metrics\` lines (\`METRICS_LOG\`, one per invocation):
Worker requests are the webhook and queue-consumer invocations (a queue batch counted as a
request); Durable Object requests the chat object's requests and alarms; its duration the wall
time while any of them ran (their spans' union), at the 128 MB Cloudflare bills, so the model's
answer time counts in full: each further second a model call takes adds 0.125 GB-s (and while a
turn runs its object re-checks every 3 s, an alarm each); Queues operations are each message
written plus, per delivery, a read and a delete; D1 and the chat object's SQLite rows as their
result meta and cursors report them ("–": this bundle does not log them; Cloudflare also bills
each \`setAlarm()\` as a row written). Limits from
Cloudflare's pages (linked; read 2026-11-26). CPU (10 ms per invocation) is in "CPU per
invocation" above.

${limitsTables(r)}
`;
}

/** The README's short copy: between its limits markers, the daily table alone. */
export function readmeLimits(root) {
  const file = path.join(root, ".tmp/bench/limits.json");
  if (!fs.existsSync(file)) return null;
  const r = JSON.parse(fs.readFileSync(file, "utf8"));
  if (r.quick) return null;
  const t = limitsTables({ ...r, before: undefined });
  return t.slice(t.indexOf("| workload |"));
}
