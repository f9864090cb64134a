// The shape checks (scripts/check-modules.mjs) find what they are for, and the tree passes them.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { graph, cycles, roomGraph, siblingGraphs, jsLongFunctions, jsFindings, layerViolations, sealedViolations, longFunctions, sqlLiterals, hasModuleDoc, findings } from "../../scripts/check-modules.mjs";
import { ROOT } from "../support/stack.js";

function tree(files) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "modules-"));
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), text);
  }
  return dir;
}

test("the checker sees a cycle through use lines, grouped imports and paths", () => {
  const dir = tree({
    "lib.rs": "pub mod a; pub mod b; pub mod c; pub mod d;\n",
    "a.rs": "use crate::{b::Thing, c};\n",
    "b/mod.rs": "fn f() { crate::a::g(); }\n",
    "c.rs": "// crate::a is only mentioned in a comment\n",
    "d.rs": "#[cfg(test)]\nmod tests { use crate::a; }\n",
  });
  assert.deepEqual(cycles(graph(dir)), [["a", "b"]]);
});

test("imports that go sideways or up the layers are found", () => {
  const dir = tree({
    "lib.rs": "",
    "config/mod.rs": "",
    "storage/mod.rs": "use crate::config::Ctx;\nuse crate::outbound::net;\n",
    "outbound/mod.rs": "use crate::config::Ctx;\n",
    "bot/mod.rs": "use crate::storage::Db;\nuse crate::chat::x;\n",
    "chat/mod.rs": "use crate::storage::Db;\nuse crate::bot::answer;\n",
    "api/mod.rs": "use crate::chat::x;\nuse crate::background::y;\n",
    "background/mod.rs": "use crate::chat::x;\n",
    "extra/mod.rs": "",
  });
  assert.deepEqual(layerViolations(graph(dir)), [
    ["api", "background"],
    ["bot", "chat"],
    ["extra", "(no layer: add it to EDGE_LAYERS)"],
    ["storage", "outbound"],
  ]);
});

test("the chat object's room is imported by no other room, even one above it", () => {
  const dir = tree({
    "lib.rs": "pub use chat::ChatObject;\n",
    "chat/mod.rs": "use crate::bot::answer;\nuse crate::outbound::objects::ChatRequest;\n",
    "bot/mod.rs": "",
    "outbound/objects.rs": "",
    "ingress/webhook.rs": "use crate::outbound::objects::{self, Arrival};\n",
    "api/chats.rs": "use crate::chat::ChatObject;\n",
    "background/queue.rs": "fn f() { crate::chat::x(); }\n",
  });
  assert.deepEqual(sealedViolations(graph(dir)), [
    ["api", "chat"],
    ["background", "chat"],
  ]);
});

test("files of one room importing each other in a cycle are found; the room's mod.rs is its shell", () => {
  const dir = tree({
    "chat/mod.rs": "pub mod a; pub mod b; pub mod c;\nuse a::x; use b::y;\n",
    "chat/a.rs": "use super::b::Y;\nuse super::ChatObject;\n",
    "chat/b.rs": "fn f() { crate::chat::a::g(); }\n",
    "chat/c/mod.rs": "use super::a;\n",
    "chat/c/inner.rs": "use super::super::b;\n",
  });
  assert.deepEqual(cycles(roomGraph(dir, "chat")), [["a", "b"]]);
  assert.deepEqual([...roomGraph(dir, "chat").get("c")].sort(), ["a", "b"]);
});

test("a cycle between files folders down is found through any depth of super:: and crate:: paths", () => {
  const dir = tree({
    "api/mod.rs": "mod miniapp;\n",
    "api/miniapp/mod.rs": "mod group; mod person; mod page;\npub fn answer() {}\n",
    // person → group through super::, group → person through crate:: (an item's path names its module)
    "api/miniapp/person.rs": "use super::answer;\nfn f() { super::group::route(); }\n",
    "api/miniapp/group.rs": "use super::answer;\nconst X: usize = crate::api::miniapp::person::MAX;\n",
    // page/view.rs → person through super::super::, the page's own files through self::
    "api/miniapp/page/mod.rs": "mod view; mod style;\nuse self::view::V;\n",
    "api/miniapp/page/view.rs": "use super::super::person::item;\nuse super::style;\n",
    "api/miniapp/page/style.rs": "use super::{view::V, super::group};\n",
    "bot/mod.rs": "pub fn b() {}\n",
  });
  const g = siblingGraphs(dir);
  assert.deepEqual(cycles(g.get("api::miniapp")), [["group", "person"]]);
  assert.deepEqual([...g.get("api::miniapp").get("page")].sort(), ["group", "person"]);
  assert.deepEqual(cycles(g.get("api::miniapp::page")), [["style", "view"]]);
  assert.deepEqual(findings(dir).filter((f) => f.includes("cycle")), [
    "files of api/miniapp/ import each other in a cycle: group ↔ person",
    "files of api/miniapp/page/ import each other in a cycle: style ↔ view",
  ]);
});

