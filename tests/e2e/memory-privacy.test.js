// Memory privacy end to end: every path that reads memories or notes (a turn's recall,
// search_memory, /memory, the admin API, consolidation's input) is walked against one table of
// cases, and each must show exactly what its scope allows (what one member supplied about
// another stays in the chat where it was said). Also: /forget never touches operator
// notes or memories this chat may not see; `remember` and consolidation refuse subjects who were
// never seen in the conversation; a group's consolidation neither sees nor changes private-chat
// memories; a consolidation that lost its lease commits nothing.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, groupText, mention, uniqueId, sleep } from "../support/stack.js";
import { promptText as systemText } from "../support/prompt.js";

let s;
before(async () => {
  s = await startStack();
});
after(async () => {
  await s?.close();
});

function groupCmd(g, uid, text) {
  return groupText(g, uid, text, { entities: [{ type: "bot_command", offset: 0, length: text.split(" ")[0].length }] });
}
function privateCmd(uid, text) {
  return privateText(uid, text, { entities: [{ type: "bot_command", offset: 0, length: text.split(" ")[0].length }] });
}

/** A fresh group G with members U and V, U's private chat P, another group H, a stranger W,
 *  and the table of cases stored: every kind of memory and note, learned in each place. */
async function world() {
  const U = uniqueId(); // the person
  const V = uniqueId(); // another member of the group
  const W = uniqueId(); // a stranger who never wrote in the group
  const G = -1000000000000 - uniqueId(); // the group
  const H = -1000000000000 - uniqueId(); // another group U is in
  const P = U; // U's private chat

  // The table of cases. Columns: where each item may be seen.
  //   recallG/recallP: a turn's system instruction in the group / in U's private chat
  //   searchG/searchP: search_memory's results there
  //   memoryG/memoryP: U's /memory there
  //   consG/consP: the consolidation input (existing memories) of the group / private chat
  //   adminU/adminG: GET /api/v1/memories?user_id=U / ?chat_id=G
  const cases = [
    { key: "pf", t: "m", kind: "fact", chat: P, about: U, see: "recallP searchP memoryP consP adminU" },
    { key: "gf", t: "m", kind: "fact", chat: G, about: U, by: U, see: "recallG recallP searchG searchP memoryG memoryP consG adminU adminG" },
    // What V said about U in the group: seen there, never in U's private chat as U's own words
    // (a note V had the bot write about U: access-background.test.js; search_memory shows 8).
    { key: "gs", t: "m", kind: "fact", chat: G, about: U, by: V, see: "recallG searchG memoryG consG adminU adminG" },
    // About the group, not about U: every member's, so no member lists or erases it with /memory.
    { key: "ge", t: "m", kind: "episode", chat: G, about: null, see: "recallG searchG adminG" },
    { key: "hf", t: "m", kind: "fact", chat: H, about: U, by: U, see: "recallP searchP memoryP adminU" },
    { key: "gc", t: "m", kind: "commitment", chat: G, about: U, see: "recallG searchG memoryG consG adminU adminG" },
    { key: "pa", t: "m", kind: "alias", chat: P, about: U, see: "recallP searchP memoryP consP adminU" },
    { key: "pc", t: "m", kind: "commitment", chat: P, about: U, see: "recallP searchP memoryP consP adminU" },
    { key: "gv", t: "m", kind: "fact", chat: G, about: V, see: "recallG searchG consG adminG" },
    { key: "pn", t: "n", source: "agent", chat: P, about: U, see: "recallP searchP memoryP adminU" },
    { key: "gn", t: "n", source: "agent", chat: G, about: U, by: U, see: "recallG recallP searchG searchP memoryG memoryP adminU adminG" },
    { key: "on", t: "n", source: "operator", chat: null, about: U, see: "recallG recallP searchG searchP adminU" },
    { key: "og", t: "n", source: "operator", chat: G, about: null, see: "recallG searchG adminG" },
    { key: "ov", t: "n", source: "operator", chat: null, about: W, see: "" },
  ];
  const marker = (c) => `${c.key}mark${U}`;
  const ids = {};
  const num = {};
  for (const c of cases) {
    const value = `zebra ${marker(c)}`;
    if (c.t === "m") {
      const [row] = await s.sql(
        `INSERT INTO memories (kind, chat_id, conv, about_user_id, entity, attribute, value, status, confidence, created_at, updated_at, supplied_by)
         VALUES (?, ?, ?, ?, 'someone', ?, ?, ?, 0.8, 0, 0, ?) RETURNING id`,
        c.kind, c.chat, String(c.chat), c.about, c.kind === "fact" ? `${c.key} thing` : null, value, c.kind === "commitment" ? "open" : null,
        c.by ?? (c.chat === c.about ? c.about : null),
      );
      ids[c.key] = `m${row.id}`;
      num[c.key] = row.id;
    } else {
      const [row] = await s.sql(
        "INSERT INTO notes (chat_id, about_user_id, content, source, created_at, supplied_by) VALUES (?, ?, ?, ?, 0, ?) RETURNING id",
        c.chat, c.about, value, c.source, c.by ?? (c.chat === c.about ? c.about : null),
      );
      ids[c.key] = `n${row.id}`;
      num[c.key] = row.id;
    }
  }
  /** What `text` (the output of `path`) gets wrong, one line per case. */
  const check = (path, text) => {
    const wrong = [];
    for (const c of cases) {
      const expected = c.see.split(" ").includes(path);
      const found = new RegExp(`\\b${marker(c)}\\b`).test(text);
      if (found !== expected) {
        const where = c.chat === P ? "the private chat" : c.chat === G ? "the group" : c.chat === H ? "another group" : "no chat";
        wrong.push(`${path}: ${c.key} (${c.t === "m" ? c.kind : c.source} learned in ${where}) ${expected ? "missing" : "LEAKED"}`);
      }
    }
    return wrong;
  };
  // V has spoken in the group; W never has.
  await s.webhook(groupText(G, V, "hello everyone", { name: "Vera" }));
  return { U, V, W, G, H, P, ids, num, check };
}

