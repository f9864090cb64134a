// Long-term memory end to end: cron → consolidation job → structured Gemini output merged →
// recalled in later prompts; /memory shows it, /forget erases it everywhere; repeated
// consolidation changes nothing; a 2,000-message session gets summaries and its prompts stay
// within budget.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, uniqueId, sleep, cmd } from "../support/stack.js";
import { embedText, q8 } from "../support/fake-gemini.js";
import { promptText as systemText } from "../support/prompt.js";

let s;
before(async () => {
  s = await startStack({ vars: { EMBEDDINGS_MODEL: "gemini-embedding-001", METRICS_LOG: "true" } });
});
after(async () => {
  await s?.close();
});

const consolidations = () => s.gemini.requests.filter((r) => r.body?.generationConfig?.responseMimeType === "application/json").length;

test("what a user says is consolidated, recalled later, listed by /memory and erased by /forget all", async () => {
  const uid = uniqueId();
  const u = privateText(uid, "My sister's name is Maria and I work as a nurse at the city hospital.", { name: "Ana" });
  await s.webhook(u);
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the reply");
  let consolidationRequest;
  s.gemini.script(uid, [(body) => {
    consolidationRequest = body;
    return { text: JSON.stringify({
      facts: [
        { about_user_id: uid, entity: "Ana", attribute: "sister's name", value: "Maria", confidence: 0.9, source_message_ids: [u.message.message_id] },
        { about_user_id: uid, entity: "Ana", attribute: "job", value: "nurse at the city hospital", confidence: 0.9, source_message_ids: [u.message.message_id] },
      ],
      episodes: [{ summary: "Ana told the assistant about her family and work.", topics: ["family", "work"], date: "2026-11-22" }],
      commitments: [],
      commitment_updates: [],
      aliases: [],
    }) };
  }]);
  await s.consolidate();
  assert.ok(consolidationRequest, "the consolidation call was made");
  assert.equal(consolidationRequest.generationConfig.responseMimeType, "application/json");
  assert.ok(consolidationRequest.generationConfig.responseSchema.properties.facts);
  assert.match(consolidationRequest.contents[0].parts[0].text, /My sister's name is Maria/);
  const facts = await s.sql("SELECT kind, attribute, value, embedding FROM memories WHERE about_user_id = ? ORDER BY id", uid);
  assert.deepEqual(facts.map((f) => [f.kind, f.attribute, f.value]), [
    ["fact", "sister's name", "Maria"],
    ["fact", "job", "nurse at the city hospital"],
  ]);
  // Stored as bytes (q8: base64 of a 4-byte scale and one byte per component), 768 of them.
  assert.ok(facts.every((f) => f.embedding.startsWith("q8:") && Buffer.from(f.embedding.slice(3), "base64").length === 4 + 768), "embeddings stored");
  const asked = s.gemini.requests.filter((r) => r.embed).at(-1);
  assert.ok(asked.body.requests.every((r) => r.outputDimensionality === 768), "768 dimensions asked for");

  // Recall: a later turn's system instruction contains the facts.
  await s.webhook(privateText(uid, "Can you help me plan a visit to my sister?", { name: "Ana" }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 10_000, "the second reply");
  const sys = systemText(s.gemini.calls(uid).at(-1));
  assert.match(sys, /sister's name = Maria/);
  assert.match(sys, /job = nurse at the city hospital/);

  // /memory lists them.
  await s.webhook(cmd(uid, "/memory"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 3, 10_000, "the /memory reply");
  assert.match(s.tg.sent(uid)[2], /sister's name = Maria/);
  assert.match(s.tg.sent(uid)[2], /job = nurse/);

  // /forget all removes them from every table; the next prompt does not contain them.
  await s.webhook(cmd(uid, "/forget all"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 4, 10_000, "the /forget reply");
  assert.match(s.tg.sent(uid)[3], /I forgot \d+ things/);
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM memories WHERE about_user_id = ? OR chat_id = ?", uid, uid))[0].n, 0);
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM memory_fts WHERE memory_fts MATCH 'Maria'"))[0].n, 0);
  await s.webhook(privateText(uid, "What do you know about my family?", { name: "Ana" }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 5, 10_000, "the last reply");
  assert.doesNotMatch(systemText(s.gemini.calls(uid).at(-1)), /Maria|nurse/);
});

test("forwarded text and a document's contents never reach the extraction call", async () => {
  // Issue 35 item 8: someone else's words are not a memory about the person who shared them.
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "Lovely." }, { text: "Thanks for sharing." }]);
  const own = privateText(uid, "I play the cello on weekends", { name: "Ana" });
  await s.webhook(own);
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the first reply");
  const fwd = privateText(uid, "fwd-marker-4410: Ana owes Mallory 500 EUR and her PIN is 4321", { name: "Ana" });
  fwd.message.forward_origin = { type: "hidden_user", sender_user_name: "Mallory", date: fwd.message.date - 60 };
  await s.webhook(fwd);
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 10_000, "the second reply");
  let extraction;
  s.gemini.script(uid, [(body) => {
    extraction = body;
    return { text: JSON.stringify({ facts: [], episodes: [], commitments: [], commitment_updates: [], aliases: [] }) };
  }]);
  await s.consolidate();
  assert.ok(extraction, "the consolidation call was made");
  const text = extraction.contents[0].parts[0].text;
  assert.match(text, /I play the cello/);
  assert.doesNotMatch(text, /fwd-marker-4410|PIN is 4321/, text);
  assert.match(text, /forwarded message: not this person's words/);
});

test("consolidating again with nothing new changes nothing and calls no model", async () => {
  const uid = uniqueId();
  await s.webhook(privateText(uid, "I live in Lisbon."));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the reply");
  s.gemini.script(uid, [{ text: JSON.stringify({ facts: [{ about_user_id: uid, entity: "me", attribute: "city", value: "Lisbon", source_message_ids: [] }], episodes: [], commitments: [], commitment_updates: [], aliases: [] }) }]);
  await s.consolidate();
  const snapshot = await s.sql("SELECT id, value, confidence, updated_at FROM memories WHERE about_user_id = ? ORDER BY id", uid);
  assert.equal(snapshot.length, 1);
  const calls = consolidations();
  const [{ consolidated_seq }] = await s.sql("SELECT consolidated_seq FROM conversations WHERE conv = ?", String(uid));
  await s.consolidate();
  await s.consolidate();
  assert.equal(consolidations(), calls, "no model call the second and third time");
  assert.deepEqual(await s.sql("SELECT id, value, confidence, updated_at FROM memories WHERE about_user_id = ? ORDER BY id", uid), snapshot);
  assert.equal((await s.sql("SELECT consolidated_seq FROM conversations WHERE conv = ?", String(uid)))[0].consolidated_seq, consolidated_seq);
});

test("search_memory finds what was consolidated", async () => {
  const uid = uniqueId();
  await s.webhook(privateText(uid, "My dog is called Biscuit."));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the reply");
  s.gemini.script(uid, [{ text: JSON.stringify({ facts: [{ about_user_id: uid, entity: "me", attribute: "dog's name", value: "Biscuit" }], episodes: [], commitments: [], commitment_updates: [], aliases: [] }) }]);
  await s.consolidate();
  let found;
  s.gemini.script(uid, [
    { calls: [{ name: "search_memory", args: { query: "dog name" } }] },
    (body) => {
      found = body.contents.at(-1).parts[0].functionResponse.response.results;
      return { text: "Your dog is Biscuit." };
    },
  ]);
  await s.webhook(privateText(uid, "what's my pet called again?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 10_000, "the answer");
  assert.ok(found.some((r) => /Biscuit/.test(r)), JSON.stringify(found));
});

test("a 2,000-message session gets summaries and its prompts stay within the history budget", async () => {
  const uid = uniqueId();
  const conv = String(uid);
  const now = Math.floor(Date.now() / 1000);
  const stmts = [];
  for (let i = 0; i < 2000; i++) {
    const text = `message ${i}: we talked about topic ${i % 37} and the weather was ${["sunny", "rainy", "cloudy"][i % 3]} that day`;
    stmts.push(s.env.DB.prepare(
      `INSERT OR IGNORE INTO messages (conv, chat_id, message_id, role, user_id, name, is_bot, parts, text, date)
       VALUES (?, ?, ?, 'user', ?, 'Long Talker', 0, ?, ?, ?)`,
    ).bind(conv, uid, 500000 + i, uid, JSON.stringify([{ type: "text", text }]), text, now - (2000 - i) * 20));
  }
  // Straight into D1 through the test proxy. Its kept-alive connection may have been closed
  // by the runtime at the moment it is reused ("fetch failed: other side closed", seen when
  // another test file loads the machine): that request never ran, so it is sent again (the
  // inserts ignore rows already there, so a repeat changes nothing).
  for (let i = 0; i < stmts.length; i += 200) {
    for (let attempt = 1; ; attempt++) {
      try {
        await s.env.DB.batch(stmts.slice(i, i + 200));
        break;
      } catch (e) {
        if (attempt >= 3 || !/fetch failed/.test(e.message)) throw e;
        console.log(`# D1 batch at ${i}: ${e.message} (${e.cause?.message ?? e.cause}); sending it again`);
        await sleep(200);
      }
    }
  }
  await s.consolidate();
  const [summary] = await s.sql("SELECT summary, until_seq, messages FROM summaries WHERE conv = ?", conv);
  assert.ok(summary, "a summary was written");
  console.log(`# 2000 messages: summary covers ${summary.messages} messages`);
  assert.ok(summary.messages >= 1000, `summary covers ${summary.messages}`);

  await s.webhook(privateText(uid, "so, where were we?", { name: "Long Talker" }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 15_000, "the reply");
  const req = s.gemini.calls(uid).at(-1);
  const historyChars = req.body.contents.flatMap((c) => c.parts).map((p) => p.text ?? "").join("").length;
  const sys = systemText(req);
  console.log(`# turn after 2000 messages: history ${historyChars} chars (~${Math.round(historyChars / 4)} tokens), system instruction ${sys.length} chars`);
  assert.ok(historyChars / 4 <= 12_000 * 1.1, `history ≈ ${historyChars / 4} tokens`);
  assert.match(sys, /\nsummary: "Summary of \d+ messages/);
  assert.doesNotMatch(sys, /not shown \(over the history budget\)/, "the summary covers everything cut");
  const [turn] = await s.sql("SELECT history_cut_seq FROM turns WHERE chat_id = ?", uid);
  assert.ok(turn.history_cut_seq > 0, "the cut is recorded");
});

test("what is learned in one group is not recalled in another; in the person's private chat it is", async () => {
  const { groupText, mention } = await import("../support/stack.js");
  const groupA = -1000000000000 - uniqueId();
  const groupB = -1000000000000 - uniqueId();
  const uid = uniqueId();
  const t = "@edge_test_bot I'm allergic to peanuts";
  s.gemini.script(uid, [{ calls: [{ name: "remember", args: { content: "allergic to peanuts", about_user_id: uid } }, { name: "send_message", args: { text: "Noted." } }] }]);
  await s.webhook(groupText(groupA, uid, t, { entities: mention(t, "edge_test_bot") }));
  await s.tg.waitFor(() => s.tg.sent(groupA).length === 1, 10_000, "group A reply");
  const t2 = "@edge_test_bot what should I eat?";
  await s.webhook(groupText(groupB, uid, t2, { entities: mention(t2, "edge_test_bot") }));
  await s.tg.waitFor(() => s.tg.sent(groupB).length === 1, 10_000, "group B reply");
  assert.doesNotMatch(systemText(s.gemini.calls(uid).at(-1)), /peanuts/);
  await s.webhook(privateText(uid, "what should I eat?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "private reply");
  assert.match(systemText(s.gemini.calls(uid).at(-1)), /allergic to peanuts/);
});

test("with embeddings configured, a memory full-text search misses is recalled by similarity", async () => {
  const uid = uniqueId();
  // Episodes learned in this chat: "allergic"/"peanuts", where the message will say
  // "allergy"/"peanut" (FTS sees different words; episodes are not among people's memories).
  // One in the JSON form stored before, one as the worker stores them now (q8), and one far
  // from the message (a cosine of 0 under the fake's embedding), which must not come.
  const insert = (text, embedding) =>
    s.env.DB.prepare("INSERT INTO memories (kind, chat_id, conv, value, embedding, created_at, updated_at) VALUES ('episode', ?, ?, ?, ?, 0, 0)")
      .bind(uid, String(uid), text, embedding).run();
  await insert("Peanuts? allergic!", JSON.stringify(embedText("Peanuts? allergic!", 768)));
  await insert("Allergic to peanuts and pollen", q8(embedText("Allergic to peanuts and pollen", 768)));
  await insert("Owns a red bicycle", q8(embedText("Owns a red bicycle", 768)));
  const embedCalls = s.gemini.requests.filter((r) => r.embed).length;
  await s.webhook(privateText(uid, "my peanut allergy"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 10_000, "the reply");
  assert.equal(s.gemini.requests.filter((r) => r.embed).length, embedCalls + 1, "the new messages were embedded");
  const system = systemText(s.gemini.calls(uid).at(-1));
  assert.match(system, /Peanuts\? allergic!/, "the JSON form");
  assert.match(system, /Allergic to peanuts and pollen/, "the q8 form");
  assert.doesNotMatch(system, /red bicycle/, "a memory far from the message is not recalled");
  assert.equal((await s.sql("SELECT COUNT(*) AS n FROM memory_fts WHERE memory_fts MATCH '\"peanut\" OR \"allergy\"' AND chat_id = ?", uid))[0].n, 0, "FTS alone finds nothing");
});

test("a turn reads from D1 only the vectors it has not read before, and recalls what changed since", async () => {
  const uid = uniqueId();
  const insert = async (text) => {
    const r = await s.env.DB.prepare("INSERT INTO memories (kind, chat_id, conv, value, embedding, created_at, updated_at) VALUES ('episode', ?, ?, ?, ?, 0, 0) RETURNING id")
      .bind(uid, String(uid), text, q8(embedText(text, 768))).first();
    return r.id;
  };
  // 40 memories far from the messages (about a kilobyte of vector each) and one close to them.
  for (let k = 0; k < 40; k++) await insert(`Went hiking on trail number ${k} in the hills`);
  const first = await insert("Allergic to cashews and pollen");
  /** One message and its reply: the system prompt and the bytes of D1 rows its turn read. */
  const turn = async (text) => {
    const from = s.logs().length;
    const sent = s.tg.sent(uid).length;
    await s.webhook(privateText(uid, text));
    await s.tg.waitFor(() => s.tg.sent(uid).length === sent + 1, 10_000, "the reply");
    await sleep(100);
    const lines = s.logs().slice(from).map((l) => String(l.message ?? l)).filter((m) => m.startsWith("metrics ")).map((m) => JSON.parse(m.slice(8)));
    const alarms = lines.filter((l) => l.kind.startsWith("alarm"));
    assert.ok(alarms.length > 0, "the turn ran in an alarm");
    return { system: systemText(s.gemini.calls(uid).at(-1)), bytes: alarms.reduce((n, l) => n + l.rows_bytes, 0) };
  };
  const one = await turn("my cashew allergy");
  assert.match(one.system, /Allergic to cashews and pollen/);
  assert.ok(one.bytes > 40_000, `the first turn read the 41 vectors: ${one.bytes} bytes`);

  const two = await turn("that cashew allergy again");
  assert.match(two.system, /Allergic to cashews and pollen/, "recalled from the vectors kept");
  assert.ok(two.bytes < one.bytes - 35_000, `the second turn did not read them again: ${two.bytes} bytes after ${one.bytes}`);

  // Forgotten and learned since: the kept vectors do not bring back the one erased, and the new
  // one is read (only it).
  await s.env.DB.prepare("DELETE FROM memories WHERE id = ?").bind(first).run();
  await insert("Allergic to cashews, the doctor said");
  const three = await turn("cashew allergy, once more");
  assert.doesNotMatch(three.system, /Allergic to cashews and pollen/, "a memory erased since is not recalled");
  assert.match(three.system, /Allergic to cashews, the doctor said/, "a memory learned since is");
  assert.ok(three.bytes < one.bytes - 35_000, `only the new vector was read: ${three.bytes} bytes`);
});
