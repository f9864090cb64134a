// INVARIANTS.md's invariants each name the module that owns them and a test that proves them,
// and both exist: the owner path, the test file, and a test of that name in it. ARCHITECTURE.md
// stays a map a newcomer reads in minutes: at most MAX_MAP_LINES lines, every `file::function`
// of its walks defined there, every path of its code map present. No worker needed.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** The entries of the "## Invariants" section: each `- **name**...` bullet with its lines. */
export function invariants(markdown) {
  const start = markdown.search(/^#{1,2} Invariants$/m);
  if (start < 0) return [];
  const rest = markdown.slice(start + 1);
  const end = rest.search(/^## /m);
  const section = end < 0 ? rest : rest.slice(0, end);
  const entries = [];
  for (const line of section.split("\n")) {
    if (line.startsWith("- **")) entries.push(line);
    else if (/^\s+\S/.test(line) && entries.length && !line.startsWith("#")) entries[entries.length - 1] += "\n" + line;
    else if (line.trim() !== "") entries.push(null); // a heading or prose ends the entry
  }
  return entries.filter(Boolean).map((text) => {
    const owner = text.match(/Owner: `([^`]+)`/);
    const tested = text.match(/Test: `([^`]+)` "([^"]+)"/);
    return {
      name: (text.match(/^- \*\*(.+?)\*\*/) || [])[1],
      owner: owner && owner[1],
      testFile: tested && tested[1],
      testName: tested && tested[2],
    };
  });
}

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** Whether `source` (a JS test file or Rust source) defines a test called `name`. */
export function definesTest(file, source, name) {
  if (file.endsWith(".rs")) return new RegExp(`\\bfn ${escape(name)}\\s*\\(`).test(source);
  return new RegExp(`\\b(test|it)\\(\\s*(["'\`])${escape(name)}\\2`).test(source);
}

/** What is wrong with the invariants of `markdown`, paths read under `root`, as messages. */
export function problems(markdown, root) {
  const out = [];
  const seen = new Set();
  for (const inv of invariants(markdown)) {
    const who = inv.name || "(an entry without a **name**)";
    if (seen.has(who)) out.push(`${who}: stated twice`);
    seen.add(who);
    if (!inv.owner) out.push(`${who}: no Owner: \`path\``);
    else if (!/^(src|crates\/core\/src)\//.test(inv.owner)) out.push(`${who}: owner ${inv.owner} is not under src/ or crates/core/src/`);
    else if (!fs.existsSync(path.join(root, inv.owner))) out.push(`${who}: owner ${inv.owner} does not exist`);
    if (!inv.testFile) out.push(`${who}: no Test: \`file\` "test name"`);
    else if (!fs.existsSync(path.join(root, inv.testFile))) out.push(`${who}: test file ${inv.testFile} does not exist`);
    else if (!definesTest(inv.testFile, fs.readFileSync(path.join(root, inv.testFile), "utf8"), inv.testName)) {
      out.push(`${who}: ${inv.testFile} has no test "${inv.testName}"`);
    }
  }
  return out;
}

test("the checker finds a missing owner or test, a path that is not there and a test name that is not", () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "architecture-"));
  fs.mkdirSync(path.join(root, "src/chat"), { recursive: true });
  fs.mkdirSync(path.join(root, "tests/e2e"), { recursive: true });
  fs.writeFileSync(path.join(root, "src/chat/mod.rs"), "//! x\n#[test]\nfn a_rust_test() {}\n");
  fs.writeFileSync(path.join(root, "tests/e2e/x.test.js"), 'test("a js test", () => {});\nit(\'another\', () => {});\n');
  const doc = [
    "# A", "", "## Invariants", "", "Prose.", "", "### Group", "",
    "- **Fine.** Holds.", '  Owner: `src/chat/mod.rs`. Test: `tests/e2e/x.test.js` "a js test"',
    "- **Fine in Rust.** Holds.", '  Owner: `src/chat/`. Test: `src/chat/mod.rs` "a_rust_test"',
    "- **Fine with it().** Holds.", '  Owner: `src/chat/`. Test: `tests/e2e/x.test.js` "another"',
    "- **No owner.** Holds.", '  Test: `tests/e2e/x.test.js` "a js test"',
    "- **No test.** Holds.", "  Owner: `src/chat/mod.rs`.",
    "- **Owner gone.** Holds.", '  Owner: `src/bot/turn.rs`. Test: `tests/e2e/x.test.js` "a js test"',
    "- **Owner outside.** Holds.", '  Owner: `scripts/x.mjs`. Test: `tests/e2e/x.test.js` "a js test"',
    "- **File gone.** Holds.", '  Owner: `src/chat/mod.rs`. Test: `tests/e2e/y.test.js` "a js test"',
    "- **Name gone.** Holds.", '  Owner: `src/chat/mod.rs`. Test: `tests/e2e/x.test.js` "a js tes"',
    "- **Rust name gone.** Holds.", '  Owner: `src/chat/mod.rs`. Test: `src/chat/mod.rs` "a_rust"',
    "- **Fine.** Again.", '  Owner: `src/chat/mod.rs`. Test: `tests/e2e/x.test.js` "a js test"',
    "", "## Next", "- **Not an invariant.** No owner.",
  ].join("\n");
  assert.equal(invariants(doc).length, 11);
  assert.deepEqual(problems(doc, root), [
    "No owner.: no Owner: `path`",
    'No test.: no Test: `file` "test name"',
    "Owner gone.: owner src/bot/turn.rs does not exist",
    "Owner outside.: owner scripts/x.mjs is not under src/ or crates/core/src/",
    "File gone.: test file tests/e2e/y.test.js does not exist",
    'Name gone.: tests/e2e/x.test.js has no test "a js tes"',
    'Rust name gone.: src/chat/mod.rs has no test "a_rust"',
    "Fine.: stated twice",
  ]);
});

