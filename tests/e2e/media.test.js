// Media the turn answers reach Gemini as inlineData with their exact bytes (getFile, then the
// download from Telegram's file server); older media are never re-sent unless a message replies
// to them; what is not viewed is named with the reason, and the turn always happens.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { startStack, privateText, groupText, mention, uniqueId, messageId, updateId, ROOT } from "../support/stack.js";
import { requestText } from "../support/fake-gemini.js";
import { TURN_CONTEXT_HEADER } from "../support/prompt.js";

let s;
/** The size of each file given to the fake Telegram (photo updates state it, as Telegram does). */
const sizes = new Map();
before(async () => {
  s = await startStack({ vars: { MEDIA_BYTES_PER_TURN: "6000", STICKER_SETS: "Fun" } });
  const addFile = s.tg.addFile.bind(s.tg);
  s.tg.addFile = (id, bytes, options = {}) => {
    sizes.set(id, options.size ?? bytes.length);
    return addFile(id, bytes, options);
  };
});
after(async () => {
  await s?.close();
});

/** A real photo update (tests/fixtures/telegram/014_photo_private.json) for this user, its
 * largest size pointing at `fileId` (with its size, when the fake Telegram has it). */
function photoUpdate(uid, fileId, { caption, reply_to_message } = {}) {
  const u = JSON.parse(fs.readFileSync(path.join(ROOT, "tests/fixtures/telegram/014_photo_private.json"), "utf8"));
  u.update_id = updateId();
  const m = u.message;
  m.message_id = messageId();
  m.from = { ...m.from, id: uid };
  m.chat = { ...m.chat, id: uid };
  m.date = Math.floor(Date.now() / 1000);
  m.photo = m.photo.map((p, i) => ({ ...p, file_id: i === m.photo.length - 1 ? fileId : `${fileId}-small${i}`, file_unique_id: `${fileId}-u${i}` }));
  m.photo.at(-1).file_size = sizes.get(fileId);
  if (caption) m.caption = caption;
  if (reply_to_message) m.reply_to_message = reply_to_message;
  return u;
}

/** A message of `kind` (voice, document, video...) for this user. */
function fileUpdate(uid, kind, file) {
  const t = privateText(uid, "x");
  delete t.message.text;
  t.message[kind] = file;
  return t;
}

/** Every part of the requests for this user, flattened. */
const partsOf = (uid) => s.gemini.calls(uid).flatMap((r) => r.body.contents.flatMap((c) => c.parts));
const inlineOf = (uid) => partsOf(uid).filter((p) => p.inlineData);
const textsOf = (uid) => partsOf(uid).map((p) => p.text ?? "");

/** A small real file of tests/fixtures/media (made by its make.sh). */
const media = (name) => fs.readFileSync(path.join(ROOT, "tests/fixtures/media", name));
/** A real file made distinct by bytes after its end (decoders stop before them; the fake
 *  Gemini checks the start), for tests that tell files apart by their bytes. */
const distinct = (name, tag) => Buffer.concat([media(name), Buffer.from(`\n${tag}`)]);
const JPEG = media("photo.jpg");

