// Answering fast (issue 19): a visible sign at once, the adaptive debounce, the answer streamed
// from Gemini (streamGenerateContent, SSE) into a private chat as sendMessageDraft updates, then
// the final message through the outbox, exactly once. The fake Gemini streams every answer over
// two seconds. Orders and generous bounds here; the precise figures are in `npm run bench`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, groupText, mention, reaction, uniqueId, sleep } from "../support/stack.js";

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
const finalSent = (chat) => s.tg.calls("sendMessage", chat).filter((r) => r.text !== undefined);

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
  await s.tg.waitFor(() => finalSent(uid).length === 1, 20_000, "the final message");
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
  assert.ok(texts.every((r) => r.body.parse_mode === "HTML" && r.body.draft_id === sign.body.draft_id), "one draft id, HTML");
  for (let i = 1; i < texts.length; i++) assert.ok(texts[i].draft.length >= texts[i - 1].draft.length, "drafts only grow");
  assert.ok(texts.every((r) => r.draft.length <= 4096));
  assert.equal(drafts(uid).filter((r) => r.fault).length, 0, "every draft was valid for Telegram");
  // Drafts are paced: never two within the interval (300 ms here), give or take the clock.
  for (let i = 1; i < texts.length; i++) assert.ok(texts[i].at - texts[i - 1].at >= 250, "drafts are paced");

  const final = finalSent(uid);
  assert.equal(final.length, 1, "exactly one final message");
  assert.equal(final[0].text, "Here is the plan for today: first we walk to the market, then we cook soup together, and at the end we rest in the garden with a cup of tea.");
  assert.ok(final[0].at > texts.at(-1).at, "the final message comes after the drafts");
  const outbox = await s.sql("SELECT status FROM outbox WHERE chat_id = ?", uid);
  assert.deepEqual(outbox.map((r) => r.status), ["sent"], "the final message went through the outbox");
  const [turn] = await s.sql("SELECT subrequests FROM turns WHERE chat_id = ?", uid);
  assert.ok(turn.subrequests <= 30, `drafts keep the turn well inside the 50-subrequest limit (${turn.subrequests})`);
});

test("a five-message burst: one sign, one model call, one final message", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "One answer to all five." }]);
  for (let i = 0; i < 5; i++) {
    await post(privateText(uid, `part ${i + 1} of my story`));
    await sleep(100);
  }
  await s.tg.waitFor(() => finalSent(uid).length === 1, 20_000, "the final message");
  await sleep(1500);
  assert.equal(s.gemini.calls(uid).length, 1, "one model call for the burst");
  const call = s.gemini.calls(uid)[0];
  assert.match(JSON.stringify(call.body.contents), /part 5 of my story/, "the call saw the whole burst");
  const signs = accepted(uid).filter((r) => r.draft === "" && r.at < call.at);
  assert.equal(signs.length, 1, "one visible sign for the burst, not one per message");
  assert.equal(finalSent(uid).length, 1);
});

test("a draft refused with 429 ends the drafts; the final message still comes, once", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: ANSWER }]);
  // The sign passes; the first text draft gets 429.
  s.tg.fault({ method: "sendMessageDraft", chatId: uid, skip: 1, status: 429, retry_after: 5 });
  await post(privateText(uid, "tell me the plan"));
  await s.tg.waitFor(() => finalSent(uid).length === 1, 20_000, "the final message");
  await sleep(500);
  const all = drafts(uid);
  assert.equal(all[1].fault, 429);
  assert.equal(all.length, 2, "no draft after the refused one (no loop, no retry)");
  assert.equal(finalSent(uid).length, 1);
  assert.equal(s.gemini.calls(uid).length, 1);
});

test("the final send refused with 429 is retried through the outbox: one message, none lost", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "A short answer.", streamMs: 300 }]);
  s.tg.fault({ method: "sendMessage", chatId: uid, status: 429, retry_after: 1 });
  await post(privateText(uid, "hello"));
  await s.tg.waitFor(() => finalSent(uid).length === 1, 30_000, "the final message after the 429");
  await sleep(2500);
  assert.equal(s.tg.calls("sendMessage", uid).filter((r) => r.fault === 429).length, 1);
  assert.deepEqual(finalSent(uid).map((r) => r.text), ["A short answer."]);
  assert.equal(s.gemini.calls(uid).length, 1, "the model is not asked again");
});