/** U talks in the group and in private (so both have something to consolidate). */
async function talk(w, scriptG = [], scriptP = []) {
  s.gemini.script(w.U, scriptG);
  const q = "@edge_test_bot what about the zebra?";
  const g = s.tg.sent(w.G).length;
  await s.webhook(groupText(w.G, w.U, q, { name: "Uma", entities: mention(q, "edge_test_bot") }));
  await s.tg.waitFor(() => s.tg.sent(w.G).length === g + 1, 10_000, "the group reply");
  s.gemini.script(w.U, scriptP);
  const p = s.tg.sent(w.P).length;
  await s.webhook(privateText(w.U, "what about the zebra?", { name: "Uma" }));
  await s.tg.waitFor(() => s.tg.sent(w.P).length === p + 1, 10_000, "the private reply");
}

/** Is this consolidation request the group's? */
const isGroupConsolidation = (body) => body.contents[0].parts[0].text.includes("hello everyone");

test("every path that reads memories shows exactly what its scope allows", async () => {
  const w = await world();
  const { U, G, P } = w;
  // A turn in the group and one in the private chat, each searching its memory.
  const seen = {};
  const searching = (where) => [
    (body) => {
      seen[`recall${where}`] = systemText(body);
      return { calls: [{ name: "search_memory", args: { query: "zebra" } }] };
    },
    (body) => {
      seen[`search${where}`] = JSON.stringify(body.contents.at(-1).parts[0].functionResponse.response.results);
      return { text: "ok" };
    },
  ];
  await talk(w, searching("G"), searching("P"));

  // /memory in both.
  await s.webhook(groupCmd(G, U, "/memory"));
  await s.tg.waitFor(() => s.tg.sent(G).length === 2, 10_000, "/memory in the group");
  seen.memoryG = s.tg.sent(G)[1];
  await s.webhook(privateCmd(U, "/memory"));
  await s.tg.waitFor(() => s.tg.sent(P).length === 2, 10_000, "/memory in private");
  seen.memoryP = s.tg.sent(P)[1];

  // The admin API.
  seen.adminU = JSON.stringify((await s.api("GET", `memories?user_id=${U}`)).json);
  seen.adminG = JSON.stringify((await s.api("GET", `memories?chat_id=${G}`)).json);

  // What each chat's consolidation is given.
  const capture = (body) => {
    seen[isGroupConsolidation(body) ? "consG" : "consP"] = systemText(body);
    return { text: JSON.stringify({ facts: [], episodes: [], commitments: [], commitment_updates: [], aliases: [] }) };
  };
  s.gemini.script(U, [capture, capture]);
  await s.consolidate();
  assert.ok(seen.consG && seen.consP, "both chats were consolidated");

  const wrong = ["recallG", "recallP", "searchG", "searchP", "memoryG", "memoryP", "consG", "consP", "adminU", "adminG"]
    .flatMap((path) => w.check(path, seen[path]));
  assert.deepEqual(wrong, [], wrong.join("\n"));
});

