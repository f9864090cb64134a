// Answering fast (issue 19): a visible sign at once, the adaptive debounce, the answer streamed
// from Gemini (streamGenerateContent, SSE) into a private chat as sendMessageDraft updates, then
// the final message through the outbox, exactly once. The fake Gemini streams every answer over
// two seconds. Orders and generous bounds here; the precise figures are in `npm run bench`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, groupText, mention, reaction, uniqueId, sleep, LONG_PARAGRAPHS, LONG } from "../support/stack.js";

let s;
before(async () => {
  // No DEBOUNCE_MS: the adaptive debounce, as deployed by default.
  s = await startStack({ vars: { DEBOUNCE_MS: "", DRAFT_INTERVAL_MS: "300" } });
  s.gemini.streamMs = 2000;
});
after(async () => {
  await s?.close();
});

const ANSWER = "Here is **the plan** for today: first we *walk* to the market, then we cook `soup` together, and at the end we rest in the garden with a cup of tea.";
const drafts = (chat) => s.tg.calls("sendMessageDraft", chat);
const accepted = (chat) => drafts(chat).filter((r) => r.draft !== undefined);

/** Posts an update and returns when the webhook answered. */
async function post(update) {
  const r = await s.webhook(update);
  assert.equal(r.status, 200);
  return Date.now();
}

test("a single private message: the sign at once, the answer streaming in, then one final message", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: ANSWER }]);
  const answered = await post(privateText(uid, "what shall we do today?"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 1, 20_000, "the final message");
  await sleep(300);

  const call = s.gemini.calls(uid)[0];
  assert.equal(s.gemini.calls(uid).length, 1, "one model call");
  assert.equal(call.path, "/v1beta/models/gemini-3.8-flash:streamGenerateContent");
  assert.equal(call.query, "?alt=sse");

  const all = accepted(uid);
  const sign = all[0];
  assert.equal(sign.draft, "", "the first sign is the empty draft (Telegram shows Thinking…)");
  assert.ok(sign.at < call.at, "the sign comes before the model is even asked");
  assert.ok(sign.at - answered < 2000, `the sign came ${sign.at - answered} ms after the webhook's answer`);

  const texts = all.filter((r) => r.draft !== "");
  assert.ok(texts.length >= 2, `the answer streamed in several drafts (${texts.length})`);
  assert.ok(texts[0].at < call.chunks.at(-1), "the first text was shown before the model had finished");
  // The turn's drafts share the turn's own id (a Stop names it: stop.test.js), not the
  // placeholder's, which came before the turn existed.
  assert.ok(texts.every((r) => r.body.parse_mode === "HTML" && r.body.draft_id === texts[0].body.draft_id), "one draft id, HTML");
  assert.notEqual(texts[0].body.draft_id, sign.body.draft_id);
  for (let i = 1; i < texts.length; i++) assert.ok(texts[i].draft.length >= texts[i - 1].draft.length, "drafts only grow");
  assert.ok(texts.every((r) => r.draft.length <= 4096));
  assert.equal(drafts(uid).filter((r) => r.fault).length, 0, "every draft was valid for Telegram");
  // Drafts are paced: never two within the interval (300 ms here), give or take the clock.
  for (let i = 1; i < texts.length; i++) assert.ok(texts[i].at - texts[i - 1].at >= 250, "drafts are paced");

  const final = s.finalSent(uid);
  assert.equal(final.length, 1, "exactly one final message");
  assert.equal(final[0].text, "Here is the plan for today: first we walk to the market, then we cook soup together, and at the end we rest in the garden with a cup of tea.");
  assert.ok(final[0].at > texts.at(-1).at, "the final message comes after the drafts");
  const outbox = await s.sql("SELECT status FROM sends WHERE chat_id = ?", uid);
  assert.deepEqual(outbox.map((r) => r.status), ["sent"], "the final message went through the outbox");
  const [turn] = await s.sql("SELECT subrequests FROM turns WHERE chat_id = ?", uid);
  assert.ok(turn.subrequests <= 30, `drafts keep the turn well inside the 50-subrequest limit (${turn.subrequests})`);
});

