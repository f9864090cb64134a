// The deployed wasm's size (issue 40): Workers limit and load a worker by its gzip size, and
// every cold chat object pays its instantiation. The budget is 900 KiB gzip (level 9, as the
// bench measures it); the time-zone tables stay out of it (the runtime's Intl answers instead).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import { execFileSync } from "node:child_process";
import { ROOT, log } from "../support/stack.js";

/** The wasm gzip budget, bytes. */
const BUDGET = 900 * 1024;

test("the bundled wasm is at most 900 KiB gzip", () => {
  const dir = path.resolve(ROOT, process.env.TEST_BUNDLE ?? ".tmp/bundle"); // the bundle the e2e tests run (stack.js)
  const file = fs.readdirSync(dir).find((f) => f.endsWith(".wasm"));
  assert.ok(file, "the bundle has its wasm");
  const wasm = fs.readFileSync(path.join(dir, file));
  const gzip = zlib.gzipSync(wasm, { level: 9 }).length;
  log(`wasm ${wasm.length} B raw, ${gzip} B gzip (${(gzip / 1024).toFixed(1)} KiB; budget ${BUDGET / 1024} KiB)`);
  assert.ok(gzip <= BUDGET, `${gzip} B gzip is over the ${BUDGET} B budget`);
});

test("the worker's dependencies hold no time-zone tables (chrono-tz is the native tests' only)", () => {
  const tree = execFileSync("cargo", ["tree", "-p", "edge-agent", "--target", "wasm32-unknown-unknown", "-e", "normal", "--prefix", "none"], { cwd: ROOT, encoding: "utf8" });
  assert.match(tree, /^agent-core /m, "the tree lists the worker's dependencies");
  assert.doesNotMatch(tree, /^chrono-tz /m);
});