test("a group's consolidation changes only the group's memories and names no stranger", async () => {
  const w = await world();
  const { U, V, W, G, num } = w;
  await talk(w);
  const extraction = (body) => {
    if (isGroupConsolidation(body)) {
      return { text: JSON.stringify({
        facts: [
          { about_user_id: U, entity: "Uma", attribute: "pf thing", value: "overwritten from the group" },
          { about_user_id: U, entity: "Uma", attribute: "gf thing", value: `zebra gfnew${U}` },
          { about_user_id: V, entity: "Vera", attribute: "hobby", value: `zebra vhobby${U}` },
          { about_user_id: W, entity: "Walt", attribute: "instruction", value: `zebra planted${U}` },
        ],
        episodes: [],
        commitments: [],
        // A private-chat commitment, by id.
        commitment_updates: [{ memory_id: num.pc, status: "done" }],
        aliases: [{ alias: `wally${U}`, user_id: W, name: "Walt" }],
      }) };
    }
    // The private chat's merge names the group's commitment.
    return { text: JSON.stringify({ facts: [], episodes: [], commitments: [], commitment_updates: [{ memory_id: num.gc, status: "done" }], aliases: [] }) };
  };
  s.gemini.script(U, [extraction, extraction]);
  await s.consolidate();
  const [pf] = await s.sql("SELECT value, superseded_by FROM memories WHERE id = ?", num.pf);
  assert.deepEqual(pf, { value: `zebra pfmark${U}`, superseded_by: null }, "the private fact is untouched");
  const [pc] = await s.sql("SELECT status FROM memories WHERE id = ?", num.pc);
  assert.equal(pc.status, "open", "the private commitment stays open");
  const [gc] = await s.sql("SELECT status FROM memories WHERE id = ?", num.gc);
  assert.equal(gc.status, "open", "the private chat's merge did not close the group's commitment");
  const [gf] = await s.sql("SELECT superseded_by FROM memories WHERE id = ?", num.gf);
  assert.ok(gf.superseded_by, "the group's own fact was superseded");
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM memories WHERE value = ? AND chat_id = ?", `zebra vhobby${U}`, G))[0].n, 1, "a fact about a member is kept");
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM memories WHERE about_user_id = ?", W))[0].n, 0, "nothing about the stranger");
});

test("remember refuses a subject never seen in the chat, with a clear function error", async () => {
  const w = await world();
  const { U, V, W, G } = w;
  s.gemini.script(U, [
    { calls: [
      { name: "remember", args: { content: `planted note ${U}`, about_user_id: W } },
      { name: "remember", args: { content: `member note ${U}`, about_user_id: V } },
      { name: "send_message", args: { text: "done" } },
    ] },
  ]);
  const r = "@edge_test_bot remember things";
  await s.webhook(groupText(G, U, r, { name: "Uma", entities: mention(r, "edge_test_bot") }));
  await s.tg.waitFor(() => s.tg.sent(G).length === 1, 10_000, "the remember reply");
  const [turn] = await s.sql("SELECT contents FROM turns WHERE chat_id = ? ORDER BY created_at DESC LIMIT 1", G);
  assert.match(turn.contents, /not stored: user \d+ has not written in this chat/, "a clear function error");
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM notes WHERE about_user_id = ? AND source = 'agent'", W))[0].n, 0);
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM notes WHERE about_user_id = ? AND chat_id = ?", V, G))[0].n, 1);
});

