#!/usr/bin/env node
// Fails when a crate's modules import each other in a cycle. Reads every `crate::<module>`
// reference (in `use` lines and paths) of each top-level module of a crate (`src/x.rs` or
// `src/x/**`) and looks for cycles between top-level modules.
//
//   node scripts/check-modules.mjs            # the core and the edge
//
// The core must have none. The edge still has the cycles listed in KNOWN_EDGE_CYCLES (issue 13
// removes them): any other cycle fails, and a listed cycle that is gone must be removed from
// the list, so the list only shrinks.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** Cycles the edge had when this check was written, each as its sorted module names. */
const KNOWN_EDGE_CYCLES = new Set([
  "chat,queue", // the object enqueues jobs; the consumer calls objects through chat::call_object
  "consolidate,memory", // memory uses consolidate::embed; consolidate uses memory's columns
  "db,env,net,telegram", // the context builds clients; the clients take the meter from env
]);

function files(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? files(p) : p.endsWith(".rs") ? [p] : [];
  });
}

/** Module graph: top-level module → set of top-level modules it refers to. */
export function graph(srcDir) {
  const g = new Map();
  for (const file of files(srcDir)) {
    const rel = path.relative(srcDir, file).replace(/\\/g, "/");
    if (rel === "lib.rs" || rel === "main.rs") continue;
    const mod = rel.split("/")[0].replace(/\.rs$/, "");
    // Drop comments and tests: a test module may use anything.
    let text = fs.readFileSync(file, "utf8");
    const testAt = text.search(/#\[cfg\(test\)\]\s*mod\s+tests/);
    if (testAt >= 0) text = text.slice(0, testAt);
    text = text.replace(/\/\/.*$/gm, "");
    const deps = g.get(mod) ?? new Set();
    for (const m of text.matchAll(/\bcrate::([a-z_][a-z0-9_]*)/g)) deps.add(m[1]);
    // Grouped imports: use crate::{a, b::c, ...}
    for (const m of text.matchAll(/\buse\s+crate::\{([^}]*)\}/g)) {
      for (const part of m[1].split(",")) {
        const name = part.trim().split("::")[0].trim();
        if (/^[a-z_][a-z0-9_]*$/.test(name)) deps.add(name);
      }
    }
    deps.delete(mod);
    g.set(mod, deps);
  }
  for (const deps of g.values()) for (const d of [...deps]) if (!g.has(d)) deps.delete(d);
  return g;
}

/** Strongly connected components with more than one module (Tarjan). */
export function cycles(g) {
  let index = 0;
  const idx = new Map(), low = new Map(), onStack = new Set(), stack = [], out = [];
  const visit = (v) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of g.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v), idx.get(w)));
      }
    }
    if (low.get(v) === idx.get(v)) {
      const comp = [];
      let w;
      do {
        w = stack.pop();
        onStack.delete(w);
        comp.push(w);
      } while (w !== v);
      if (comp.length > 1) out.push(comp.sort());
    }
  };
  for (const v of [...g.keys()].sort()) if (!idx.has(v)) visit(v);
  return out;
}

function main() {
  let failed = false;
  const core = cycles(graph(path.join(ROOT, "crates/core/src")));
  for (const c of core) {
    console.error(`check-modules: the core has an import cycle: ${c.join(" ↔ ")}`);
    failed = true;
  }
  const edge = cycles(graph(path.join(ROOT, "src")));
  const seen = new Set();
  for (const c of edge) {
    const key = c.join(",");
    seen.add(key);
    if (!KNOWN_EDGE_CYCLES.has(key)) {
      console.error(`check-modules: a new import cycle in the edge: ${c.join(" ↔ ")}`);
      failed = true;
    }
  }
  for (const key of KNOWN_EDGE_CYCLES) {
    if (!seen.has(key)) {
      console.error(`check-modules: the edge cycle ${key} is gone: remove it from KNOWN_EDGE_CYCLES`);
      failed = true;
    }
  }
  if (failed) process.exit(1);
  console.error(`check-modules: no new import cycles (core: none; edge: ${edge.length} known)`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main();
