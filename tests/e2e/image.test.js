// Pictures the bot makes (generate_image, issue 39): the image model's bytes go out with
// sendPhoto as an uploaded file, once; a person's photo to edit reaches the image model as its
// bytes; a retried step sends the stored picture without making it again; over the daily limit
// and on a safety refusal the chat gets one short line; the next turn sees the picture in
// history with its description; the call is priced with its image tokens.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { startStack, privateText, groupText, mention, uniqueId, messageId, updateId, sleep, ROOT } from "../support/stack.js";
import { requestText, IMAGE_TOKENS } from "../support/fake-gemini.js";
import { makePng } from "../../tools/png.js";

const SAFETY_LINE = "I can't make that picture: the image model declined it under its safety rules. You could describe it differently.";
const PERSON_LIMIT_LINE = "You've reached today's picture limit; you can ask for more pictures tomorrow (UTC).";

let s;
before(async () => {
  s = await startStack({ vars: { IMAGE_MODEL: "on", IMAGE_DAILY_LIMIT: "3", IMAGE_CHAT_DAILY_LIMIT: "10" } });
});
after(async () => {
  await s?.close();
});

const draw = (prompt, extra = {}) => ({ text: "Coming up.", calls: [{ name: "generate_image", args: { prompt, ...extra } }] });
const photos = (uid) => s.tg.calls("sendPhoto", uid).filter((r) => r.photo);

test("a request for a picture sends one photo made from the image model's bytes, with its caption, priced by its image tokens", async () => {
  const uid = uniqueId();
  const png = makePng(80, 60, 7);
  s.gemini.script(uid, [draw("a red fox in the snow")]);
  s.gemini.scriptImage([{ png, caption: "A red fox." }]);
  const before = s.gemini.imageCalls().length;
  await s.webhook(privateText(uid, "draw me a red fox in the snow"));
  await s.tg.waitFor(() => photos(uid).length === 1, 20_000, "the photo");
  await sleep(1500);
  const [sent] = photos(uid);
  assert.deepEqual(sent.photo.bytes, png, "the image model's bytes, uploaded as they came");
  assert.equal(sent.photo.caption, "A red fox.");
  assert.equal(sent.photo.contentType, "image/png");
  assert.equal(s.tg.calls("sendPhoto", uid).length, 1);
  assert.equal(s.tg.sent(uid).filter((t) => t.includes("Coming up")).length, 1);
  // One image call, with the prompt and no tools (nothing it is given can reach a URL).
  const calls = s.gemini.imageCalls().slice(before);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].model, "gemini-nano-banana-2.1");
  assert.equal(calls[0].body.tools, undefined);
  assert.equal(calls[0].body.contents[0].parts.at(-1).text, "a red fox in the snow");
  const [call] = await s.sql("SELECT purpose, image_tokens, candidates_tokens FROM calls WHERE chat_id = ? AND purpose = 'image'", uid);
  assert.equal(call.image_tokens, IMAGE_TOKENS);
  const costs = await s.api("GET", "costs?period=today");
  const row = costs.json.rows.find((r) => r.chat_id === uid && r.model === "gemini-nano-banana-2.1");
  assert.equal(row.image_tokens, IMAGE_TOKENS);
  // $30 per million image tokens, $7.50 per million other output tokens, $1.50 input.
  const want = (IMAGE_TOKENS * 30 + (call.candidates_tokens - IMAGE_TOKENS) * 7.5 + row.prompt_tokens * 1.5) / 1e6;
  assert.ok(Math.abs(row.cost_usd - want) < 1e-9, `${row.cost_usd} vs ${want}`);
});

