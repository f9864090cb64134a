// Small helpers shared by the dev tools and the test fakes.
import fs from "node:fs";

/** Reads KEY=VALUE lines (a .dev.vars file); missing file → {}. */
export function readVars(file) {
  const vars = {};
  if (!fs.existsSync(file)) return vars;
  for (const line of fs.readFileSync(file, "utf8").split("\n")) {
    const m = /^\s*([A-Z_][A-Z0-9_]*)\s*=\s*(.*?)\s*$/.exec(line);
    if (m) vars[m[1]] = m[2].replace(/^"(.*)"$/, "$1");
  }
  return vars;
}

/** Conditions to wait for, re-checked whenever `notify()` is called (on every request). */
export function waiters() {
  const pending = [];
  return {
    notify() {
      for (const w of [...pending]) if (w.check()) pending.splice(pending.indexOf(w), 1);
    },
    /** Resolves when `check()` is true, or rejects after `timeoutMs`. */
    waitFor(check, timeoutMs = 10_000, what = "condition") {
      if (check()) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const w = { check: () => (check() ? (clearTimeout(timer), resolve(), true) : false) };
        const timer = setTimeout(() => {
          pending.splice(pending.indexOf(w), 1);
          reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
        }, timeoutMs);
        pending.push(w);
      });
    },
  };
}
