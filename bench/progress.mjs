// Progress for the long benchmarks (issue 40): which scenario runs, how many repetitions are
// left, an estimate of the time left, and each table as soon as it is measured; all on stderr,
// so a script's stdout stays its JSON. On a terminal the progress line is rewritten in place;
// otherwise (a log file, CI) a line is printed at most every 10 s and at each scenario's end.
//
//   const p = progress("cpu");
//   const step = p.scenario("structured: turns over the long history", 15);
//   for (...) { ...; step.tick(); }
//   step.done();
//   p.table("D1 rows per message", markdownText);
import { performance } from "node:perf_hooks";

// The runtime's info lines (a `[wrangler:info] QUEUE edge-agent-jobs 1/1 (124ms)` per queue
// batch, on stdout) would drown the progress and once landed in a script's JSON; warnings and
// errors still show. Wrangler reads this when it logs, so setting it here is early enough.
process.env.WRANGLER_LOG ??= "warn";

/** `npm run bench -- --quick` or BENCH_QUICK=1: the headline figures in a few minutes. */
export const QUICK = process.argv.includes("--quick") || process.env.BENCH_QUICK === "1";

const tty = Boolean(process.stderr.isTTY);
const clock = (ms) => {
  if (!Number.isFinite(ms)) return "?";
  const s = Math.max(0, Math.round(ms / 1000));
  return s >= 3600 ? `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m` : `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
};

let live = false; // a progress line is on the terminal, to be overwritten
function line(text, final) {
  if (tty) {
    const cols = process.stderr.columns || 120;
    process.stderr.write(`\r\x1b[2K${text.length > cols - 1 ? text.slice(0, cols - 2) + "…" : text}${final ? "\n" : ""}`);
    live = !final;
  } else {
    process.stderr.write(`${text}\n`);
  }
}
/** Writes whole lines to stderr without tearing a live progress line. */
export function say(text) {
  if (live) process.stderr.write("\r\x1b[2K");
  live = false;
  process.stderr.write(text.endsWith("\n") ? text : `${text}\n`);
}

/** The progress of one script (`name` prefixes its lines). `plan`: how many scenarios it
 *  will run, when known. */
export function progress(name, { plan } = {}) {
  const t0 = performance.now();
  const head = () => `[${name} ${clock(performance.now() - t0)}]`;
  let started = 0; // scenarios started
  /** Where the script is: "scenario 3 of 14" when the plan is known. */
  const where = () => (plan ? ` (scenario ${started} of ${plan})` : "");
  return {
    /** A scenario of `total` repetitions (0: unknown; the line shows only the count). */
    scenario(label, total = 0) {
      const s0 = performance.now();
      let n = 0;
      let shown = 0;
      const show = (final = false) => {
        const now = performance.now();
        if (!final && !tty && now - shown < 10_000) return;
        shown = now;
        const per = n > 0 ? (now - s0) / n : NaN;
        const left = total > 0 ? Math.max(0, total - n) : NaN;
        const eta = total > 0 ? per * left : NaN;
        const counts = total > 0 ? `${n}/${total}, ${left} left` : `${n} done`;
        const est = final ? ` in ${clock(now - s0)}` : Number.isFinite(eta) ? `, ~${clock(eta)} left` : "";
        line(`${head()} ${label}${at}: ${final ? "done" : counts}${est}`, final);
      };
      started++;
      const at = where();
      if (!tty) line(`${head()} ${label}${at}: started${total ? ` (${total})` : ""}`, true);
      else show();
      // A line at least every 25 s even while one repetition runs long (never silent for 30 s).
      const beat = setInterval(() => {
        if (performance.now() - shown < 25_000) return;
        shown = 0;
        show();
      }, 5_000).unref();
      return {
        /** One repetition done (`k` of them). */
        tick(k = 1) {
          n += k;
          show();
        },
        /** Sets how many are done (for loops that retry). */
        set(k) {
          n = k;
          show();
        },
        /** More repetitions than first planned (a repetition done again). */
        more(k = 1) {
          total += k;
        },
        done() {
          clearInterval(beat);
          show(true);
        },
      };
    },
    /** Prints a markdown table (or any block) as soon as it is measured. */
    table(title, markdown) {
      say(`\n### ${title}\n\n${markdown.trim()}\n`);
    },
    /** A plain note on stderr. */
    note(text) {
      say(`${head()} ${text}`);
    },
  };
}

/** A two-column markdown table from [measure, result] pairs. */
export function pairs(rows, head = ["measure", "result"]) {
  return [`| ${head.join(" | ")} |`, `|${head.map(() => "---").join("|")}|`, ...rows.map((r) => `| ${r.join(" | ")} |`)].join("\n");
}

/** Runs `fn` with the harness's runtime logs drained as they come (call the returned `pull()`
 *  in polling loops): wrangler's test harness keeps every log line of the worker and
 *  `getLogs()` copies them all on every call, which in a long run costs more CPU in this
 *  process than the worker itself. `keep(line)` picks the lines worth keeping (by default the
 *  `metrics {...}` lines, parsed); `count` is how many lines came, kept or not. */
export function logDrain(stack, keep = (m) => (m.startsWith("metrics ") ? JSON.parse(m.slice(8)) : undefined)) {
  const kept = [];
  const drain = {
    count: 0,
    kept,
    /** Moves the lines logged since the last call out of the harness; returns the kept. */
    pull() {
      const fresh = stack.server.getLogs();
      if (fresh.length === 0) return [];
      stack.server.clearLogs();
      drain.count += fresh.length;
      const out = [];
      for (const l of fresh) {
        const v = keep(String(l.message ?? l));
        if (v !== undefined) out.push(v);
      }
      kept.push(...out);
      return out;
    },
    /** The kept lines since index `from`. */
    since(from) {
      drain.pull();
      return kept.slice(from);
    },
  };
  return drain;
}
