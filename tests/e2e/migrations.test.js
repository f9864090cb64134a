// The rule for migrations (migrations/README.md): `npm run deploy` applies them to the live
// database before the new code is uploaded, so for that moment the previous release's code
// runs on the new schema. Each migration therefore keeps every table and column the schema had
// (no drop, no rename) and adds no NOT NULL column without a default to an existing table
// (the previous release's inserts do not name it). Checked here for every migration, in order,
// on real SQLite.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { ROOT } from "../support/stack.js";

const DIR = path.join(ROOT, "migrations");
const FILES = fs.readdirSync(DIR).filter((f) => f.endsWith(".sql")).sort();

function schema(db) {
  const out = new Map();
  for (const { name } of db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all()) {
    out.set(name, db.prepare('SELECT name, "notnull" AS nn, dflt_value AS d FROM pragma_table_info(?)').all(name).map((c) => ({ ...c })));
  }
  return out;
}

/** What in `sql` would break the previous release's code on the schema `db` has now. */
export function breaks(db, sql) {
  const before = schema(db);
  db.exec(sql);
  const after = schema(db);
  const problems = [];
  for (const [table, columns] of before) {
    const now = after.get(table);
    if (!now) {
      problems.push(`table ${table} is gone`);
      continue;
    }
    for (const c of columns) if (!now.some((x) => x.name === c.name)) problems.push(`column ${table}.${c.name} is gone`);
    for (const c of now) if (!columns.some((x) => x.name === c.name) && c.nn && c.d === null) problems.push(`new column ${table}.${c.name} is NOT NULL without a default`);
  }
  return problems;
}

test("every migration keeps the previous release's code working: no table or column goes, no NOT NULL column without a default", () => {
  const db = new DatabaseSync(":memory:");
  for (const file of FILES) {
    assert.deepEqual(breaks(db, fs.readFileSync(path.join(DIR, file), "utf8")), [], file);
  }
});

test("the check sees a dropped column, a renamed table and a NOT NULL column without a default", () => {
  const db = new DatabaseSync(":memory:");
  db.exec("CREATE TABLE a (x INTEGER, y TEXT); CREATE TABLE b (z TEXT)");
  assert.deepEqual(breaks(db, "ALTER TABLE a DROP COLUMN y"), ["column a.y is gone"]);
  assert.deepEqual(breaks(db, "ALTER TABLE b RENAME TO c"), ["table b is gone"]);
  assert.deepEqual(breaks(db, "ALTER TABLE a ADD COLUMN w TEXT NOT NULL DEFAULT ''"), []);
  assert.deepEqual(breaks(db, "CREATE TABLE a2 (x INTEGER, w TEXT, v TEXT NOT NULL); DROP TABLE a; ALTER TABLE a2 RENAME TO a"), ["new column a.v is NOT NULL without a default"]);
});

test("migrations/README.md states the rule", () => {
  const readme = fs.readFileSync(path.join(DIR, "README.md"), "utf8");
  assert.match(readme, /previous release's code/);
  assert.match(readme, /tests\/e2e\/migrations\.test\.js/);
});