test("a link the model writes is plain text in every draft; the final message links it with the preview off", async () => {
  // Issue 35 item 10: drafts go out before the end-of-turn link check.
  const uid = uniqueId();
  const text = `See [the report](https://attacker.example/?q=SECRET) first. ${ANSWER}`;
  s.gemini.script(uid, [{ text }]);
  await post(privateText(uid, "anything new?"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 1, 20_000, "the final message");
  const shown = accepted(uid).filter((r) => r.draft !== "");
  assert.ok(shown.some((r) => r.draft.includes("the report")), `the link's text was drafted: ${JSON.stringify(drafts(uid).map((r) => r.body.text))}`);
  for (const r of shown) assert.ok(!/<a\b|href/i.test(r.body.text ?? r.draft), `no link in a draft: ${r.body.text}`);
  const final = s.tg.calls("sendMessage", uid).filter((r) => r.text !== undefined).at(-1);
  assert.match(final.body.text, /href="https:\/\/attacker\.example/);
  assert.equal(final.body.link_preview_options?.is_disabled, true, "a link no person posted goes out without a preview");
});

test("a five-message burst: one sign, one answer (at most one abandoned early start), one final message", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "One answer to all five." }]);
  for (let i = 0; i < 5; i++) {
    await post(privateText(uid, `part ${i + 1} of my story`));
    await sleep(100);
  }
  await s.tg.waitFor(() => s.finalSent(uid).length === 1, 20_000, "the final message");
  await sleep(1500);
  const calls = s.gemini.calls(uid);
  assert.ok(calls.length <= 2, `one answer for the burst, at most one abandoned early start: ${calls.length} calls`);
  const call = calls.at(-1);
  assert.match(JSON.stringify(call.body.contents), /part 5 of my story/, "the call saw the whole burst");
  const signs = accepted(uid).filter((r) => r.draft === "" && r.at < calls[0].at);
  assert.equal(signs.length, 1, "one visible sign for the burst, not one per message");
  assert.equal(s.finalSent(uid).length, 1);
});

test("a draft refused with 429 ends the drafts; the final message still comes, once", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: ANSWER }]);
  // The sign passes; the first text draft gets 429.
  s.tg.fault({ method: "sendMessageDraft", chatId: uid, skip: 1, status: 429, retry_after: 5 });
  await post(privateText(uid, "tell me the plan"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 1, 20_000, "the final message");
  await sleep(500);
  const all = drafts(uid);
  assert.equal(all[1].fault, 429);
  assert.equal(all.length, 2, "no draft after the refused one (no loop, no retry)");
  assert.equal(s.finalSent(uid).length, 1);
  assert.equal(s.gemini.calls(uid).length, 1);
});

test("the final send refused with 429 is retried through the outbox: one message, none lost", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "A short answer.", streamMs: 300 }]);
  s.tg.fault({ method: "sendMessage", chatId: uid, status: 429, retry_after: 1 });
  await post(privateText(uid, "hello"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 1, 30_000, "the final message after the 429");
  await sleep(2500);
  assert.equal(s.tg.calls("sendMessage", uid).filter((r) => r.fault === 429).length, 1);
  assert.deepEqual(s.finalSent(uid).map((r) => r.text), ["A short answer."]);
  assert.equal(s.gemini.calls(uid).length, 1, "the model is not asked again");
});

test("a group gets the typing action and the final message, never a draft", async () => {
  const chat = -1000000000000 - uniqueId();
  const uid = uniqueId();
  const t = "@edge_test_bot what now?";
  s.gemini.script(uid, [{ text: "In a group: no drafts." }]);
  await post(groupText(chat, uid, t, { entities: mention(t, "edge_test_bot") }));
  await s.tg.waitFor(() => s.finalSent(chat).length === 1, 20_000, "the group reply");
  const call = s.gemini.calls(uid)[0];
  assert.equal(call.stream, false, "a group's answer is not streamed");
  assert.equal(drafts(chat).length, 0);
  const typing = s.tg.calls("sendChatAction", chat);
  assert.ok(typing.length >= 1 && typing[0].at < call.at, "typing shows before the model is asked");
});