test("the next turn sees the sent picture in history, described by its prompt, and can edit it", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [draw("a lighthouse at dusk")]);
  await s.webhook(privateText(uid, "draw a lighthouse"));
  await s.tg.waitFor(() => photos(uid).length === 1, 20_000, "the first photo");
  await sleep(1000);
  const [row] = await s.sql("SELECT message_id, role, parts FROM history WHERE chat_id = ? AND role = 'bot' AND parts LIKE '%photo%'", uid);
  assert.ok(row, "the picture is stored as the bot's photo message");
  const part = JSON.parse(row.parts).find((p) => p.kind === "photo");
  assert.match(part.detail, /a picture the bot made: a lighthouse at dusk/);
  assert.ok(part.file_id, "with Telegram's file id");
  const first = photos(uid)[0];
  s.gemini.script(uid, [draw("the same lighthouse, brighter", { photo_message_ids: [row.message_id] })]);
  const before = s.gemini.imageCalls().length;
  await s.webhook(privateText(uid, "make it brighter"));
  await s.tg.waitFor(() => photos(uid).length === 2, 20_000, "the second photo");
  // The bot's turn replays as it was: the picture's prompt in its call, the photo's message id
  // in the call's answer.
  const turn = s.gemini.calls(uid).filter((r) => !r.image).at(-1);
  const parts = turn.body.contents.flatMap((c) => c.parts);
  const call = parts.find((p) => p.functionCall?.name === "generate_image");
  assert.equal(call.functionCall.args.prompt, "a lighthouse at dusk", "the history shows what the bot drew");
  const response = parts.find((p) => p.functionResponse?.name === "generate_image");
  assert.deepEqual(response.functionResponse.response.message_ids, [row.message_id], "and which message it is");
  // The edit sends the bot's own picture (as Telegram keeps it) to the image model.
  const edit = s.gemini.imageCalls().slice(before)[0];
  const inline = edit.body.contents[0].parts.filter((p) => p.inlineData);
  assert.equal(inline.length, 1);
  assert.deepEqual(Buffer.from(inline[0].inlineData.data, "base64"), first.photo.bytes);
  // Consolidation reads the bot's photo as its description.
  await s.consolidate();
  const job = s.gemini.calls(uid).find((r) => r.body.generationConfig?.responseMimeType === "application/json");
  assert.ok(job, "a consolidation call");
  assert.match(requestText(job.body), /a picture the bot made: a lighthouse at dusk/);
});

test("an edit of a person's photo sends that photo's bytes to the image model", async () => {
  const uid = uniqueId();
  const jpeg = fs.readFileSync(path.join(ROOT, "tests/fixtures/media/photo.jpg"));
  const u = JSON.parse(fs.readFileSync(path.join(ROOT, "tests/fixtures/telegram/014_photo_private.json"), "utf8"));
  u.update_id = updateId();
  const m = u.message;
  m.message_id = messageId();
  m.from = { ...m.from, id: uid };
  m.chat = { ...m.chat, id: uid };
  m.date = Math.floor(Date.now() / 1000);
  m.photo = m.photo.map((p, i) => ({ ...p, file_id: `evening-${uid}-${i}`, file_unique_id: `evening-${uid}-u${i}`, file_size: jpeg.length }));
  m.caption = "make it evening";
  s.tg.addFile(m.photo.at(-1).file_id, jpeg);
  s.gemini.script(uid, [draw("the same street in the evening", { photo_message_ids: [m.message_id], aspect_ratio: "16:9" })]);
  const before = s.gemini.imageCalls().length;
  await s.webhook(u);
  await s.tg.waitFor(() => photos(uid).length === 1, 20_000, "the edited photo");
  const [call] = s.gemini.imageCalls().slice(before);
  const parts = call.body.contents[0].parts;
  assert.equal(parts[0].inlineData.mimeType, "image/jpeg");
  assert.deepEqual(Buffer.from(parts[0].inlineData.data, "base64"), jpeg, "the person's photo, byte for byte");
  assert.equal(parts[1].text, "the same street in the evening");
  assert.equal(call.body.generationConfig.imageConfig.aspectRatio, "16:9");
});

test("a step retried after Telegram failed sends the stored picture once, without making it again", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [draw("a paper boat")]);
  s.tg.fault({ method: "sendPhoto", chatId: uid, status: 502, description: "Bad Gateway" });
  const before = s.gemini.imageCalls().length;
  await s.webhook(privateText(uid, "draw a paper boat"));
  await s.tg.waitFor(() => photos(uid).length === 1, 30_000, "the photo after the retry");
  await sleep(3000);
  assert.equal(s.tg.calls("sendPhoto", uid).length, 2, "one failed upload, one that went out");
  assert.equal(photos(uid).length, 1, "sent once");
  assert.equal(s.gemini.imageCalls().length - before, 1, "made once: the retry sent the stored picture");
  const left = await s.sql("SELECT COUNT(*) AS n FROM image_parts WHERE step_key LIKE ?", `${uid}%`);
  assert.equal(left[0].n, 0, "the stored picture is dropped once sent");
  const rows = await s.sql("SELECT key, status FROM outbox WHERE chat_id = ? AND method = 'sendPhoto'", uid);
  assert.deepEqual(rows.map((r) => r.status), ["sent"]);
});