test("a photo DM reaches Gemini as inlineData with its exact bytes, after its [meta] part", async () => {
  const uid = uniqueId();
  s.tg.addFile(`photo-${uid}`, JPEG);
  await s.webhook(photoUpdate(uid, `photo-${uid}`, { caption: "what is this?" }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 15_000, "the answer");
  const [req] = s.gemini.calls(uid);
  const user = req.body.contents.at(-1);
  assert.equal(user.role, "user");
  const inline = user.parts.filter((p) => p.inlineData);
  assert.equal(inline.length, 1);
  assert.equal(inline[0].inlineData.mimeType, "image/jpeg");
  assert.deepEqual(Buffer.from(inline[0].inlineData.data, "base64"), JPEG);
  // In the message's own content: its [meta] part, its caption, the label, then the bytes.
  assert.ok(user.parts[0].text.startsWith("[meta]"), user.parts[0].text);
  const at = user.parts.indexOf(inline[0]);
  assert.match(user.parts[at - 1].text, /^\[#\d+ photo 720x1280, attached\]$/);
  assert.ok(user.parts.slice(0, at).some((p) => p.text === "what is this?"));
  // The largest size was fetched; the smaller ones were not.
  assert.deepEqual(s.tg.calls("getFile").filter((c) => c.body.file_id.startsWith(`photo-${uid}`)).map((c) => c.body.file_id), [`photo-${uid}`]);
});

test("the next turn's history shows the photo without its bytes; a reply to it sends them again", async () => {
  const uid = uniqueId();
  s.tg.addFile(`cat-${uid}`, JPEG);
  const photo = photoUpdate(uid, `cat-${uid}`);
  await s.webhook(photo);
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 15_000, "the first answer");
  await s.webhook(privateText(uid, "thanks, and what colour was it?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 15_000, "the second answer");
  const second = s.gemini.calls(uid)[1].body;
  assert.equal(second.contents.flatMap((c) => c.parts).filter((p) => p.inlineData).length, 0, "old bytes are not re-sent");
  // Described once (from the bytes the first turn had), and shown by its description.
  assert.ok(second.contents.flatMap((c) => c.parts).some((p) => (p.text ?? "").includes(`[photo: 720x1280 — image/jpeg of ${JPEG.length} bytes]`)), "the photo is described");
  await s.webhook(privateText(uid, "and what about this one?", { reply_to_message: photo.message }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 3, 15_000, "the third answer");
  const third = s.gemini.calls(uid)[2].body;
  const inline = third.contents.flatMap((c) => c.parts).filter((p) => p.inlineData);
  assert.equal(inline.length, 1, "the replied-to photo is sent again");
  assert.deepEqual(Buffer.from(inline[0].inlineData.data, "base64"), JPEG);
});

test("a voice note goes as audio/ogg; what is not viewed is named with the reason and the turn still answers", async () => {
  const uid = uniqueId();
  const voice = media("voice.ogg");
  s.tg.addFile(`voice-${uid}`, voice);
  await s.webhook(fileUpdate(uid, "voice", { duration: 1, mime_type: "audio/ogg", file_id: `voice-${uid}`, file_unique_id: `vu-${uid}`, file_size: voice.length }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 15_000, "the voice answer");
  assert.equal(inlineOf(uid)[0].inlineData.mimeType, "audio/ogg");
  assert.deepEqual(Buffer.from(inlineOf(uid)[0].inlineData.data, "base64"), voice);

  // An archive: named, never fetched.
  await s.webhook(fileUpdate(uid, "document", { file_name: "a.zip", mime_type: "application/zip", file_id: `zip-${uid}`, file_unique_id: `zu-${uid}`, file_size: 100 }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 15_000, "the archive answer");
  assert.ok(textsOf(uid).some((t) => t.includes("not viewed: a document of a type I cannot read (application/zip)")));
  assert.equal(s.tg.calls("getFile").filter((c) => c.body.file_id === `zip-${uid}`).length, 0);

  // A file id Telegram no longer knows.
  await s.webhook(photoUpdate(uid, `gone-${uid}`));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 3, 15_000, "the expired-file answer");
  assert.ok(textsOf(uid).some((t) => /not viewed: could not be fetched \(.*invalid file_id/.test(t)), textsOf(uid).join("\n"));

  // Over Telegram's 20 MB: getFile refuses it; its thumbnail is viewed instead.
  s.tg.addFile(`big-${uid}`, Buffer.from("x"), { size: 48 * 1024 * 1024 });
  const thumb = distinct("photo.jpg", `thumbnail ${uid}`);
  s.tg.addFile(`bigthumb-${uid}`, thumb);
  await s.webhook(fileUpdate(uid, "video", { duration: 60, width: 640, height: 360, mime_type: "video/mp4", file_id: `big-${uid}`, file_unique_id: `bu-${uid}`, file_size: 48 * 1024 * 1024, thumbnail: { file_id: `bigthumb-${uid}`, file_unique_id: `btu-${uid}`, width: 320, height: 180 } }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 4, 15_000, "the big-video answer");
  assert.ok(textsOf(uid).some((t) => /video .*not viewed: video, 48\.0 MB, too large to view; its thumbnail is attached/.test(t)), textsOf(uid).join("\n"));
  assert.equal(s.tg.calls("getFile").filter((c) => c.body.file_id === `big-${uid}`).length, 0, "its stated size said enough: not asked for");
  const last = s.gemini.calls(uid).at(-1).body.contents.flatMap((c) => c.parts).filter((p) => p.inlineData);
  assert.equal(last.length, 1);
  assert.equal(last[0].inlineData.mimeType, "image/jpeg");
  assert.deepEqual(Buffer.from(last[0].inlineData.data, "base64"), thumb);

  // Within Telegram's cap but over this turn's limit (MEDIA_BYTES_PER_TURN is 6000 here).
  s.tg.addFile(`long-${uid}`, Buffer.alloc(9000, 7));
  await s.webhook(fileUpdate(uid, "voice", { duration: 30, mime_type: "audio/ogg", file_id: `long-${uid}`, file_unique_id: `lu-${uid}`, file_size: 9000 }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 5, 15_000, "the over-limit answer");
  assert.ok(textsOf(uid).some((t) => t.includes("not viewed: voice, 8 KB, over this turn's media limit")), textsOf(uid).join("\n"));
  assert.equal(s.tg.calls("download").filter((c) => c.body.file_path.includes(`long-${uid}`)).length, 0, "not downloaded");
  // Every request passed the fake Gemini's checks (inlineData shape and MIME types).
  assert.ok(s.gemini.calls(uid).every((r) => r.status === undefined || r.status === 200));
});

test("when Gemini refuses a file, the turn asks again without it and still answers", async () => {
  const uid = uniqueId();
  s.tg.addFile(`bad-${uid}`, JPEG);
  s.gemini.script(uid, [
    { status: 400, message: "Unable to process input image. Please retry or report in https://developers.generativeai.google/guide/troubleshooting" },
    { text: "I could not open that picture." },
  ]);
  await s.webhook(photoUpdate(uid, `bad-${uid}`, { caption: "look" }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 15_000, "the answer");
  assert.equal(s.tg.sent(uid)[0], "I could not open that picture.");
  const [first, second] = s.gemini.calls(uid);
  assert.equal(first.status, 400);
  assert.equal(first.body.contents.flatMap((c) => c.parts).filter((p) => p.inlineData).length, 1);
  const parts = second.body.contents.flatMap((c) => c.parts);
  assert.equal(parts.filter((p) => p.inlineData).length, 0);
  assert.ok(parts.some((p) => /photo 720x1280: not viewed: the model could not read this file/.test(p.text ?? "")));
  assert.equal(s.gemini.calls(uid).length, 2, "asked once more, not in a loop");
});

/** Description calls (JSON mode with a `description` property) whose file has these bytes. */
const describeCalls = (bytes) =>
  s.gemini.requests.filter((r) => r.body?.generationConfig?.responseSchema?.properties?.description
    && r.body.contents.some((c) => c.parts.some((p) => p.inlineData && Buffer.from(p.inlineData.data, "base64").equals(bytes))));

test("a sticker sent again and again is described once; a voice note's transcript is in later history", async () => {
  const uid = uniqueId();
  const webp = distinct("sticker.webp", `sticker ${uid}`);
  s.tg.addFile(`st-${uid}`, webp, { uniqueId: `stu-${uid}` });
  const sticker = () => fileUpdate(uid, "sticker", { file_id: `st-${uid}`, file_unique_id: `stu-${uid}`, type: "regular", width: 512, height: 512, is_animated: false, is_video: false, emoji: "😂", set_name: "Fun" });
  for (let n = 1; n <= 3; n++) {
    await s.webhook(sticker());
    await s.tg.waitFor(() => s.tg.sent(uid).length === n, 15_000, `answer ${n}`);
  }
  assert.equal(describeCalls(webp).length, 1, "one description for three sends");
  assert.equal(describeCalls(webp)[0].model, "gemini-3.5-flash-lite", "with the media model");
  // Later turns show the sticker by its description.
  assert.ok(s.gemini.calls(uid).at(-1).body.contents.flatMap((c) => c.parts).some((p) => (p.text ?? "").includes(`image/webp of ${webp.length} bytes`)));

  const voice = distinct("voice.ogg", `voice ${uid}`);
  s.tg.addFile(`vo-${uid}`, voice, { uniqueId: `vou-${uid}` });
  await s.webhook(fileUpdate(uid, "voice", { duration: 2, mime_type: "audio/ogg", file_id: `vo-${uid}`, file_unique_id: `vou-${uid}`, file_size: voice.length }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 4, 15_000, "the voice answer");
  await s.webhook(privateText(uid, "what did I just say?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 5, 15_000, "the follow-up answer");
  const history = s.gemini.calls(uid).at(-1).body.contents.flatMap((c) => c.parts).map((p) => p.text ?? "").join("\n");
  assert.ok(history.includes(`said: \"spoken words, ${voice.length} bytes\"`), history);
  assert.equal(s.gemini.calls(uid).at(-1).body.contents.flatMap((c) => c.parts).filter((p) => p.inlineData).length, 0);

  // Memory consolidation reads what was said, too.
  await s.scheduled();
  const said = `said: "spoken words, ${voice.length} bytes"`;
  const deadline = Date.now() + 15_000;
  const consolidations = () => s.gemini.requests.filter((r) => r.body?.generationConfig?.responseSchema?.properties?.facts);
  while (!consolidations().some((r) => JSON.stringify(r.body.contents).includes(said.replaceAll('"', '\\"'))) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.ok(consolidations().some((r) => JSON.stringify(r.body.contents).includes(said.replaceAll('"', '\\"'))), "consolidation saw the transcript");
  // No bytes were stored anywhere in D1: not in messages, not in media.
  const b64 = voice.toString("base64");
  const stored = await s.sql("SELECT (SELECT COUNT(*) FROM messages WHERE instr(parts, ?1) > 0) + (SELECT COUNT(*) FROM media WHERE instr(description, ?1) > 0 OR instr(transcript, ?1) > 0) AS n", b64);
  assert.equal(stored[0].n, 0);
  const row = await s.sql(`SELECT status, mime, model FROM media WHERE file_unique_id = 'vou-${uid}'`);
  assert.deepEqual(row[0], { status: "ok", mime: "audio/ogg", model: "gemini-3.5-flash-lite" });
});

test("a curated description wins: the photo is not described again and history shows the operator's words", async () => {
  const uid = uniqueId();
  const bytes = distinct("photo.jpg", `curated ${uid}`);
  s.tg.addFile(`cur-${uid}`, bytes);
  const update = photoUpdate(uid, `cur-${uid}`);
  const key = update.message.photo.at(-1).file_unique_id;
  assert.equal((await s.api("PUT", `media/${key}`, { kind: "photo" })).status, 400, "a description is required");
  const put = await s.api("PUT", `media/${key}`, { description: "the team photo from the summer trip", kind: "photo" });
  assert.equal(put.status, 200);
  await s.webhook(update);
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 15_000, "the answer");
  await s.webhook(privateText(uid, "who was in it?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 15_000, "the follow-up");
  assert.equal(describeCalls(bytes).length, 0, "never described by the model");
  assert.ok(s.gemini.calls(uid).at(-1).body.contents.flatMap((c) => c.parts).some((p) => (p.text ?? "").includes("the team photo from the summer trip")));
  const listed = await s.api("GET", "media?limit=500");
  const row = listed.json.media.find((m) => m.file_unique_id === key);
  assert.equal(row.model, "operator");
  assert.ok(listed.json.media.some((m) => m.status === "ok" && m.model === "gemini-3.5-flash-lite"), "generated ones are listed too");
});

test("search_memory finds what a voice note said, in the chat it was sent in only", async () => {
  const uid = uniqueId();
  const other = uniqueId();
  const voice = distinct("voice.ogg", `searchable ${uid}`);
  s.tg.addFile(`sv-${uid}`, voice, { uniqueId: `svu-${uid}` });
  await s.webhook(fileUpdate(uid, "voice", { duration: 3, mime_type: "audio/ogg", file_id: `sv-${uid}`, file_unique_id: `svu-${uid}`, file_size: voice.length }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 15_000, "the voice answer");
  const search = (q) => [{ calls: [{ name: "search_memory", args: { query: q } }] }, { text: "done searching" }];
  const found = (who) => JSON.stringify(s.gemini.calls(who).at(-1).body.contents.flatMap((c) => c.parts).filter((p) => p.functionResponse?.name === "search_memory").map((p) => p.functionResponse.response));
  s.gemini.script(uid, search("spoken words"));
  await s.webhook(privateText(uid, "what did I say in that voice note?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 15_000, "the search answer");
  assert.ok(found(uid).includes(`said: \\"spoken words, ${voice.length} bytes\\"`), found(uid));
  // Another chat, where it was never sent, does not find it.
  s.gemini.script(other, search("spoken words"));
  await s.webhook(privateText(other, "search please"));
  await s.tg.waitFor(() => s.tg.sent(other).length === 1, 15_000, "the other chat's answer");
  assert.ok(!found(other).includes("[media"), found(other));
});

test("media over one turn's describe budget are described by the next turns, so a later question finds them all", async () => {
  const chat = -1_000_000_000_000 - uniqueId();
  const bob = uniqueId();
  const alice = uniqueId();
  // Six photos posted as group chatter (MEDIA_DESCRIBE_BUDGET is 4 by default).
  const photos = Array.from({ length: 6 }, (_, i) => distinct("photo.jpg", `chatter ${chat} ${"x".repeat(i)}`)); // six sizes
  for (const [i, bytes] of photos.entries()) {
    s.tg.addFile(`gc-${bob}-${i}`, bytes, { uniqueId: `gcu-${bob}-${i}` });
    const chatter = groupText(chat, bob, "x", { name: "Bob" });
    delete chatter.message.text;
    chatter.message.photo = [{ file_id: `gc-${bob}-${i}`, file_unique_id: `gcu-${bob}-${i}`, width: 640, height: 480, file_size: bytes.length }];
    await s.webhook(chatter);
  }
  const ask = (text) => groupText(chat, alice, text, { name: "Alice", entities: mention(text, "edge_test_bot") });
  const described = () => photos.filter((b) => describeCalls(b).length === 1).length;
  await s.webhook(ask("@edge_test_bot look at these"));
  await s.tg.waitFor(() => s.tg.sent(chat).length === 1, 15_000, "the first answer");
  assert.equal(described(), 4, "the first turn describes four of the six it looks at");
  await s.webhook(ask("@edge_test_bot nice, right?"));
  await s.tg.waitFor(() => s.tg.sent(chat).length === 2, 15_000, "the second answer");
  assert.equal(described(), 6, "the next turn fills in the other two from the history window");
  assert.equal(s.gemini.calls(alice).at(-1).body.contents.flatMap((c) => c.parts).filter((p) => p.inlineData).length, 0, "and sends no old bytes");
  assert.ok(photos.every((b) => describeCalls(b).length === 1), "each once");
  await s.webhook(ask("@edge_test_bot what was in the last photo?"));
  await s.tg.waitFor(() => s.tg.sent(chat).length === 3, 15_000, "the third answer");
  const history = s.gemini.calls(alice).at(-1).body.contents.flatMap((c) => c.parts).map((p) => p.text ?? "").join("\n");
  for (const b of photos) assert.ok(history.includes(`image/jpeg of ${b.length} bytes`), history);
});

test("what can never be viewed is kept in media with its reason, listed for the operator, and never tried again", async () => {
  const uid = uniqueId();
  const zip = () => fileUpdate(uid, "document", { file_name: "a.zip", mime_type: "application/zip", file_id: `nz-${uid}`, file_unique_id: `nzu-${uid}`, file_size: 100 });
  await s.webhook(zip());
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 15_000, "the archive answer");
  // Over Telegram's 20 MB by the size the message gives: never asked for.
  await s.webhook(fileUpdate(uid, "video", { duration: 60, width: 640, height: 360, mime_type: "video/mp4", file_id: `nb-${uid}`, file_unique_id: `nbu-${uid}`, file_size: 48 * 1024 * 1024 }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 15_000, "the big-video answer");
  // No size in the message, and getFile says it is too big.
  s.tg.addFile(`nt-${uid}`, Buffer.from("x"), { size: 30 * 1024 * 1024 });
  await s.webhook(fileUpdate(uid, "video", { duration: 90, width: 640, height: 360, mime_type: "video/mp4", file_id: `nt-${uid}`, file_unique_id: `ntu-${uid}` }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 3, 15_000, "the refused-video answer");
  const rows = await s.sql(`SELECT file_unique_id, kind, mime, size, status, attempts, reason, description FROM media WHERE file_unique_id IN ('nzu-${uid}', 'nbu-${uid}', 'ntu-${uid}') ORDER BY file_unique_id`);
  assert.deepEqual(rows, [
    { file_unique_id: `nbu-${uid}`, kind: "video", mime: "video/mp4", size: 48 * 1024 * 1024, status: "too_large", attempts: 0, reason: "video, 48.0 MB, too large to view", description: null },
    { file_unique_id: `ntu-${uid}`, kind: "video", mime: "video/mp4", size: null, status: "too_large", attempts: 0, reason: "video, over Telegram's 20 MB download limit", description: null },
    { file_unique_id: `nzu-${uid}`, kind: "document", mime: "application/zip", size: 100, status: "unsupported", attempts: 0, reason: "a document of a type I cannot read (application/zip)", description: null },
  ]);
  assert.equal(s.tg.calls("getFile").filter((c) => c.body.file_id === `nb-${uid}` || c.body.file_id === `nz-${uid}`).length, 0);
  const listed = (await s.api("GET", "media?limit=500")).json.media;
  assert.equal(listed.find((m) => m.file_unique_id === `nzu-${uid}`)?.reason, "a document of a type I cannot read (application/zip)");
  assert.equal(listed.find((m) => m.file_unique_id === `nbu-${uid}`)?.status, "too_large");
  // A file Telegram no longer has (an expired file id): kept as failed, with the reason.
  const gone = photoUpdate(uid, `ng-${uid}`);
  const goneKey = gone.message.photo.at(-1).file_unique_id;
  await s.webhook(gone);
  await s.tg.waitFor(() => s.tg.sent(uid).length === 4, 15_000, "the expired-photo answer");
  const failed = await s.sql(`SELECT status, attempts, reason FROM media WHERE file_unique_id = ?`, goneKey);
  assert.equal(failed[0].status, "failed");
  assert.equal(failed[0].attempts, 1);
  assert.match(failed[0].reason, /^could not be fetched \(bad request: .*invalid file_id\)$/);
  // Sent again, and a later turn with all of them in its window: nothing is tried again.
  const keys = `'nzu-${uid}', 'nbu-${uid}', 'ntu-${uid}', '${goneKey}'`;
  const before = await s.sql(`SELECT file_unique_id, updated_at FROM media WHERE file_unique_id IN (${keys}) ORDER BY file_unique_id`);
  await s.webhook(zip());
  await s.tg.waitFor(() => s.tg.sent(uid).length === 5, 15_000, "the second archive answer");
  await s.webhook(privateText(uid, "and now?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 6, 15_000, "the follow-up");
  assert.deepEqual(await s.sql(`SELECT file_unique_id, updated_at FROM media WHERE file_unique_id IN (${keys}) ORDER BY file_unique_id`), before);
  assert.equal(s.tg.calls("getFile").filter((c) => [`nb-${uid}`, `nz-${uid}`].includes(c.body.file_id)).length, 0);
  assert.equal(s.tg.calls("getFile").filter((c) => c.body.file_id === `nt-${uid}`).length, 1, "the refused one was asked for once, by the turn that answered it");
  assert.equal(s.tg.calls("getFile").filter((c) => c.body.file_id === `ng-${uid}`).length, 1, "the expired one too");
});

test("consolidation describes the media of the messages it reads that no turn described, within the budget", async () => {
  // The other conversations of this file are consolidated first, so this chat's job is not
  // short of subrequests because it shares a queue batch with theirs.
  await s.scheduled();
  const pending = async () => (await s.sql("SELECT COUNT(*) AS n FROM conversations WHERE last_seq > COALESCE(consolidated_seq, 0)"))[0].n;
  for (const until = Date.now() + 15_000; (await pending()) > 0 && Date.now() < until; ) await new Promise((r) => setTimeout(r, 200));
  const chat = -1_000_000_000_000 - uniqueId();
  const bob = uniqueId();
  // Five photos and an archive posted as chatter: no turn looks at them.
  const photos = Array.from({ length: 5 }, (_, i) => distinct("photo.jpg", `consolidated ${chat} ${"y".repeat(i + 20)}`));
  for (const [i, bytes] of photos.entries()) {
    s.tg.addFile(`cp-${bob}-${i}`, bytes, { uniqueId: `cpu-${bob}-${i}` });
    const chatter = groupText(chat, bob, "x", { name: "Bob" });
    delete chatter.message.text;
    chatter.message.photo = [{ file_id: `cp-${bob}-${i}`, file_unique_id: `cpu-${bob}-${i}`, width: 640, height: 480, file_size: bytes.length }];
    await s.webhook(chatter);
  }
  const doc = groupText(chat, bob, "x", { name: "Bob" });
  delete doc.message.text;
  doc.message.document = { file_name: "b.rar", mime_type: "application/vnd.rar", file_id: `cr-${bob}`, file_unique_id: `cru-${bob}`, file_size: 2048 };
  await s.webhook(doc);
  assert.equal(photos.filter((b) => describeCalls(b).length > 0).length, 0, "chatter costs nothing until then");
  await s.scheduled();
  const consolidation = () => s.gemini.requests.find((r) => r.body?.generationConfig?.responseSchema?.properties?.facts && requestText(r.body).includes(`#${bob}`));
  await s.gemini.waitFor(() => consolidation(), 20_000, "the consolidation call");
  // The newest four (MEDIA_DESCRIBE_BUDGET) were described first, each once, and the
  // consolidation call read their descriptions.
  assert.deepEqual(photos.map((b) => describeCalls(b).length), [0, 1, 1, 1, 1]);
  const text = requestText(consolidation().body);
  for (const b of photos.slice(1)) assert.ok(text.includes(`image/jpeg of ${b.length} bytes`), text);
  const calls = await s.sql(`SELECT COUNT(*) AS n FROM calls WHERE chat_id = ? AND purpose = 'media' AND turn_id IS NULL`, chat);
  assert.equal(calls[0].n, 4, "recorded as media calls of no turn");
  const rar = await s.sql(`SELECT status, reason FROM media WHERE file_unique_id = 'cru-${bob}'`);
  assert.deepEqual(rar[0], { status: "unsupported", reason: "a document of a type I cannot read (application/vnd.rar)" });
});

test("an album is one unit: sent whole, shown as one message, and a reply to any of its items sends them all", async () => {
  const uid = uniqueId();
  // A real album item (tests/fixtures/telegram/051_media_group_video.json: a video), then two
  // photos of the same album (within MEDIA_BYTES_PER_TURN, 6000 here).
  const group = `album-${uid}`;
  const clips = [distinct("video.mp4", `clip ${uid}`), distinct("photo.jpg", `one ${uid}`), distinct("photo.jpg", `two ${uid}`)];
  const video = JSON.parse(fs.readFileSync(path.join(ROOT, "tests/fixtures/telegram/051_media_group_video.json"), "utf8"));
  video.update_id = updateId();
  Object.assign(video.message, { message_id: messageId(), from: { ...video.message.from, id: uid }, chat: { ...video.message.chat, id: uid }, date: Math.floor(Date.now() / 1000), caption: "our trip" });
  video.message.video = { ...video.message.video, file_id: `al-${uid}-0`, file_unique_id: `alu-${uid}-0`, file_size: clips[0].length, thumbnail: undefined };
  clips.forEach((bytes, i) => s.tg.addFile(`al-${uid}-${i}`, bytes));
  const items = [video, photoUpdate(uid, `al-${uid}-1`), photoUpdate(uid, `al-${uid}-2`)];
  for (const u of items) u.message.media_group_id = group; // the fixture's, made unique to this test
  for (const u of items) await s.webhook(u);
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 15_000, "the album answer");
  const metas = (req) => req.body.contents.flatMap((c) => c.parts).filter((p) => (p.text ?? "").startsWith("[meta]") && !p.text.startsWith(TURN_CONTEXT_HEADER));
  const sentBytes = (req) => req.body.contents.flatMap((c) => c.parts).filter((p) => p.inlineData).map((p) => Buffer.from(p.inlineData.data, "base64"));
  const first = s.gemini.calls(uid)[0];
  assert.deepEqual(sentBytes(first), clips, "all three, in order");
  assert.equal(metas(first).length, 1, "one message");
  assert.ok(metas(first)[0].text.includes(`message_id=${items[0].message.message_id} `), metas(first)[0].text);
  // History shows the album as one message, its items described.
  await s.webhook(privateText(uid, "nice, right?"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 15_000, "the second answer");
  const second = s.gemini.calls(uid)[1];
  assert.equal(metas(second).length, 2, "the album and the new message");
  assert.equal(sentBytes(second).length, 0);
  // A reply to its second item sends the whole album again.
  await s.webhook(privateText(uid, "what happens in this one?", { reply_to_message: items[1].message }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 3, 15_000, "the reply answer");
  assert.deepEqual(sentBytes(s.gemini.calls(uid)[2]), clips);
});

test("the stickers offered to send_sticker say what they show, once one of them was seen", async () => {
  const uid = uniqueId();
  const webp = distinct("sticker.webp", `catalog sticker ${uid}`);
  s.tg.addFile(`cs-${uid}`, webp);
  const sendSticker = (req) => req.body.tools[0].functionDeclarations.find((d) => d.name === "send_sticker").description;
  await s.webhook(fileUpdate(uid, "sticker", { file_id: `cs-${uid}`, file_unique_id: `csu-${uid}`, type: "regular", width: 512, height: 512, is_animated: false, is_video: false, emoji: "🐙", set_name: "Fun" }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 15_000, "the sticker answer");
  assert.ok(!sendSticker(s.gemini.calls(uid)[0]).includes("🐙"), "not known before it was described");
  const row = await s.sql(`SELECT set_name, emoji, status FROM media WHERE file_unique_id = 'csu-${uid}'`);
  assert.deepEqual(row[0], { set_name: "Fun", emoji: "🐙", status: "ok" });
  await s.webhook(privateText(uid, "send me one like that"));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 2, 15_000, "the second answer");
  const listed = sendSticker(s.gemini.calls(uid)[1]);
  assert.ok(listed.includes(`Fun 🐙: "image/webp of ${webp.length} bytes"`), listed);
});

/** A real update of tests/fixtures/telegram (`name`) from this user now, its file (`kind`)
 *  pointing at `fileId` with these bytes. */
function realUpdate(name, uid, kind, fileId, bytes, changes = {}) {
  const u = JSON.parse(fs.readFileSync(path.join(ROOT, "tests/fixtures/telegram", name), "utf8"));
  u.update_id = updateId();
  const m = u.message;
  Object.assign(m, { message_id: messageId(), from: { ...m.from, id: uid, is_bot: false }, chat: { ...m.chat, id: uid }, date: Math.floor(Date.now() / 1000) });
  m[kind] = { ...m[kind], file_id: fileId, file_unique_id: `${fileId}-u`, file_size: bytes.length, ...changes };
  if (kind === "animation") m.document = { ...m.document, file_id: fileId, file_unique_id: `${fileId}-u`, file_size: bytes.length };
  return u;
}

test("real files of each kind reach Gemini whole, as the type it reads; an animated sticker through its thumbnail", async () => {
  const uid = uniqueId();
  const cases = [
    ["019_voice.json", "voice", "voice.ogg", {}, "audio/ogg"],
    ["020_audio_duplicate_key_quirk.json", "audio", "audio.mp3", {}, "audio/mp3"],
    ["021_video.json", "video", "video.mp4", { thumbnail: undefined }, "video/mp4"],
    ["022_video_note.json", "video_note", "video.mp4", { thumbnail: undefined, thumb: undefined }, "video/mp4"],
    ["018_animation.json", "animation", "video.mp4", {}, "video/mp4"],
    ["023_document_cyrillic_filename.json", "document", "document.pdf", { file_name: "invoice.pdf", mime_type: "application/pdf" }, "application/pdf"],
    ["023_document_cyrillic_filename.json", "document", "image.png", { file_name: "red.png", mime_type: "image/png" }, "image/png"],
    ["014_photo_private.json", "photo", "photo.jpg", {}, "image/jpeg"],
  ];
  for (const [i, [fixture, kind, file, changes, mime]] of cases.entries()) {
    const bytes = distinct(file, `${uid} ${i}`);
    s.tg.addFile(`rk-${uid}-${i}`, bytes);
    const u = kind === "photo" ? photoUpdate(uid, `rk-${uid}-${i}`) : realUpdate(fixture, uid, kind, `rk-${uid}-${i}`, bytes, changes);
    await s.webhook(u);
    await s.tg.waitFor(() => s.tg.sent(uid).length === i + 1, 15_000, `the ${file} answer`);
    const inline = s.gemini.calls(uid).at(-1).body.contents.at(-1).parts.filter((p) => p.inlineData);
    assert.equal(inline.length, 1, file);
    assert.equal(inline[0].inlineData.mimeType, mime, file);
    assert.deepEqual(Buffer.from(inline[0].inlineData.data, "base64"), bytes, file);
    assert.equal(describeCalls(bytes).length, 1, `${file} described once`);
  }
  // A real animated sticker update (.tgs): the sticker itself is never fetched; its thumbnail is
  // viewed and is what describes it, once.
  const tgs = media("sticker.tgs");
  const thumb = distinct("sticker-thumb.webp", `thumb ${uid}`);
  s.tg.addFile(`tgs-${uid}`, tgs);
  s.tg.addFile(`tgst-${uid}`, thumb);
  const animated = () => realUpdate("016_sticker_animated.json", uid, "sticker", `tgs-${uid}`, tgs, { thumbnail: { file_id: `tgst-${uid}`, file_unique_id: `tgstu-${uid}`, file_size: thumb.length, width: 100, height: 100 } });
  await s.webhook(animated());
  await s.tg.waitFor(() => s.tg.sent(uid).length === cases.length + 1, 15_000, "the animated sticker answer");
  const last = s.gemini.calls(uid).at(-1).body.contents.at(-1).parts;
  assert.ok(last.some((p) => /sticker .*animated.*not viewed: an animated sticker, which I cannot view; its thumbnail is attached/.test(p.text ?? "")), JSON.stringify(last.map((p) => p.text)));
  assert.deepEqual(last.filter((p) => p.inlineData).map((p) => [p.inlineData.mimeType, Buffer.from(p.inlineData.data, "base64").equals(thumb)]), [["image/webp", true]]);
  assert.equal(s.tg.calls("getFile").filter((c) => c.body.file_id === `tgs-${uid}`).length, 0);
  await s.webhook(animated());
  await s.tg.waitFor(() => s.tg.sent(uid).length === cases.length + 2, 15_000, "the second animated sticker answer");
  assert.equal(describeCalls(thumb).length, 1, "described once, from its thumbnail");
  const row = await s.sql(`SELECT status, description FROM media WHERE file_unique_id = 'tgs-${uid}-u'`);
  assert.deepEqual(row[0], { status: "ok", description: `image/webp of ${thumb.length} bytes` });
  assert.ok(s.gemini.calls(uid).every((r) => r.status === 200), "every request passed the fake Gemini's checks");
});

test("a file whose bytes are not what its type says is refused the way Gemini refuses it, and the turn still answers", async () => {
  const uid = uniqueId();
  s.tg.addFile(`lie-${uid}`, media("document.pdf"));
  await s.webhook(photoUpdate(uid, `lie-${uid}`, { caption: "look" }));
  await s.tg.waitFor(() => s.tg.sent(uid).length === 1, 15_000, "the answer");
  const [first, second] = s.gemini.calls(uid);
  assert.equal(first.status, 400);
  assert.match(first.error, /Unable to process input image/);
  assert.equal(second.status, 200);
  assert.ok(second.body.contents.flatMap((c) => c.parts).some((p) => /photo 720x1280: not viewed: the model could not read this file/.test(p.text ?? "")));
});
