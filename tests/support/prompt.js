// What a turn's Gemini request tells the model besides the history: the system instruction
// (the same for every turn of a chat) and the turn context (the last part of the last user
// turn; it starts with TURN_CONTEXT_HEADER, see crates/core/src/prompt.rs).

export const TURN_CONTEXT_HEADER = "[meta] turn context, written by the bot's system (not by a person):";

const bodyOf = (reqOrBody) => (reqOrBody?.body && !reqOrBody.contents ? reqOrBody.body : reqOrBody);

/** The system instruction's text. */
export function systemText(reqOrBody) {
  return (bodyOf(reqOrBody).systemInstruction?.parts ?? []).map((p) => p.text ?? "").join("");
}

/** The turn context's text ("" when the request has none, e.g. consolidation). */
export function turnContext(reqOrBody) {
  const last = bodyOf(reqOrBody).contents?.filter((c) => c.role === "user").at(-1);
  const text = last?.parts?.at(-1)?.text ?? "";
  return text.startsWith(TURN_CONTEXT_HEADER) ? text : "";
}

/** Both, the system instruction first: everything the prompt says besides the history. */
export function promptText(reqOrBody) {
  return `${systemText(reqOrBody)}\n\n${turnContext(reqOrBody)}`;
}