test("a non-streamed answer over the 4 MiB cap fails like a broken connection: retried, and nothing of it is sent", async () => {
  const chat = -1000000000000 - uniqueId();
  const uid = uniqueId();
  const t = "@edge_test_bot tell me everything";
  const huge = { candidates: [{ content: { role: "model", parts: [{ text: "x".repeat(5 * 1024 * 1024) }] }, finishReason: "STOP", index: 0 }] };
  s.gemini.script(uid, [{ raw: huge }, { text: "The short version." }]);
  await post(groupText(chat, uid, t, { entities: mention(t, "edge_test_bot") }));
  await s.tg.waitFor(() => s.finalSent(chat).length === 1, 60_000, "the group reply");
  await sleep(500);
  assert.equal(s.gemini.calls(uid).length, 2, "the oversized answer is retried once");
  // The first answer was never read whole: its call is recorded as failed at the cap (read
  // whole, it used to be taken as an answer and cut down afterwards).
  const calls = await s.sql("SELECT status, error FROM calls WHERE chat_id = ? ORDER BY created_at, n", chat);
  assert.equal(calls.length, 2, JSON.stringify(calls).slice(0, 300));
  assert.match(calls[0].error ?? "", /over 4194304 bytes/);
  assert.equal(calls[1].status, 200);
  assert.deepEqual(s.finalSent(chat).map((m) => m.text ?? m), ["The short version."]);
  assert.ok(!s.tg.requests.some((r) => r.body?.chat_id === chat && /xxxxxxxxxx/.test(r.body?.text ?? "")), "no part of the oversized answer reaches the chat");
});

test("a new message while the answer streams cancels the draft; the replanned answer is the only message", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: ANSWER, streamMs: 3000 }, { text: "The answer to both messages." }]);
  await post(privateText(uid, "first question"));
  await s.tg.waitFor(() => accepted(uid).some((r) => r.draft !== ""), 20_000, "a streamed draft");
  await post(privateText(uid, "oh, and a second one"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 1, 30_000, "the replanned answer");
  await sleep(1000);
  assert.equal(s.gemini.calls(uid).length, 2, "the stale answer was replanned once");
  assert.deepEqual(s.finalSent(uid).map((r) => r.text), ["The answer to both messages."], "no half answer left as a message");
  const first = s.gemini.calls(uid)[0];
  const afterCancel = accepted(uid).filter((r) => r.at > first.at && r.at < s.gemini.calls(uid)[1].at);
  assert.equal(afterCancel.at(-1).draft, "", "the half answer was taken down (the placeholder again)");
  const turns = await s.sql("SELECT status FROM turns WHERE chat_id = ? ORDER BY created_at", uid);
  assert.deepEqual(turns.map((t) => t.status), ["stale", "done"]);
});

// A long answer (about 9,500 characters, three Telegram messages): paragraphs with bold, as
// models write. `LONG_PLAIN` is how it reads once rendered.
const LONG_PLAIN = LONG_PARAGRAPHS.map((p) => p.replaceAll("**", "")).join("\n\n");

/** The final messages of a long answer: each at most 4096 characters, valid for Telegram
 *  (none refused), none twice, and together exactly the answer. */
function assertWhole(uid, count) {
  const sent = s.finalSent(uid);
  assert.equal(sent.length, count, `${count} messages`);
  assert.ok(sent.every((r) => [...r.text].length <= 4096), "every message within 4096 characters");
  assert.equal(new Set(sent.map((r) => r.text)).size, sent.length, "no chunk twice");
  assert.equal(sent.map((r) => r.text).join("\n\n"), LONG_PLAIN, "the messages are the whole answer, in order");
  assert.ok(sent.every((r) => r.body.parse_mode === "HTML"), "sent as HTML, never the plain-text fallback");
  return sent;
}

test("a long answer: its first chunk is a message before the stream ends, the rest streams as the draft; every chunk once", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: LONG, streamMs: 3000 }]);
  await post(privateText(uid, "tell me everything"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 3, 30_000, "the three messages");
  await sleep(1000);
  const sent = assertWhole(uid, 3);
  const call = s.gemini.calls(uid)[0];
  assert.equal(s.gemini.calls(uid).length, 1);
  assert.ok(sent[0].at < call.chunks.at(-1), `the first chunk went out ${call.chunks.at(-1) - sent[0].at} ms before the stream ended`);
  // After the first chunk went out, the draft shows the rest, not the chunk already sent.
  const later = accepted(uid).filter((r) => r.at > sent[0].at && r.draft !== "");
  assert.ok(later.length >= 1, "the rest streamed as the draft");
  assert.ok(later.every((r) => !r.draft.includes("Paragraph 1 of") && r.draft.length <= 4096), "the draft is the chunk being written");
  assert.equal(s.tg.calls("sendMessage", uid).filter((r) => r.fault).length, 0, "Telegram refused nothing");
  // One outbox row per chunk, under the keys the plan's delivery uses (step 0, chunks 0..2).
  const [turn] = await s.sql("SELECT turn_id AS id, status FROM turns WHERE chat_id = ?", uid);
  assert.equal(turn.status, "done");
  const rows = await s.sql("SELECT key, status FROM sends WHERE chat_id = ? ORDER BY key", uid);
  assert.deepEqual(rows, [0, 1, 2].map((i) => ({ key: `${turn.id}/0/${i}`, status: "sent" })));
  const bot = await s.sql("SELECT message_id FROM history WHERE chat_id = ? AND role = 'bot'", uid);
  assert.equal(new Set(bot.map((m) => m.message_id)).size, 3, "each chunk is in history once");
});

