// CPU and memory of a turn that makes and uploads a picture of about 2 MB (issue 39), under
// local workerd, with the fake Gemini answering the image request with a real PNG of random
// pixels (which does not compress) and the fake Telegram taking the sendPhoto upload.
//
// CPU: the workerd process's CPU time (all its threads' schedstat), from the webhook's update
// to the photo at Telegram, minus the process's idle CPU over the same wall time; the median of
// IMAGE_REPS repetitions (default 3), and the same for a turn that answers with text only, for
// comparison. All of workerd is counted (the Worker, the runtime, miniflare's local D1), an
// upper bound of what the Free plan's 10 ms CPU limit counts. Memory: workerd's resident set
// (VmRSS) before and after, and its high-water mark (VmHWM), which only grows: its growth over
// the run is the most the picture turns added at once.
//
// Prints one JSON object; the lead's `npm run bench` wires it into BENCHMARKS.md. Needs a
// bundle in .tmp/bundle (`bash scripts/bundle.sh`).
import { startStack, privateText, sleep } from "../tests/support/stack.js";
import { median, workerdPid, cpu, memory } from "./proc.mjs";

const REPS = Math.max(1, Number(process.env.IMAGE_REPS ?? 3));
const BYTES = Number(process.env.IMAGE_BYTES ?? 2_000_000);
/** CPU ms of workerd while `work` runs, less its idle rate measured just before. */
async function measure(pid, work) {
  const idle0 = cpu(pid).ns;
  const t0 = performance.now();
  await sleep(500);
  const idleRate = (cpu(pid).ns - idle0) / (performance.now() - t0);
  const c0 = cpu(pid).ns;
  const w0 = performance.now();
  await work();
  const wall = performance.now() - w0;
  return { cpu_ms: (cpu(pid).ns - c0 - idleRate * wall) / 1e6, wall_ms: wall };
}

const s = await startStack({ vars: { IMAGE_MODEL: "on", IMAGE_DAILY_LIMIT: "0", IMAGE_CHAT_DAILY_LIMIT: "0", METRICS_LOG: "true" } });
try {
  const pid = workerdPid();
  // Warm up: the first turn of an isolate compiles the wasm.
  await s.webhook(privateText(900_000_001, "hello"));
  await s.tg.waitFor(() => s.tg.sent(900_000_001).length === 1, 30_000, "the warm-up answer");
  const mem0 = memory(pid);
  const picture = [];
  const text = [];
  let uploaded = 0;
  for (let i = 0; i < REPS; i++) {
    const uid = 900_000_100 + i;
    s.gemini.script(uid, [{ calls: [{ name: "generate_image", args: { prompt: `a picture ${i}` } }] }]);
    s.gemini.scriptImage([{ pngBytes: BYTES, caption: "" }]);
    picture.push(await measure(pid, async () => {
      await s.webhook(privateText(uid, `draw picture ${i}`));
      await s.tg.waitFor(() => s.tg.calls("sendPhoto", uid).some((r) => r.photo), 60_000, "the photo");
      await sleep(300);
    }));
    uploaded = s.tg.calls("sendPhoto", uid).find((r) => r.photo).photo.bytes.length;
    const other = 900_000_200 + i;
    s.gemini.script(other, [{ text: "a short answer" }]);
    text.push(await measure(pid, async () => {
      await s.webhook(privateText(other, `say something ${i}`));
      await s.tg.waitFor(() => s.tg.sent(other).length === 1, 30_000, "the answer");
      await sleep(300);
    }));
  }
  const mem1 = memory(pid);
  const metrics = s.metricsSince(0).filter((m) => /alarm|turn|job/.test(m.kind ?? ""));
  console.log(JSON.stringify({
    what: "a private turn that makes a picture and uploads it with sendPhoto, vs a text-only turn (all of workerd's CPU; upper bound)",
    picture_bytes: uploaded,
    reps: REPS,
    picture_turn_cpu_ms_median: Number(median(picture.map((r) => r.cpu_ms)).toFixed(1)),
    picture_turn_wall_ms_median: Math.round(median(picture.map((r) => r.wall_ms))),
    text_turn_cpu_ms_median: Number(median(text.map((r) => r.cpu_ms)).toFixed(1)),
    workerd_rss_mb: { before: Number(mem0.rss_mb.toFixed(1)), after: Number(mem1.rss_mb.toFixed(1)) },
    workerd_peak_rss_growth_mb: Number((mem1.hwm_mb - mem0.hwm_mb).toFixed(1)),
    invocations_logged: metrics.length,
  }, null, 2));
} finally {
  await s.close();
}
