// What the benchmarks read of the workerd processes they start, from /proc: which ones are
// this process's children, the CPU time of each, its memory; and the median they report.
import fs from "node:fs";

/** The median of `xs` (the mean of the middle two for an even count). */
export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** The workerd processes started by this process. */
export function workerdPids() {
  const found = [];
  for (const d of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (comm.startsWith("workerd") && ppid === process.pid) found.push(Number(d));
    } catch {
      // the process ended meanwhile
    }
  }
  return found;
}

/** The workerd process that runs the worker: the harness starts two as children of this
 *  process (one of them only proxies); the one that compiled the wasm has used far more CPU.
 *  `found`: the processes of this stack (not those of another run's stack). */
export function workerdPid(found = workerdPids()) {
  if (found.length === 0) throw new Error(`no workerd child of ${process.pid}`);
  return found.sort((a, b) => cpu(b).ns - cpu(a).ns)[0];
}

/** CPU nanoseconds of all of a process's threads (live ones: schedstat's first field), and the
 *  process's own utime + stime in ms (clock ticks, which include ended threads) as a check. */
export function cpu(pid) {
  let ns = 0;
  for (const t of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(fs.readFileSync(`/proc/${pid}/task/${t}/schedstat`, "utf8").split(" ")[0]);
    } catch {
      // the thread ended meanwhile
    }
  }
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { ns, tick_ms: (Number(f[11]) + Number(f[12])) * 10 };
}

/** VmRSS and VmHWM of a process, in MB. */
export function memory(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? 0);
  return { rss_mb: kb("VmRSS") / 1024, hwm_mb: kb("VmHWM") / 1024 };
}