test("the early chunk refused with 429: no loop, the plan sends it with the rest; every chunk once", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: LONG, streamMs: 3000 }]);
  s.tg.fault({ method: "sendMessage", chatId: uid, status: 429, retry_after: 1 });
  await post(privateText(uid, "tell me everything"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 3, 40_000, "the three messages");
  await sleep(2500);
  const call = s.gemini.calls(uid)[0];
  const refused = s.tg.calls("sendMessage", uid).filter((r) => r.fault === 429);
  assert.equal(refused.length, 1, "one refusal");
  assert.ok(refused[0].at < call.chunks.at(-1), "it was the chunk sent while the answer streamed");
  assert.equal(s.tg.calls("sendMessage", uid).length, 4, "no chunk tried again while streaming: three sends and the refused one");
  assertWhole(uid, 3);
  assert.equal(s.gemini.calls(uid).length, 1, "the model is not asked again");
});

test("a newer message after a chunk went out: the answer is finished, whole; the newer message gets its own turn after it", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: LONG, streamMs: 4000 }, { text: "And your second question, answered on its own." }]);
  await post(privateText(uid, "tell me everything"));
  await s.tg.waitFor(() => s.finalSent(uid).length >= 1, 30_000, "the first chunk");
  const posted = await post(privateText(uid, "oh, and a second question"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 4, 40_000, "the whole answer, then the second one");
  await sleep(1000);
  const first = s.gemini.calls(uid)[0];
  assert.ok(posted < first.chunks.at(-1), "the newer message came while the answer still streamed");
  const sent = s.finalSent(uid);
  assert.equal(sent.at(-1).text, "And your second question, answered on its own.");
  assert.equal(sent.slice(0, 3).map((r) => r.text).join("\n\n"), LONG_PLAIN, "no half answer: the first answer is whole");
  assert.equal(new Set(sent.map((r) => r.text)).size, 4, "nothing twice");
  assert.equal(s.gemini.calls(uid).length, 2, "the committed answer was not replanned; the newer message got its own call");
  assert.ok(s.gemini.calls(uid)[1].at > sent[2].at, "after the first answer was delivered");
  assert.match(JSON.stringify(s.gemini.calls(uid)[1].body.contents), /a second question/);
  const turns = await s.sql("SELECT status FROM turns WHERE chat_id = ? ORDER BY created_at", uid);
  assert.deepEqual(turns.map((t) => t.status), ["done", "done"], "no stale turn");
});

test("an instance reset after a chunk went out: the retried turn's new answer comes whole, the early chunk is not sent again", async () => {
  const uid = uniqueId();
  const other = LONG_PARAGRAPHS.map((p) => p.replace("Paragraph", "Section"));
  const otherPlain = other.map((p) => p.replaceAll("**", "")).join("\n\n");
  s.gemini.script(uid, [{ text: LONG, streamMs: 6000 }, { text: other.join("\n\n"), streamMs: 500 }, { text: "The second question, on its own." }]);
  await post(privateText(uid, "tell me everything"));
  await s.tg.waitFor(() => s.finalSent(uid).length >= 1, 30_000, "the first chunk");
  await s.restart(); // the instance streaming the answer dies; storage (and the commit) stays
  await post(privateText(uid, "and a second question"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 5, 40_000, "the new answer, then the second one");
  await sleep(1500);
  const texts = s.finalSent(uid).map((r) => r.text);
  assert.ok(texts[0].startsWith("Paragraph 1 of"), "the early chunk of the cut answer, sent once");
  assert.equal(texts.slice(1, 4).join("\n\n"), otherPlain, "then the retried turn's answer, whole, not mixed with the cut one");
  assert.equal(texts[4], "The second question, on its own.", "the newer message's own turn comes after");
  assert.equal(new Set(texts).size, 5, "nothing twice");
  assert.equal(s.gemini.calls(uid).length, 3);
  assert.doesNotMatch(JSON.stringify(s.gemini.calls(uid)[1].body.contents), /a second question/, "the committed turn did not take the newer message in");
  const keys = (await s.sql("SELECT key FROM sends WHERE chat_id = ? AND status = 'sent'", uid)).map((r) => r.key.split("/").slice(-2).join("/"));
  assert.deepEqual(keys.filter((k) => k.startsWith("0/")).sort(), ["0/0", "0/0", "0/0r", "0/1", "0/2"], "the new first chunk went under the replacement key");
});

test("a reaction (which may be left unanswered on purpose) gets typing, never the lingering placeholder", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "Hello!", streamMs: 200 }, { finishReason: "STOP" }]);
  await post(privateText(uid, "hi"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 1, 20_000, "the first answer");
  await sleep(300);
  const botMessage = (await s.sql("SELECT message_id FROM history WHERE chat_id = ? AND role = 'bot'", uid))[0].message_id;
  const before = drafts(uid).length;
  await post(reaction(uid, uid, botMessage, "👍"));
  await s.gemini.waitFor(() => s.gemini.calls(uid).length === 2, 20_000, "the reaction's turn");
  await sleep(1000);
  assert.equal(drafts(uid).length, before, "no draft for the reaction");
  assert.ok(s.tg.calls("sendChatAction", uid).some((r) => r.at < s.gemini.calls(uid)[1].at), "typing shows at once");
  assert.equal(s.finalSent(uid).length, 1, "silence on purpose");
});