test("a group gets the typing action and the final message, never a draft", async () => {
  const chat = -1000000000000 - uniqueId();
  const uid = uniqueId();
  const t = "@edge_test_bot what now?";
  s.gemini.script(uid, [{ text: "In a group: no drafts." }]);
  await post(groupText(chat, uid, t, { entities: mention(t, "edge_test_bot") }));
  await s.tg.waitFor(() => finalSent(chat).length === 1, 20_000, "the group reply");
  const call = s.gemini.calls(uid)[0];
  assert.equal(call.stream, false, "a group's answer is not streamed");
  assert.equal(drafts(chat).length, 0);
  const typing = s.tg.calls("sendChatAction", chat);
  assert.ok(typing.length >= 1 && typing[0].at < call.at, "typing shows before the model is asked");
});

test("a new message while the answer streams cancels the draft; the replanned answer is the only message", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: ANSWER, streamMs: 3000 }, { text: "The answer to both messages." }]);
  await post(privateText(uid, "first question"));
  await s.tg.waitFor(() => accepted(uid).some((r) => r.draft !== ""), 20_000, "a streamed draft");
  await post(privateText(uid, "oh, and a second one"));
  await s.tg.waitFor(() => finalSent(uid).length === 1, 30_000, "the replanned answer");
  await sleep(1000);
  assert.equal(s.gemini.calls(uid).length, 2, "the stale answer was replanned once");
  assert.deepEqual(finalSent(uid).map((r) => r.text), ["The answer to both messages."], "no half answer left as a message");
  const first = s.gemini.calls(uid)[0];
  const afterCancel = accepted(uid).filter((r) => r.at > first.at && r.at < s.gemini.calls(uid)[1].at);
  assert.equal(afterCancel.at(-1).draft, "", "the half answer was taken down (the placeholder again)");
  const turns = await s.sql("SELECT status FROM turns WHERE chat_id = ? ORDER BY created_at", uid);
  assert.deepEqual(turns.map((t) => t.status), ["stale", "done"]);
});

test("a reaction (which may be left unanswered on purpose) gets typing, never the lingering placeholder", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "Hello!", streamMs: 200 }, { finishReason: "STOP" }]);
  await post(privateText(uid, "hi"));
  await s.tg.waitFor(() => finalSent(uid).length === 1, 20_000, "the first answer");
  await sleep(300);
  const botMessage = (await s.sql("SELECT message_id FROM messages WHERE chat_id = ? AND role = 'bot'", uid))[0].message_id;
  const before = drafts(uid).length;
  await post(reaction(uid, uid, botMessage, "👍"));
  await s.gemini.waitFor(() => s.gemini.calls(uid).length === 2, 20_000, "the reaction's turn");
  await sleep(1000);
  assert.equal(drafts(uid).length, before, "no draft for the reaction");
  assert.ok(s.tg.calls("sendChatAction", uid).some((r) => r.at < s.gemini.calls(uid)[1].at), "typing shows at once");
  assert.equal(finalSent(uid).length, 1, "silence on purpose");
});

test("an instance reset while the answer streams: one final message, nothing lost, nothing twice", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: ANSWER, streamMs: 4000 }, { text: "Both questions, answered once." }]);
  await post(privateText(uid, "first question"));
  await s.tg.waitFor(() => accepted(uid).some((r) => r.draft !== ""), 20_000, "a streamed draft");
  await s.restart(); // the instance streaming the answer dies; storage stays
  await post(privateText(uid, "second question"));
  await s.tg.waitFor(() => finalSent(uid).length === 1, 30_000, "the answer after the reset");
  await sleep(5000);
  assert.deepEqual(finalSent(uid).map((r) => r.text), ["Both questions, answered once."], "exactly one final message, not the cut-off one");
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
  await post(privateText(a, "hello"));
  await s.tg.waitFor(() => finalSent(a).length === 1, 20_000, "a's answer");
  assert.equal(drafts(a).length, 1, "only the refused placeholder");
  assert.ok(s.tg.calls("sendChatAction", a).length >= 1, "typing instead");
  await post(privateText(b, "hello too"));
  await s.tg.waitFor(() => finalSent(b).length === 1, 20_000, "b's answer");
  assert.equal(drafts(b).length, 0, "no draft is tried for the next chat");
  assert.ok(s.tg.calls("sendChatAction", b)[0].at < s.gemini.calls(b)[0].at, "its first sign is typing");
  assert.equal(s.gemini.calls(b)[0].stream, false, "without drafts the answer is not streamed");
  assert.deepEqual(finalSent(b).map((r) => r.text), ["Second."]);
});
