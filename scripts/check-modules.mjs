#!/usr/bin/env node
// The shape of the code, checked (run by `npm test` through tests/e2e/modules.test.js):
//
// 1. No import cycle between the core's modules, between the edge's rooms (`src/<room>/`), or
//    between the files of one folder at any depth (siblings under a module, through `crate::`,
//    `self::` and any depth of `super::`, in `use` lines, grouped imports and paths), comments
//    and test modules left out.
// 2. The edge's rooms import one way only, down the layers in EDGE_LAYERS: a room may use a
//    room of a lower layer, never one of its own layer or above.
//    The chat object's room (`src/chat/`, SEALED_ROOMS) is imported by no other room at all: the
//    worker reaches the object through the request in `outbound::objects`, never its code.
// 3. No SQL in the edge outside `src/storage/` (string literals that read as SQL statements).
// 4. No function in the edge or the core longer than MAX_FN_LINES lines, but the core's
//    declarative tables in CORE_LONG_ALLOWED (each named, with why).
// 5. Every file of the edge and the core starts with a module doc comment (`//!`).
// 6. No JS function under JS_DIRS (the scripts, tools, benchmarks and test support) longer than
//    MAX_FN_LINES lines (parsed with acorn), but those in JS_LONG_ALLOWED, each named with why;
//    an entry no longer over the limit is itself a finding.
//
//   node scripts/check-modules.mjs
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as acorn from "acorn";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** The edge's rooms, lowest layer first. Imports go from a higher layer to a lower one. */
export const EDGE_LAYERS = [["config"], ["storage", "outbound"], ["bot"], ["chat"], ["ingress", "api", "background"]];
/** Rooms no other room may import, whatever its layer. */
export const SEALED_ROOMS = ["chat"];
export const MAX_FN_LINES = 80;

/** The core's functions allowed over MAX_FN_LINES, by `file:function` (relative to
 * crates/core/src): declarative tables only, each with the reason. Keep it small. */
export const CORE_LONG_ALLOWED = new Map([
]);

/** The folders of JS the 80-line rule covers. */
export const JS_DIRS = ["scripts", "tools", "bench", "tests/support"];

/** JS functions allowed over MAX_FN_LINES, by `file:function`, each with the reason. They are
 * the fakes' and harnesses' factories, whose closures share one server's state (splitting them
 * means threading that state through every handler), and a few long linear benchmark runs.
 * Keep it small; an entry that is no longer long must go. */
export const JS_LONG_ALLOWED = new Map([
  ["tools/telegram-emulator.js:createTelegramEmulator", "the fake Telegram's factory: its handlers close over one emulator's chats, files and faults"],
  ["tools/telegram-emulator.js:handle", "the Bot API methods the fake answers, one case each with its documented refusals"],
  ["tools/playground.js:startPlayground", "the playground's factory: its routes close over one running stack"],
  ["tests/support/fake-cloudflare.js:startFakeCloudflare", "the fake Cloudflare API's factory: its handlers close over one account's state"],
  ["tests/support/fake-cloudflare.js:route", "the Cloudflare API routes the fake answers, one case each"],
  ["tests/support/fake-gemini.js:startFakeGemini", "the fake Gemini's factory: its handlers close over one server's scripts and calls"],
  ["tests/support/fake-gemini.js:answer", "the fake Gemini's request handler: the routes and their documented errors"],
  ["tests/support/stack.js:startStack", "the test harness's factory: its methods close over one running stack"],
  ["bench/cpu.mjs:formatRun", "one format's run: its scenarios in order, each a few lines, sharing the run's bench"],
  ["bench/report-cpu.mjs:cpuSections", "BENCHMARKS.md's CPU sections: a template of prose and tables"],
]);

/** JS functions longer than `max` lines: [name, lines, line]. A function's name is its own,
 * else the variable, property or method it is assigned to, else `<anonymous>@line`. */
