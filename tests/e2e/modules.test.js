// The module-cycle check (scripts/check-modules.mjs) finds cycles, and the tree passes it.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { graph, cycles } from "../../scripts/check-modules.mjs";
import { ROOT } from "../support/stack.js";

test("the checker sees a cycle through use lines, grouped imports and paths", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "modules-"));
  fs.writeFileSync(path.join(dir, "lib.rs"), "pub mod a; pub mod b; pub mod c; pub mod d;\n");
  fs.writeFileSync(path.join(dir, "a.rs"), "use crate::{b::Thing, c};\n");
  fs.mkdirSync(path.join(dir, "b"));
  fs.writeFileSync(path.join(dir, "b", "mod.rs"), "fn f() { crate::a::g(); }\n");
  fs.writeFileSync(path.join(dir, "c.rs"), "// crate::a is only mentioned in a comment\n");
  fs.writeFileSync(path.join(dir, "d.rs"), "#[cfg(test)]\nmod tests { use crate::a; }\n");
  const found = cycles(graph(dir));
  assert.deepEqual(found, [["a", "b"]]);
});

test("the core has no import cycle and the edge no new one", () => {
  execFileSync(process.execPath, [path.join(ROOT, "scripts/check-modules.mjs")], { stdio: "pipe" });
});