test("over the daily picture limit the person gets one clear line and no picture is made", async () => {
  const uid = uniqueId();
  const now = Date.now();
  for (let i = 0; i < 3; i++) {
    await s.sql("INSERT INTO image_charges (step_key, chat_id, user_id, created_at) VALUES (?, ?, ?, ?)", `earlier-${uid}-${i}`, uid, uid, now - 1000);
  }
  s.gemini.script(uid, [draw("one more cat")]);
  const before = s.gemini.imageCalls().length;
  await s.webhook(privateText(uid, "draw one more cat"));
  await s.tg.waitFor(() => s.tg.sent(uid).includes(PERSON_LIMIT_LINE), 20_000, "the limit line");
  await sleep(1500);
  assert.equal(s.tg.sent(uid).filter((t) => t === PERSON_LIMIT_LINE).length, 1);
  assert.ok(!s.tg.sent(uid).some((t) => /sorry|apolog/i.test(t)), "a line, not an apology");
  assert.equal(s.gemini.imageCalls().length, before, "no image call");
  assert.equal(s.tg.calls("sendPhoto", uid).length, 0);
});

test("a safety refusal of the image model is a short honest answer, never a retry loop", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [draw("something the model refuses")]);
  s.gemini.scriptImage([{ finishReason: "IMAGE_SAFETY" }]);
  const before = s.gemini.imageCalls().length;
  await s.webhook(privateText(uid, "draw something the model refuses"));
  await s.tg.waitFor(() => s.tg.sent(uid).includes(SAFETY_LINE), 20_000, "the refusal line");
  await sleep(3000);
  assert.equal(s.gemini.imageCalls().length - before, 1, "asked once");
  assert.equal(s.tg.sent(uid).filter((t) => t === SAFETY_LINE).length, 1);
  assert.equal(s.tg.calls("sendPhoto", uid).length, 0);
  const [call] = await s.sql("SELECT finish_reason FROM calls WHERE chat_id = ? AND purpose = 'image'", uid);
  assert.equal(call.finish_reason, "IMAGE_SAFETY", "the refused call is recorded");
  // The next turn's history does not pretend a picture went out: the call's answer says so.
  s.gemini.script(uid, [{ text: "Understood." }]);
  await s.webhook(privateText(uid, "ok, never mind"));
  await s.tg.waitFor(() => s.tg.sent(uid).includes("Understood."), 20_000, "the next answer");
  const parts = s.gemini.calls(uid).filter((r) => !r.image).at(-1).body.contents.flatMap((c) => c.parts);
  const answer = parts.find((p) => p.functionResponse?.name === "generate_image").functionResponse.response;
  assert.equal(answer.ok, false);
  assert.match(answer.error, /no picture was sent; the chat was told: I can't make that picture/);
  // A blocked prompt (no candidates at all) is the same short line.
  const other = uniqueId();
  s.gemini.script(other, [draw("a blocked prompt")]);
  s.gemini.scriptImage([{ blockReason: "PROHIBITED_CONTENT" }]);
  await s.webhook(privateText(other, "draw a blocked prompt"));
  await s.tg.waitFor(() => s.tg.sent(other).includes(SAFETY_LINE), 20_000, "the refusal line");
});