test("an instance reset while the answer streams: one final message, nothing lost, nothing twice", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: ANSWER, streamMs: 4000 }, { text: "Both questions, answered once." }]);
  await post(privateText(uid, "first question"));
  await s.tg.waitFor(() => accepted(uid).some((r) => r.draft !== ""), 20_000, "a streamed draft");
  await s.restart(); // the instance streaming the answer dies; storage stays
  await post(privateText(uid, "second question"));
  await s.tg.waitFor(() => s.finalSent(uid).length === 1, 30_000, "the answer after the reset");
  await sleep(5000);
  assert.deepEqual(s.finalSent(uid).map((r) => r.text), ["Both questions, answered once."], "exactly one final message, not the cut-off one");
  assert.equal(s.gemini.calls(uid).length, 2);
  const text = JSON.stringify(s.gemini.calls(uid)[1].body.contents);
  assert.match(text, /first question/);
  assert.match(text, /second question/);
});

// Last in this file: it turns drafts off in the worker's isolate for ten minutes.
test("drafts refused as a method (400) turn off for a while: typing and the final message only, no draft per turn", async () => {
  const a = uniqueId();
  const b = uniqueId();
  s.gemini.script(a, [{ text: "First.", streamMs: 200 }]);
  s.gemini.script(b, [{ text: "Second.", streamMs: 200 }]);
  s.tg.fault({ method: "sendMessageDraft", chatId: a, status: 400, description: "Bad Request: method is not available for this bot" });
  // The placeholder is still at Telegram while the early start streams its answer (the race
  // forced): the turn's drafts wait for it (`SIGN_IN_FLIGHT`), so only one refused draft is paid.
  s.tg.delay({ method: "sendMessageDraft", chatId: a, ms: 1200 });
  await post(privateText(a, "hello"));
  await s.tg.waitFor(() => s.finalSent(a).length === 1, 20_000, "a's answer");
  assert.ok(s.gemini.calls(a)[0].chunks.at(-1) < drafts(a)[0].at + 1200, "the answer streamed while the placeholder was at Telegram");
  assert.equal(drafts(a).length, 1, "only the placeholder: the turn's drafts waited for it");
  await s.tg.waitFor(() => drafts(a)[0].fault === 400, 5000, "the placeholder refused");
  // The bot read the refusal (drafts off in the isolate) when it falls back to typing.
  const refusedAt = Date.now();
  await s.tg.waitFor(() => s.tg.calls("sendChatAction", a).some((c) => c.at >= refusedAt), 5000, "typing after the refused placeholder");
  assert.ok(s.tg.calls("sendChatAction", a).length >= 1, "typing instead");
  await post(privateText(b, "hello too"));
  await s.tg.waitFor(() => s.finalSent(b).length === 1, 20_000, "b's answer");
  assert.equal(drafts(b).length, 0, "no draft is tried for the next chat");
  assert.ok(s.tg.calls("sendChatAction", b)[0].at < s.gemini.calls(b)[0].at, "its first sign is typing");
  assert.equal(s.gemini.calls(b)[0].stream, false, "without drafts the answer is not streamed");
  assert.deepEqual(s.finalSent(b).map((r) => r.text), ["Second."]);
});