test("long functions are measured from fn to its closing brace, braces in strings and chars ignored", () => {
  const body = (n) => Array.from({ length: n }, (_, i) => `    let x${i} = "{";`).join("\n");
  const text = [
    "fn short() {\n" + body(10) + "\n}",
    "pub async fn long<T: Into<u8>>(a: Vec<u8>) -> Result<(), String> where T: Copy {\n    let c = '{';\n" + body(80) + "\n}",
    "fn declared(x: u8);",
    "#[cfg(test)]\nmod tests {\n    fn a_long_test() {\n" + body(200) + "\n    }\n}",
  ].join("\n\n");
  assert.deepEqual(longFunctions(text, 80), [["long", 83, 14]]);
});

test("long JS functions are found by what they are called, their nested functions too", () => {
  const body = (n) => Array.from({ length: n }, (_, i) => `  const x${i} = "}" + \`{\${i}}\`;`).join("\n");
  const text = [
    "#!/usr/bin/env node",
    "export function short() {\n" + body(10) + "\n}",
    "export async function long() {\n" + body(80) + "\n}",
    "const arrow = async (a) => {\n" + body(81) + "\n};",
    "const o = { method() {\n" + body(85) + "\n} };",
    "class C {\n  run() {\n" + body(90) + "\n  }\n}",
    "server.on('x', (r) => {\n  const inner = function named() {\n" + body(100) + "\n  };\n});",
  ].join("\n");
  assert.deepEqual(jsLongFunctions(text, 80).map(([name, lines]) => [name, lines]), [
    ["long", 82],
    ["arrow", 83],
    ["method", 87],
    ["run", 92],
    [`<anonymous>@${text.split("\n").findIndex((l) => l.startsWith("server.on")) + 1}`, 104],
    ["named", 102],
  ]);
});

test("the JS rule covers scripts, tools, benchmarks and test support, and its allow-list is checked", () => {
  const long = "export function big() {\n" + "  f();\n".repeat(90) + "}\n";
  const dir = tree({
    "scripts/a.mjs": long,
    "tools/b.js": long,
    "bench/c.mjs": "export const ok = () => 1;\n",
    "tests/support/d.js": "this is not javascript {",
    "tests/e2e/e.test.js": long, // tests themselves are not covered
    "src/f.js": long,
  });
  const allowed = new Map([["tools/b.js:big", "a stated reason"], ["bench/c.mjs:ok", "no longer long"]]);
  assert.deepEqual(jsFindings(dir, allowed).map((f) => f.replace(/: Unexpected.*/, ": …")), [
    "scripts/a.mjs:1 function big is 92 lines (at most 80; a stated exception goes in JS_LONG_ALLOWED)",
    "tests/support/d.js could not be parsed: …",
    "JS_LONG_ALLOWED lists bench/c.mjs:ok, which is no longer over 80 lines: remove it",
  ]);
});

test("SQL in string literals is found, prose is not", () => {
  const text = [
    'const Q: &str = "SELECT a FROM t WHERE x = ?1";',
    'let s = format!("DELETE FROM {table} WHERE id = ?1");',
    'let note = "select what you like from the menu";',
    'let w = "we UPDATE you soon";',
    'let u = "INSERT INTO notes (a) VALUES (?1)\n   ON CONFLICT DO NOTHING";',
  ].join("\n");
  assert.deepEqual(sqlLiterals(text).map(([line]) => line), [1, 2, 5]);
});

test("a file without a module doc comment is found", () => {
  assert.equal(hasModuleDoc("//! What this is for.\nfn f() {}\n"), true);
  assert.equal(hasModuleDoc("\n//! After a blank line.\n"), true);
  assert.equal(hasModuleDoc("/// An item doc, not the module's.\nfn f() {}\n"), false);
  assert.equal(hasModuleDoc("use a;\n//! too late\n"), false);
});

test("the tree passes: no cycles, imports down the layers, SQL only in storage/, short functions", () => {
  // Nothing outside src/chat/ imports the chat object's room (the request enum lives outside it).
  for (const [room, deps] of graph(path.join(ROOT, "src"))) {
    if (room !== "chat") assert.ok(!deps.has("chat"), `src/${room}/ imports crate::chat`);
  }
  assert.deepEqual(findings(path.join(ROOT, "src"), path.join(ROOT, "crates/core/src")), []);
  assert.deepEqual(jsFindings(ROOT), []);
  execFileSync(process.execPath, [path.join(ROOT, "scripts/check-modules.mjs")], { stdio: "pipe" });
});