test("crew mode: the persona that asked sends the picture through its own bot, and its cost is the persona's", async () => {
  const BUILDER_TOKEN = "777000222:ACTOR-token_for-the-picture-builder";
  const c = await startStack({
    vars: { IMAGE_MODEL: "on", CREW: "critic,builder,moderator", CREW_CHATS: "*", CREW_MAX_ROUNDS: "1", BOT_USERNAME: "edge_test_bot" },
    secrets: { CREW_BOT_TOKEN_BUILDER: BUILDER_TOKEN },
  });
  try {
    c.tg.addBot(BUILDER_TOKEN, { first_name: "Builder", username: "builder_test_bot" });
    const chat = -uniqueId();
    const uid = uniqueId();
    const persona = (body) => /You are (\w+) in a crew/.exec((body.systemInstruction?.parts ?? []).map((p) => p.text).join(""))?.[1];
    const pass = { calls: [{ name: "pass", args: {} }] };
    c.gemini.script(uid, [
      (body) => (persona(body) === "Critic" ? pass : { text: "wrong order" }),
      (body) => (persona(body) === "Builder" ? { calls: [{ name: "generate_image", args: { prompt: "a blueprint of a treehouse" } }] } : { text: "wrong order" }),
      pass,
    ]);
    const t = "@edge_test_bot draw us a treehouse plan";
    await c.webhook(groupText(chat, uid, t, { entities: mention(t, "edge_test_bot") }));
    await c.tg.waitFor(() => c.tg.calls("sendPhoto", chat).some((r) => r.photo), 30_000, "the builder's picture");
    await sleep(1500);
    const sent = c.tg.calls("sendPhoto", chat).filter((r) => r.photo);
    assert.equal(sent.length, 1);
    assert.equal(sent[0].from.username, "builder_test_bot", "sent by the persona's own bot");
    const [call] = await c.sql("SELECT persona, image_tokens FROM calls WHERE chat_id = ? AND purpose = 'image'", chat);
    assert.deepEqual({ ...call }, { persona: "builder", image_tokens: IMAGE_TOKENS });
    const costs = await c.api("GET", `costs?chat_id=${chat}`);
    assert.equal(costs.json.by_persona.builder.image_tokens, IMAGE_TOKENS);
  } finally {
    await c.close();
  }
});

test("the fake Telegram refuses photos as the Bot API does: dimensions, size, caption, not an image", async () => {
  const post = async (fields, file) => {
    const form = new FormData();
    for (const [k, v] of Object.entries(fields)) form.append(k, v);
    if (file) form.append("photo", new Blob([file]), "picture.png");
    const r = await fetch(`${s.tg.base}/bot123456789:TEST-token_for-the-fake/sendPhoto`, { method: "POST", body: form });
    return r.json();
  };
  const chat = uniqueId();
  assert.equal((await post({ chat_id: chat }, makePng(10_001, 1))).description, "Bad Request: PHOTO_INVALID_DIMENSIONS");
  assert.equal((await post({ chat_id: chat }, makePng(300, 10))).description, "Bad Request: PHOTO_INVALID_DIMENSIONS", "a ratio over 20");
  assert.equal((await post({ chat_id: chat, caption: "x".repeat(1025) }, makePng(10, 10))).description, "Bad Request: message caption is too long");
  assert.equal((await post({ chat_id: chat }, Buffer.from("not an image"))).description, "Bad Request: IMAGE_PROCESS_FAILED");
  assert.equal((await post({ chat_id: chat }, makePng(1900, 1900, 0, { noise: true }))).description, "Bad Request: PHOTO_SAVE_FILE_INVALID");
  assert.equal((await post({ chat_id: chat })).description, "Bad Request: there is no photo in the request");
  const okAnswer = await post({ chat_id: chat, caption: "fine" }, makePng(20, 10));
  assert.equal(okAnswer.ok, true);
  assert.deepEqual([okAnswer.result.photo[0].width, okAnswer.result.photo[0].height], [20, 10]);
});

test("a picture Telegram will not take as a photo is said in one line, not retried", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [draw("a very long banner")]);
  s.gemini.scriptImage([{ png: makePng(10_001, 1), caption: "" }]);
  await s.webhook(privateText(uid, "draw a very long banner"));
  await s.tg.waitFor(() => s.tg.sent(uid).some((t) => t.startsWith("Telegram would not take the picture")), 20_000, "the line");
  await sleep(2500);
  assert.equal(s.tg.calls("sendPhoto", uid).length, 1, "not retried");
  assert.equal(s.tg.calls("sendPhoto", uid)[0].photo, undefined, "refused");
});