test("every invariant in INVARIANTS.md names an owner and a test that exist", () => {
  const doc = fs.readFileSync(path.join(ROOT, "INVARIANTS.md"), "utf8");
  assert.ok(invariants(doc).length >= 40, `read the Invariants section: ${invariants(doc).length} entries`);
  assert.deepEqual(problems(doc, ROOT), []);
});

export const MAX_MAP_LINES = 220;

/** The `file::function` references of a markdown text: [file, function]. */
export function walkSteps(markdown) {
  return [...markdown.matchAll(/`((?:src|crates|scripts|tools|tests|bench)\/[\w./-]+\.(?:rs|js|mjs))::(\w+)`/g)].map((m) => [m[1], m[2]]);
}

/** Whether `source` defines a function `name` (Rust `fn name`, JS `function name` or a method). */
export function definesFunction(file, source, name) {
  if (file.endsWith(".rs")) return new RegExp(`\\bfn ${escape(name)}\\b`).test(source);
  return new RegExp(`(\\bfunction\\*?\\s+${escape(name)}\\b|^\\s*(async\\s+)?${escape(name)}\\s*\\()`, "m").test(source);
}

/** The paths in the first column of a markdown table ("`a/`, `b.rs`": b.rs is in a/'s folder). */
export function tablePaths(markdown) {
  const out = [];
  for (const line of markdown.split("\n")) {
    const cell = /^\| ([^|]+) \|/.exec(line)?.[1];
    if (!cell) continue;
    let dir = "";
    for (const m of cell.matchAll(/`([^`]+)`/g)) {
      const p = m[1].includes("/") ? m[1] : dir + m[1];
      dir = p.endsWith("/") ? p : p.slice(0, p.lastIndexOf("/") + 1);
      out.push(p);
    }
  }
  return out;
}

/** What is wrong with a map (ARCHITECTURE.md's text), paths read under `root`, as messages. */
export function mapProblems(markdown, root) {
  const out = [];
  const lines = markdown.split("\n").length - (markdown.endsWith("\n") ? 1 : 0);
  if (lines > MAX_MAP_LINES) out.push(`the map is ${lines} lines (at most ${MAX_MAP_LINES}): move detail to docs/`);
  for (const [file, fn] of walkSteps(markdown)) {
    const at = path.join(root, file);
    if (!fs.existsSync(at)) out.push(`${file}::${fn}: no such file`);
    else if (!definesFunction(file, fs.readFileSync(at, "utf8"), fn)) out.push(`${file}::${fn}: no such function`);
  }
  for (const p of tablePaths(markdown)) if (!fs.existsSync(path.join(root, p))) out.push(`code map: ${p} does not exist`);
  return out;
}

test("the map checker finds a long map, a walk step that is gone and a code-map path that is not there", () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "map-"));
  fs.mkdirSync(path.join(root, "src/chat"), { recursive: true });
  fs.mkdirSync(path.join(root, "bench"), { recursive: true });
  fs.writeFileSync(path.join(root, "src/chat/mod.rs"), "impl X {\n    pub(super) async fn on_alarm(&self) {}\n}\nfn arm() {}\n");
  fs.writeFileSync(path.join(root, "bench/cpu.mjs"), "async function formatRun() {}\nclass B {\n  async attribute() {}\n}\n");
  const doc = [
    "# Map", "", "1. `src/chat/mod.rs::on_alarm` then `src/chat/mod.rs::arm`; `bench/cpu.mjs::formatRun`, `bench/cpu.mjs::attribute`.",
    "2. `src/chat/mod.rs::on_alarms` and `src/chat/plan.rs::advance`.", "",
    "| path | what |", "|---|---|", "| `src/chat/`, `mod.rs` | the object |", "| `src/chat/plan.rs` | gone |", "| `bench/` | benches |",
  ].join("\n");
  assert.deepEqual(mapProblems(doc, root), [
    "src/chat/mod.rs::on_alarms: no such function",
    "src/chat/plan.rs::advance: no such file",
    "code map: src/chat/plan.rs does not exist",
  ]);
  assert.deepEqual(mapProblems(doc + "\n".repeat(MAX_MAP_LINES), root)[0], `the map is ${MAX_MAP_LINES + 9} lines (at most ${MAX_MAP_LINES}): move detail to docs/`);
});

test("ARCHITECTURE.md is a short map whose walks and code map name what exists", () => {
  const doc = fs.readFileSync(path.join(ROOT, "ARCHITECTURE.md"), "utf8");
  assert.ok(walkSteps(doc).length >= 30, `read the walks: ${walkSteps(doc).length} steps`);
  assert.ok(tablePaths(doc).length >= 25, `read the code map: ${tablePaths(doc).length} paths`);
  assert.deepEqual(mapProblems(doc, ROOT), []);
});

test("the detailed code map names only paths that exist", () => {
  const doc = fs.readFileSync(path.join(ROOT, "docs/code-map.md"), "utf8");
  assert.ok(tablePaths(doc).length >= 40);
  assert.deepEqual(tablePaths(doc).filter((p) => !fs.existsSync(path.join(ROOT, p))), []);
});
