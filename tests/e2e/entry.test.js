// The Worker's entry (src/entry): the global queueMicrotask it installs before the worker's
// module keeps the scheduling the Rust futures rely on, and the deployed bundle has it.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { ROOT } from "../support/stack.js";

const platform = globalThis.queueMicrotask;
await import("../../src/entry/microtasks.mjs");

test("the installed queueMicrotask replaces the platform's", () => {
  assert.notEqual(globalThis.queueMicrotask, platform);
});

test("callbacks run in order, after the current code and before any timer", async () => {
  const seen = [];
  setTimeout(() => seen.push("timer"), 0);
  globalThis.queueMicrotask(() => seen.push(1));
  globalThis.queueMicrotask(() => {
    seen.push(2);
    // Queued from a callback: still before the timer, after those queued before it.
    globalThis.queueMicrotask(() => seen.push(4));
  });
  globalThis.queueMicrotask(() => seen.push(3));
  seen.push("sync");
  await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(seen, ["sync", 1, 2, 3, 4, "timer"]);
});

test("a callback that is not a function is refused at once", () => {
  assert.throws(() => globalThis.queueMicrotask("not a function"), TypeError);
});

test("wrangler's entry is src/entry/index.mjs, and the bundle installs the queue before the worker's module runs", () => {
  const toml = fs.readFileSync(path.join(ROOT, "wrangler.toml"), "utf8");
  assert.match(toml, /^main = "src\/entry\/index\.mjs"$/m);
  const bundle = fs.readFileSync(path.join(ROOT, ".tmp/bundle/index.js"), "utf8");
  const installed = bundle.indexOf("globalThis.queueMicrotask =");
  const worker = bundle.indexOf("WebAssembly.Instance");
  assert.ok(installed >= 0, "the bundle installs queueMicrotask");
  assert.ok(worker > installed, "before the worker's module");
});
