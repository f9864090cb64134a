// The chat object's own work per answered private message (issue 48): how often it asks its
// state machine (`state_asks`: each read or change of `ChatState`, and each reading of its
// timing) and how many of its own storage rows it writes (`do_rows_written`: each key put and
// each alarm set or deleted), per invocation kind, from the worker's `metrics` lines
// (METRICS_LOG). `node bench/object.mjs [bundle]` measures the bundle given (default
// .tmp/bundle); CPU_BEFORE=<bundle> also measures that one, in the same run, for a before and
// after table. A bundle built before `state_asks` was counted shows none.
import { startStack, privateText, sleep } from "../tests/support/stack.js";
import { logDrain, progress } from "./progress.mjs";
import { median } from "./proc.mjs";

const REPS = Number(process.env.OBJECT_REPS ?? 7);

/** One private chat per repetition: a first message (warms the chat object up), then the
 *  measured one; the metrics lines of the measured message's invocations, by kind. */
const P = progress("object", { plan: process.env.CPU_BEFORE ? 2 : 1 });

async function measure(bundle, label) {
  const step = P.scenario(`private messages, ${label}`, REPS);
  const s = await startStack({ bundle, vars: { METRICS_LOG: "true", DEBOUNCE_MS: "400", DEBOUNCE_MAX_MS: "2000", USER_TURNS_PER_HOUR: "0" } });
  const logs = logDrain(s);
  const byKind = {};
  try {
    for (let i = 0; i < REPS; i++) {
      const uid = 88_600_000 + i * 7;
      await s.webhook(privateText(uid, "hello there"));
      await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 60_000, "the first reply");
      await sleep(1500);
      logs.pull();
      await s.webhook(privateText(uid, `and how are you? (${i})`));
      await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 60_000, "the reply");
      await sleep(1500); // the alarm's last arm and the metrics lines
      const lines = logs.pull().filter((l) => l.kind.startsWith("object") || l.kind === "alarm");
      const sums = {};
      for (const l of lines) {
        const k = l.kind.split(" ")[0] === "object" ? l.kind : "alarm";
        sums[k] ??= { invocations: 0, state_asks: 0, do_rows_written: 0 };
        sums[k].invocations += 1;
        sums[k].state_asks += l.state_asks ?? NaN;
        sums[k].do_rows_written += l.do_rows_written;
      }
      sums.all = Object.values(sums).reduce((a, b) => ({ invocations: a.invocations + b.invocations, state_asks: a.state_asks + b.state_asks, do_rows_written: a.do_rows_written + b.do_rows_written }), { invocations: 0, state_asks: 0, do_rows_written: 0 });
      for (const [k, v] of Object.entries(sums)) (byKind[k] ??= []).push(v);
      step.tick();
    }
    step.done();
  } finally {
    await s.close();
  }
  const out = {};
  for (const [k, vs] of Object.entries(byKind)) {
    out[k] = Object.fromEntries(["invocations", "state_asks", "do_rows_written"].map((f) => [f, median(vs.map((v) => v[f]))]));
  }
  return out;
}

const result = { reps: REPS, after: await measure(process.argv[2], "this commit") };
if (process.env.CPU_BEFORE) {
  result.before = await measure(process.env.CPU_BEFORE, "before");
  result.before_name = process.env.CPU_BEFORE_NAME ?? process.env.CPU_BEFORE;
}
console.log(JSON.stringify(result, null, 1));