export function jsLongFunctions(text, max = MAX_FN_LINES) {
  const ast = acorn.parse(text, { ecmaVersion: "latest", sourceType: "module", locations: true, allowHashBang: true, allowReturnOutsideFunction: true });
  const out = [];
  const nameOf = (node, parent) =>
    node.id?.name ||
    (parent?.type === "VariableDeclarator" && parent.id?.name) ||
    (["Property", "MethodDefinition", "PropertyDefinition"].includes(parent?.type) && (parent.key?.name ?? parent.key?.value)) ||
    (parent?.type === "AssignmentExpression" && (parent.left?.property?.name ?? parent.left?.name)) ||
    `<anonymous>@${node.loc.start.line}`;
  const visit = (node, parent) => {
    if (!node || typeof node.type !== "string") return;
    if (node.type.includes("Function")) {
      const lines = node.loc.end.line - node.loc.start.line + 1;
      if (lines > max) out.push([nameOf(node, parent), lines, node.loc.start.line]);
    }
    for (const [key, value] of Object.entries(node)) {
      if (key === "loc") continue;
      if (Array.isArray(value)) for (const child of value) visit(child, node);
      else if (value && typeof value === "object") visit(value, node);
    }
  };
  visit(ast, null);
  return out;
}

/** Every finding of the JS rule under `root` (JS_DIRS), as messages. */
export function jsFindings(root, allowed = JS_LONG_ALLOWED) {
  const out = [];
  const stillLong = new Set();
  const js = (dir) =>
    !fs.existsSync(dir)
      ? []
      : fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
          const p = path.join(dir, e.name);
          return e.isDirectory() ? (e.name === "node_modules" ? [] : js(p)) : /\.m?js$/.test(e.name) ? [p] : [];
        });
  for (const file of JS_DIRS.flatMap((d) => js(path.join(root, d)))) {
    const rel = path.relative(root, file).replace(/\\/g, "/");
    let long;
    try {
      long = jsLongFunctions(fs.readFileSync(file, "utf8"));
    } catch (e) {
      out.push(`${rel} could not be parsed: ${e.message}`);
      continue;
    }
    for (const [name, lines, line] of long) {
      if (allowed.has(`${rel}:${name}`)) stillLong.add(`${rel}:${name}`);
      else out.push(`${rel}:${line} function ${name} is ${lines} lines (at most ${MAX_FN_LINES}; a stated exception goes in JS_LONG_ALLOWED)`);
    }
  }
  for (const key of allowed.keys()) if (!stillLong.has(key)) out.push(`JS_LONG_ALLOWED lists ${key}, which is no longer over ${MAX_FN_LINES} lines: remove it`);
  return out;
}

function files(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? files(p) : p.endsWith(".rs") ? [p] : [];
  });
}