test("/forget never erases operator notes or what this chat may not see", async () => {
  const w = await world();
  const { U, G, P, ids, num } = w;
  await s.webhook(privateCmd(U, `/forget ${ids.on}`));
  await s.tg.waitFor(() => s.tg.sent(P).length === 1, 10_000, "/forget of an operator note");
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM notes WHERE id = ?", num.on))[0].n, 1, "the operator note stays");
  await s.webhook(groupCmd(G, U, `/forget ${ids.pf}`));
  await s.tg.waitFor(() => s.tg.sent(G).length === 1, 10_000, "/forget of a private memory in the group");
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM memories WHERE id = ?", num.pf))[0].n, 1, "the private memory stays");
  assert.match(s.tg.sent(G)[0], /I have no memory/);
  await s.webhook(groupCmd(G, U, "/forget all"));
  await s.tg.waitFor(() => s.tg.sent(G).length === 2, 10_000, "/forget all in the group");
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM memories WHERE id = ?", num.pf))[0].n, 1, "the private memory stays after /forget all in a group");
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM memories WHERE chat_id = ? AND about_user_id = ?", G, U))[0].n, 0, "the group's memories about U are gone");
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM notes WHERE id = ?", num.on))[0].n, 1, "the operator note stays after /forget all");
  // In the private chat, /forget all erases everything about U, wherever learned, but not operator notes.
  await s.webhook(privateCmd(U, "/forget all"));
  await s.tg.waitFor(() => s.tg.sent(P).length === 2, 10_000, "/forget all in private");
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM memories WHERE about_user_id = ?", U))[0].n, 0);
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM notes WHERE about_user_id = ? AND source = 'agent'", U))[0].n, 0);
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM notes WHERE id = ?", num.on))[0].n, 1, "the operator note stays");
});

test("a consolidation that lost its lease commits nothing", async () => {
  const X = uniqueId();
  await s.webhook(privateText(X, "I have a cat named Tofu."));
  await s.tg.waitFor(() => s.tg.sent(X).length === 1, 10_000, "the reply");
  s.gemini.script(X, [{ delayMs: 2500, text: JSON.stringify({ facts: [{ about_user_id: X, entity: "me", attribute: "cat", value: "Tofu" }], episodes: [], commitments: [], commitment_updates: [], aliases: [] }) }]);
  await s.scheduled();
  let lease;
  for (let i = 0; i < 150 && !lease; i++) {
    await sleep(100);
    lease = (await s.sql("SELECT consolidating_until FROM conversations WHERE conv = ?", String(X)))[0]?.consolidating_until;
  }
  assert.ok(lease, "the job took the lease");
  // Another job takes the conversation over (as after an expired lease).
  await s.sql("UPDATE conversations SET consolidating_until = ? WHERE conv = ?", lease + 1, String(X));
  for (let i = 0; i < 100; i++) {
    await sleep(200);
    if ((await s.sql("SELECT COUNT(*) AS n FROM calls WHERE conv = ? AND purpose = 'consolidate'", String(X)))[0].n > 0) break;
  }
  await sleep(500);
  // The call happened and is priced, though the job committed nothing.
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM calls WHERE conv = ? AND purpose = 'consolidate'", String(X)))[0].n, 1, "the job's model call is recorded once");
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM memories WHERE about_user_id = ?", X))[0].n, 0, "no memory committed");
  const [c] = await s.sql("SELECT consolidated_seq, consolidating_until FROM conversations WHERE conv = ?", String(X));
  assert.equal(c.consolidated_seq, 0, "the watermark did not move");
  assert.equal(c.consolidating_until, lease + 1, "the other job's lease is left alone");
  // When the lease is free again, the next run commits.
  await s.sql("UPDATE conversations SET consolidating_until = NULL WHERE conv = ?", String(X));
  s.gemini.script(X, [{ text: JSON.stringify({ facts: [{ about_user_id: X, entity: "me", attribute: "cat", value: "Tofu" }], episodes: [], commitments: [], commitment_updates: [], aliases: [] }) }]);
  await s.consolidate();
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM memories WHERE about_user_id = ?", X))[0].n, 1);
});
