// The link rule on the newest paths (issue 47, items 2 and 6): a link no person posted is never
// sent as a live, previewable link, whatever the renderer (a rich message's table cell) and
// however it is spelt (`https:\/\/`, entities); the check reads the payload that is sent. A
// guest answer, in a chat of strangers, follows the same rule.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack, privateText, uniqueId, sleep, TOKEN } from "../support/stack.js";

const ALLOWED_GROUP = -1009000000002;
let s;
before(async () => {
  s = await startStack({ vars: { DM_POLICY: "open", GROUP_ALLOWLIST: String(ALLOWED_GROUP), DRAFT_INTERVAL_MS: "200" } });
});
after(async () => {
  await s?.close();
});

const SENDS = new Set(["sendMessage", "sendRichMessage", "editMessageText"]);
/** Every final send to `chat` (or with `inline`'s id) that would show a live link to evil.example. */
function liveEvilLinks(filter) {
  return s.tg.requests.filter((r) => SENDS.has(r.method) && filter(r)).filter((r) => {
    const html = r.body.rich_message?.html ?? r.body.text ?? "";
    return /href="[^"]*evil\.example/.test(html) || (r.body.entities ?? []).some((e) => e.type === "text_link" && /evil\.example/.test(e.url));
  });
}

test("a link hidden in a table cell as https:\\/\\/ goes as an ordinary message with previews off, never a live rich link", async () => {
  for (const cell of ["[see](https:\\/\\/evil.example/?d=secret)", "[see](https:&#x2F;&#x2F;evil.example/?d=secret)"]) {
    const uid = uniqueId();
    s.gemini.script(uid, [{ text: `Prices:\n\n| item | link |\n|---|---|\n| tea | ${cell} |\n` }]);
    await s.webhook(privateText(uid, "what does tea cost?"));
    await s.tg.waitFor(() => s.finalSent(uid).length >= 1 || s.tg.calls("sendRichMessage", uid).length >= 1, 20_000, "the answer");
    await sleep(500);
    assert.equal(s.tg.calls("sendRichMessage", uid).length, 0, `${cell}: no rich message (it cannot turn previews off)`);
    const [sent] = s.finalSent(uid);
    assert.equal(sent.body.link_preview_options?.is_disabled, true, `${cell}: previews off`);
    assert.deepEqual(liveEvilLinks((r) => r.body.chat_id === uid), [], `${cell}: no live link to it`);
  }
});

test("a table whose link the person posted still goes rich", async () => {
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "| page | note |\n|---|---|\n| [docs](https://example.com/docs) | yours |\n" }]);
  await s.webhook(privateText(uid, "put https://example.com/docs in a table"));
  await s.tg.waitFor(() => s.tg.calls("sendRichMessage", uid).some((r) => r.rich !== undefined), 20_000, "the rich answer");
  assert.match(s.tg.calls("sendRichMessage", uid)[0].body.rich_message.html, /href="https:\/\/example\.com\/docs"/);
});

test("a guest answer's model-written link is shown as text with previews off; the caller's own link stays", async () => {
  s.tg.setGuestMode(true);
  await s.restart();
  const uid = uniqueId();
  s.gemini.script(uid, [{ text: "Read [this](https://evil.example/?d=secret) first." }, { text: "It is [the docs](https://example.com/docs)." }]);
  const u = s.tg.guestMessage(ALLOWED_GROUP, uid, "@edge_test_bot what should I read?");
  await s.webhook(u);
  const inline = () => s.tg.guestMessages(ALLOWED_GROUP).find((m) => m.query === u.guest_message.guest_query_id)?.inline_message_id;
  await s.tg.waitFor(() => inline() && s.tg.guestSent(inline()).edits === 1, 20_000, "the answer edited in");
  const [edit] = s.tg.requests.filter((r) => r.method === "editMessageText" && r.body.inline_message_id === inline());
  assert.equal(edit.body.link_preview_options?.is_disabled, true);
  assert.deepEqual(liveEvilLinks((r) => r.body.inline_message_id === inline()), []);
  assert.match(s.tg.guestSent(inline()).text, /Read this first\./);
  // The fake refuses link preview options that are not a LinkPreviewOptions object, as Telegram does.
  const bad = await fetch(`${s.tg.base}/bot${TOKEN}/editMessageText`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ inline_message_id: inline(), text: "x", link_preview_options: "off" }),
  });
  assert.equal(bad.status, 400);

  const u2 = s.tg.guestMessage(ALLOWED_GROUP, uid, "@edge_test_bot what is https://example.com/docs ?");
  await s.webhook(u2);
  const inline2 = () => s.tg.guestMessages(ALLOWED_GROUP).find((m) => m.query === u2.guest_message.guest_query_id)?.inline_message_id;
  await s.tg.waitFor(() => inline2() && s.tg.guestSent(inline2()).edits === 1, 20_000, "the second answer");
  const [edit2] = s.tg.requests.filter((r) => r.method === "editMessageText" && r.body.inline_message_id === inline2());
  assert.match(edit2.body.text, /href="https:\/\/example\.com\/docs"/, "the caller posted it");
  assert.notEqual(edit2.body.link_preview_options?.is_disabled, true);
});