/** Source without its `#[cfg(test)] mod tests` (a test module may use anything). */
function withoutTests(text) {
  const at = text.search(/#\[cfg\(test\)\]\s*mod\s+tests/);
  return at >= 0 ? text.slice(0, at) : text;
}

/** Module names referred to after `prefix::` (directly or in a grouped import). */
function refs(text, prefix) {
  const out = new Set();
  for (const m of text.matchAll(new RegExp(`\\b${prefix}::([a-z_][a-z0-9_]*)`, "g"))) out.add(m[1]);
  for (const m of text.matchAll(new RegExp(`\\buse\\s+${prefix}::\\{([^}]*)\\}`, "g"))) {
    for (const part of m[1].split(",")) {
      const name = part.trim().split("::")[0].trim();
      if (/^[a-z_][a-z0-9_]*$/.test(name)) out.add(name);
    }
  }
  return out;
}

/** Module graph of a crate: top-level module → set of top-level modules it refers to. */
export function graph(srcDir) {
  const g = new Map();
  for (const file of files(srcDir)) {
    const rel = path.relative(srcDir, file).replace(/\\/g, "/");
    if (rel === "lib.rs" || rel === "main.rs") continue;
    const mod = rel.split("/")[0].replace(/\.rs$/, "");
    const text = withoutTests(fs.readFileSync(file, "utf8")).replace(/\/\/.*$/gm, "");
    const deps = g.get(mod) ?? new Set();
    for (const d of refs(text, "crate")) deps.add(d);
    // `super::x` in src/m/x.rs names a sibling inside m: the same top-level module.
    deps.delete(mod);
    g.set(mod, deps);
  }
  for (const deps of g.values()) for (const d of [...deps]) if (!g.has(d)) deps.delete(d);
  return g;
}

/** A file's module path in its crate (`a/b.rs` → a::b, `a/mod.rs` → a). */
function modulePath(rel) {
  const parts = rel.replace(/\.rs$/, "").split("/");
  if (parts.at(-1) === "mod") parts.pop();
  return parts;
}

/** The modules a file refers to through `crate::`, `self::` and any depth of `super::`, each
 * resolved to the longest module of the crate its path names (an item's path names its
 * module), as "a::b" keys. `here`: the file's module path; `known`: the crate's modules. */
export function resolvedRefs(text, here, known) {
  const out = new Set();
  const resolve = (head, rest) => {
    let base = head === "crate" ? [] : here.slice();
    const segs = rest.filter(Boolean);
    while (segs[0] === "super") {
      segs.shift();
      base.pop();
    }
    if (head === "super") base = base.slice(0, -1);
    let found = base.join("::");
    for (const seg of segs) {
      const next = [...base, seg].join("::");
      if (!known.has(next)) break;
      base = [...base, seg];
      found = next;
    }
    out.add(found);
  };
  const word = "[a-z_][a-z0-9_]*";
  for (const m of text.matchAll(new RegExp(`\\b(crate|self|super)((?:::(?:${word}))*)(::\\{([^}]*)\\})?`, "g"))) {
    const rest = m[2].split("::");
    if (m[4] === undefined) resolve(m[1], rest);
    else for (const part of m[4].split(",")) resolve(m[1], [...rest, ...part.trim().split("::").map((x) => x.trim()).filter((x) => new RegExp(`^${word}$`).test(x))]);
  }
  return out;
}

/** For every module of a crate with submodules (any depth), the graph between its children:
 * child → the children it refers to, through any file under it and any path form. The
 * module's own file (its `mod.rs`, the shell that declares its children) is left out. Keys of
 * the result are module paths ("" the crate root, "api::miniapp"). */
export function siblingGraphs(srcDir) {
  const entries = files(srcDir).map((file) => {
    const rel = path.relative(srcDir, file).replace(/\\/g, "/");
    return { rel, here: modulePath(rel), text: withoutTests(fs.readFileSync(file, "utf8")).replace(/\/\/.*$/gm, "") };
  }).filter((e) => e.rel !== "lib.rs" && e.rel !== "main.rs");
  const known = new Set(entries.map((e) => e.here.join("::")));
  for (const k of [...known]) k.split("::").forEach((_, i, a) => known.add(a.slice(0, i + 1).join("::")));
  const out = new Map();
  for (const e of entries) {
    const refs = [...resolvedRefs(e.text, e.here, known)];
    // Every ancestor of the file whose child holds it: edges between that child and its siblings.
    for (let depth = 0; depth < e.here.length; depth++) {
      const parent = e.here.slice(0, depth).join("::");
      const child = e.here[depth];
      const g = out.get(parent) ?? new Map();
      out.set(parent, g);
      const deps = g.get(child) ?? new Set();
      g.set(child, deps);
      for (const r of refs) {
        const rp = r === "" ? [] : r.split("::");
        if (rp.length > depth && rp.slice(0, depth).join("::") === parent && rp[depth] !== child) deps.add(rp[depth]);
      }
    }
  }
  return out;
}

/** The graph between the files of one room (`src/<room>/<file>`, any depth below), its
 * `mod.rs` left out (the room's shell declares its files; their uses of it are not a cycle). */
export function roomGraph(srcDir, room) {
  return siblingGraphs(srcDir).get(room) ?? new Map();
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

/** Imports that do not point down the layers: `[from, to]` pairs. */
export function layerViolations(g, layers = EDGE_LAYERS) {
  const rank = new Map(layers.flatMap((names, i) => names.map((n) => [n, i])));
  const out = [];
  for (const [from, deps] of g) {
    for (const to of deps) {
      if (!rank.has(from) || !rank.has(to) || rank.get(to) >= rank.get(from)) out.push([from, to]);
    }
  }
  for (const from of g.keys()) if (!rank.has(from)) out.push([from, "(no layer: add it to EDGE_LAYERS)"]);
  return out.sort();
}

/** Imports of a sealed room from any other room: `[from, to]` pairs. */
export function sealedViolations(g, sealed = SEALED_ROOMS) {
  const out = [];
  for (const [from, deps] of g) for (const to of deps) if (sealed.includes(to) && to !== from) out.push([from, to]);
  return out.sort();
}

/** Blanks string and char literals and comments (keeping newlines), so braces can be counted. */
export function codeOnly(text) {
  let out = "";
  let i = 0;
  while (i < text.length) {
    const rest = text.slice(i);
    let m;
    if (rest.startsWith("//")) {
      const end = text.indexOf("\n", i);
      i = end < 0 ? text.length : end;
    } else if (rest.startsWith("/*")) {
      const end = text.indexOf("*/", i + 2);
      const stop = end < 0 ? text.length : end + 2;
      out += text.slice(i, stop).replace(/[^\n]/g, " ");
      i = stop;
    } else if ((m = rest.match(/^b?r(#*)"/))) {
      const close = '"' + m[1];
      const end = text.indexOf(close, i + m[0].length);
      const stop = end < 0 ? text.length : end + close.length;
      out += text.slice(i, stop).replace(/[^\n]/g, " ");
      i = stop;
    } else if (rest[0] === '"' || rest.startsWith('b"')) {
      let j = i + (rest[0] === "b" ? 2 : 1);
      while (j < text.length && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      out += text.slice(i, j + 1).replace(/[^\n]/g, " ");
      i = j + 1;
    } else if ((m = rest.match(/^b?'(\\.[^']*|[^\\'])'/))) {
      out += " ".repeat(m[0].length);
      i += m[0].length;
    } else {
      out += text[i];
      i += 1;
    }
  }
  return out;
}

/** Functions longer than `max` lines (from the `fn` line to its closing brace): [name, lines, line]. */
export function longFunctions(text, max = MAX_FN_LINES) {
  const code = codeOnly(withoutTests(text));
  const out = [];
  for (const m of code.matchAll(/\bfn\s+([a-z_][a-z0-9_]*)/g)) {
    // The body opens at the first `{` after the signature (a `;` first: no body).
    let i = m.index + m[0].length;
    let depthParen = 0;
    while (i < code.length) {
      const c = code[i];
      if (c === "(" || c === "<" || c === "[") depthParen += 1;
      else if (c === ")" || c === "]" || (c === ">" && code[i - 1] !== "-" && code[i - 1] !== "=")) depthParen -= 1;
      else if (c === ";" && depthParen <= 0) break;
      else if (c === "{" && depthParen <= 0) break;
      i += 1;
    }
    if (code[i] !== "{") continue;
    let depth = 0;
    let j = i;
    for (; j < code.length; j++) {
      if (code[j] === "{") depth += 1;
      else if (code[j] === "}" && --depth === 0) break;
    }
    const startLine = code.slice(0, m.index).split("\n").length;
    const endLine = code.slice(0, j).split("\n").length;
    const lines = endLine - startLine + 1;
    if (lines > max) out.push([m[1], lines, startLine]);
  }
  return out;
}

/** String literals that read as SQL statements: [line, excerpt]. */
export function sqlLiterals(text) {
  const src = withoutTests(text);
  const out = [];
  const sql = /\b(SELECT\s[\s\S]*\bFROM\b|INSERT\s+INTO\b|UPDATE\s+[a-z_]+\s+SET\b|DELETE\s+FROM\b|CREATE\s+(TABLE|INDEX|TRIGGER)\b|ON\s+CONFLICT\b)/;
  for (const m of src.matchAll(/(?:r#*)?"(?:[^"\\]|\\.)*"/g)) {
    if (sql.test(m[0])) out.push([src.slice(0, m.index).split("\n").length, m[0].slice(0, 60).replace(/\s+/g, " ")]);
  }
  return out;
}

/** Whether a file starts with a module doc comment. */
export function hasModuleDoc(text) {
  return text.trimStart().startsWith("//!");
}

/** Every finding for the edge at `srcDir` (and the core at `coreDir`), as messages. */
export function findings(srcDir, coreDir) {
  const out = [];
  if (coreDir) {
    for (const c of cycles(graph(coreDir))) out.push(`the core has an import cycle: ${c.join(" ↔ ")}`);
    for (const [parent, sub] of siblingGraphs(coreDir)) {
      if (parent !== "") for (const c of cycles(sub)) out.push(`files of crates/core/src/${parent.replaceAll("::", "/")}/ import each other in a cycle: ${c.join(" ↔ ")}`);
    }
    const stillLong = new Set();
    for (const file of files(coreDir)) {
      const text = fs.readFileSync(file, "utf8");
      const rel = path.relative(coreDir, file).replace(/\\/g, "/");
      if (!hasModuleDoc(text)) out.push(`${path.relative(ROOT, file)} has no module doc comment (//!)`);
      for (const [name, lines, line] of longFunctions(text)) {
        if (CORE_LONG_ALLOWED.has(`${rel}:${name}`)) stillLong.add(`${rel}:${name}`);
        else out.push(`crates/core/src/${rel}:${line} fn ${name} is ${lines} lines (at most ${MAX_FN_LINES}; declarative tables go in CORE_LONG_ALLOWED)`);
      }
    }
    for (const key of CORE_LONG_ALLOWED.keys()) {
      if (!stillLong.has(key)) out.push(`CORE_LONG_ALLOWED lists ${key}, which is no longer over ${MAX_FN_LINES} lines: remove it`);
    }
  }
  const g = graph(srcDir);
  for (const c of cycles(g)) out.push(`the edge's rooms import each other in a cycle: ${c.join(" ↔ ")}`);
  for (const [from, to] of layerViolations(g)) out.push(`the room ${from} imports ${to}: imports must point down the layers (${EDGE_LAYERS.map((l) => l.join("/")).join(" → ")} is lowest-first)`);
  for (const [from, to] of sealedViolations(g)) out.push(`the room ${from} imports ${to}: only ${to}/ itself may (the worker reaches the chat object through outbound::objects' ChatRequest)`);
  for (const [parent, sub] of siblingGraphs(srcDir)) {
    if (parent === "") continue; // the rooms: above
    for (const c of cycles(sub)) out.push(`files of ${parent.replaceAll("::", "/")}/ import each other in a cycle: ${c.join(" ↔ ")}`);
  }
  for (const file of files(srcDir)) {
    const rel = path.relative(srcDir, file).replace(/\\/g, "/");
    const text = fs.readFileSync(file, "utf8");
    if (!hasModuleDoc(text)) out.push(`src/${rel} has no module doc comment (//!)`);
    if (!rel.startsWith("storage/")) {
      for (const [line, excerpt] of sqlLiterals(text)) out.push(`SQL outside storage/: src/${rel}:${line} ${excerpt}`);
    }
    for (const [name, lines, line] of longFunctions(text)) out.push(`src/${rel}:${line} fn ${name} is ${lines} lines (at most ${MAX_FN_LINES})`);
  }
  return out;
}

function main() {
  const out = [...findings(path.join(ROOT, "src"), path.join(ROOT, "crates/core/src")), ...jsFindings(ROOT)];
  for (const f of out) console.error(`check-modules: ${f}`);
  if (out.length) process.exit(1);
  console.error("check-modules: no cycles, imports point down the layers, SQL only in storage/, functions short (Rust and JS), every module documented");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main();
