// Reading a Gemini request the worker made: what it tells the model besides the history (the
// system instruction, the same for every turn of a chat, and the turn context, the last part
// of the last user turn, which starts with TURN_CONTEXT_HEADER, see crates/core/src/prompt.rs),
// the text of its contents, the function responses it carries, whether it asks for JSON.

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

/** The text of every part of a request's contents, a line each (the history as the model
 *  reads it, the turn context included). */
export const allText = (req) => req.body.contents.flatMap((c) => c.parts).map((p) => p.text ?? "").join("\n");

/** The function responses in the newest user content of a request's body. */
export function functionResponses(body) {
  const last = [...body.contents].reverse().find((c) => c.parts.some((p) => p.functionResponse));
  return (last?.parts ?? []).filter((p) => p.functionResponse).map((p) => p.functionResponse.response);
}

/** Whether a request's body asks for a JSON answer (consolidation's structured output). */
export const isJson = (body) => body?.generationConfig?.responseMimeType === "application/json";
