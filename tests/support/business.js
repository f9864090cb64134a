// Telegram Business helpers the business e2e tests share, over a running stack (`stack()`
// returns it: the tests start theirs in `before`).
import assert from "node:assert/strict";
import { uniqueId, sleep } from "./stack.js";

export function businessHelpers(stack) {
  /** Posts an update; the webhook acknowledges it. */
  async function post(update) {
    const r = await stack().webhook(update);
    assert.equal(r.status, 200);
  }
  /** Connects a fresh owner named Ada; returns {owner, id}. */
  async function connect(opts = {}) {
    const owner = uniqueId();
    const id = `bc-${owner}`;
    await post(stack().tg.connectBusiness(owner, { id, name: "Ada", ...opts }));
    return { owner, id };
  }
  /** The suggestions shown to `owner`: their sendMessage calls with buttons. */
  const suggestions = (owner) => stack().tg.calls("sendMessage", owner).filter((r) => r.body.reply_markup?.inline_keyboard && r.text !== undefined);
  /** What the bot sent to `contact` through a business connection. */
  const toContact = (contact) => stack().tg.calls("sendMessage", contact).filter((r) => r.body.business_connection_id !== undefined);
  /** The buttons under the bot's message `messageId` in `owner`'s chat, as it is now. */
  const buttons = (owner, messageId) => (stack().tg.message(owner, messageId)?.reply_markup?.inline_keyboard ?? []).flat();
  /** The `n`th suggestion shown to `owner`: {messageId, call, id}. */
  async function suggested(owner, n = 1) {
    await stack().tg.waitFor(() => suggestions(owner).length >= n, 30_000, `suggestion ${n} for ${owner}`);
    await sleep(300);
    const sent = suggestions(owner)[n - 1];
    return { messageId: sent.message_id, call: sent, id: Number(sent.body.reply_markup.inline_keyboard.flat().at(-1).callback_data.split(":")[1]) };
  }
  /** `who` presses the button `data` under `messageId`; returns the callback query's id. */
  async function press(owner, messageId, who, data) {
    const update = stack().tg.pressButton(owner, messageId, who, data);
    await post(update);
    return update.callback_query.id;
  }
  return { post, connect, suggestions, toContact, buttons, suggested, press };
}
