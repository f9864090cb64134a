// The offline stand-in model of the local playground: a deterministic Gemini-compatible
// generateContent endpoint (and streamGenerateContent?alt=sse, the same answer as one event), so the whole pipeline (turns, actions, memory consolidation) runs
// with no API key. It is not an AI: it echoes, reacts 👍 to the message it answers,
// remembers what follows the word "remember", draws a small PNG for "draw ..." (and a lighter
// one for "make it brighter", from the picture it made), sets a reminder for "remind me in 1
// minute to ..." (the bot's schedule_message tool; when it is due the bot speaks first, the
// stand-in writing the reminder). Every answer says it is the stand-in.

import { makePng, seedOf } from "./png.js";

const LABEL = "🤖 offline stand-in model";

/** An image model's request (text and image out): a small generated PNG (its colour from the
 *  prompt; "brighter" makes a lighter one) with a caption, as Gemini's image models answer. */
function pictureAnswer(body, model) {
  const prompt = (body.contents ?? []).flatMap((c) => c.parts ?? []).map((p) => p.text).filter(Boolean).join(" ");
  const sources = (body.contents ?? []).flatMap((c) => c.parts ?? []).filter((p) => p.inlineData).length;
  const seed = /brighter|lighter/i.test(prompt) ? 255 : seedOf(prompt);
  const png = makePng(96, 64, seed);
  const caption = `(${LABEL}) ${sources ? `an edit of ${sources} photo(s): ` : ""}${prompt.slice(0, 200)}`;
  return {
    candidates: [{ content: { role: "model", parts: [{ text: caption }, { inlineData: { mimeType: "image/png", data: png.toString("base64") } }] }, finishReason: "STOP", index: 0 }],
    usageMetadata: { promptTokenCount: Math.ceil(prompt.length / 4), candidatesTokenCount: 1130, totalTokenCount: Math.ceil(prompt.length / 4) + 1130, candidatesTokensDetails: [{ modality: "IMAGE", tokenCount: 1120 }, { modality: "TEXT", tokenCount: 10 }] },
    modelVersion: `${model} (offline stand-in)`,
  };
}

/** The newest picture the bot made that the request shows (its message id), for "make it
 *  brighter": the answer to its generate_image call (structured history replays the bot's
 *  turns as they were), or its compact line (`#id bot: [photo: a picture the bot made: ...]`). */
function lastBotPicture(body) {
  let id = null;
  for (const c of body.contents ?? []) {
    for (const p of c.parts ?? []) {
      const sent = p.functionResponse?.name === "generate_image" ? p.functionResponse.response?.message_ids?.[0] : null;
      if (sent) id = Number(sent);
      const compact = [...(p.text ?? "").matchAll(/^#(\d+) .*a picture the bot made/gm)].at(-1);
      if (compact) id = Number(compact[1]);
    }
  }
  return id;
}

function lastUserText(body) {
  const contents = body.contents ?? [];
  const user = [...contents].reverse().find((c) => c.role === "user" && (c.parts ?? []).some((p) => p.text));
  const texts = (user?.parts ?? []).map((p) => p.text).filter((t) => t && !t.startsWith("[meta]"));
  let last = texts.at(-1) ?? "";
  // Compact history: the line before the answer marker, without its prefix.
  const lines = last.split("\n").filter((l) => l && !l.startsWith("→"));
  last = lines.at(-1) ?? last;
  return last.replace(/^#\d+ [^:]*: /, "").trim();
}

/** The message the turn answers, from the turn context (the last user content's last part). */
function targetMessage(body) {
  const user = [...(body.contents ?? [])].reverse().find((c) => c.role === "user" && (c.parts ?? []).some((p) => p.text));
  const context = (user?.parts ?? []).map((p) => p.text ?? "").filter((t) => t.startsWith("[meta] turn context")).join("\n");
  const m = /Answer message #(\d+)/.exec(context);
  return m ? Number(m[1]) : null;
}

function usage(body, out) {
  const prompt = Math.ceil(JSON.stringify(body).length / 4);
  const candidates = Math.ceil(out.length / 4) + 1;
  return { promptTokenCount: prompt, candidatesTokenCount: candidates, totalTokenCount: prompt + candidates };
}

function answer(body, model, parts) {
  return {
    candidates: [{ content: { role: "model", parts }, finishReason: "STOP", index: 0 }],
    usageMetadata: usage(body, JSON.stringify(parts)),
    modelVersion: `${model} (offline stand-in)`,
  };
}

/** Consolidation (JSON mode): picks up "my name is X" and "I work as a Y" — nothing clever. */
function structured(body, model) {
  const props = body.generationConfig?.responseSchema?.properties ?? {};
  const text = (body.contents ?? []).flatMap((c) => c.parts ?? []).map((p) => p.text ?? "").join("\n");
  if (props.summary && !props.facts) {
    const lines = text.split("\n").filter(Boolean);
    return answer(body, model, [{ text: JSON.stringify({ summary: `(${LABEL}) ${lines.length} earlier messages, starting with: ${lines[0]?.slice(0, 80) ?? ""}` }) }]);
  }
  const facts = [];
  for (const line of text.split("\n")) {
    const who = /^#\d+ ([^#:]+)(?:#(\d+))?/.exec(line);
    const userId = who?.[2] ? Number(who[2]) : null;
    const name = /my name is (\p{L}+)/iu.exec(line);
    if (name) facts.push({ about_user_id: userId, entity: who?.[1]?.trim() ?? "someone", attribute: "name", value: name[1], confidence: 0.9 });
    const job = /i (?:work as|am) an? ([\p{L} ]{3,40})/iu.exec(line);
    if (job) facts.push({ about_user_id: userId, entity: who?.[1]?.trim() ?? "someone", attribute: "job", value: job[1].trim(), confidence: 0.7 });
  }
  return answer(body, model, [{ text: JSON.stringify({ facts, episodes: [], commitments: [], commitment_updates: [], aliases: [] }) }]);
}

/** What files the newest user content carries, in words: "image/png (3 KB)". */
function filesSent(body) {
  const user = [...(body.contents ?? [])].reverse().find((c) => c.role === "user");
  return (user?.parts ?? [])
    .filter((p) => p.inlineData)
    .map((p) => {
      const bytes = Buffer.from(p.inlineData.data ?? "", "base64").length;
      const size = bytes >= 1024 ? `${Math.round(bytes / 1024)} KB` : `${bytes} bytes`;
      return `${p.inlineData.mimeType} (${size})`;
    });
}

/** Crew mode: the persona a request is for (its instruction says "You are <name> in a crew"). */
function crewPersona(body) {
  const system = (body.systemInstruction?.parts ?? []).map((p) => p.text).join("\n");
  return /You are (.+?) in a crew/.exec(system)?.[1] ?? null;
}

/** Crew mode: a persona speaks once after a person's message, then passes (so a cycle ends
 *  with everyone passing). A person's message is a [meta] part not named "(crew)"/"(bot)". */
function crewAnswer(body, model, persona) {
  const contents = body.contents ?? [];
  const isPerson = (p) => /^\[meta\] (message_id|user_id|name)=/.test(p.text ?? "") && !/name="[^"]*\((crew|bot)\)"/.test(p.text);
  let lastPerson = -1;
  contents.forEach((c, i) => {
    if (c.role === "user" && (c.parts ?? []).some(isPerson)) lastPerson = i;
  });
  const spoke = contents.slice(lastPerson + 1).some((c) => c.role === "model");
  if (spoke) return answer(body, model, [{ functionCall: { name: "pass", args: {} } }]);
  return answer(body, model, [{ text: `(${LABEL}) ${persona} here. You said: “${lastUserText(body).slice(0, 200)}”` }]);
}

/** Rich answers to try with no tokens: "table" answers with a Markdown table; "long" with a
 *  long answer that streams slowly (`streamParts`), to press Stop in. */
const TABLE_ANSWER = `(${LABEL}) A table, as asked:\n\n| planet | moons | day (h) |\n|---|---:|---:|\n| Mercury | 0 | 4223 |\n| Earth | 1 | 24 |\n| Mars | 2 | 24.6 |\n\nAnd a formula: $E = mc^2$.`;
function longAnswer() {
  return `(${LABEL}) A long answer, streamed slowly.\n\n` + Array.from({ length: 30 }, (_, i) => `Part ${i + 1}: the stand-in keeps writing so there is time to press Stop.`).join("\n\n");
}
function richText(text) {
  if (/\btable\b/i.test(text)) return TABLE_ANSWER;
  if (/\blong\b/i.test(text)) return longAnswer();
  return null;
}

/** "remind me in 1 minute to stretch" (seconds, minutes or hours; "to" optional): the
 *  schedule_message arguments the bot's tool accepts (`text`, `in_minutes`), or null. */
export function reminderRequest(text) {
  const m = /\bremind me in (\d+(?:\.\d+)?|an?|one) ?(seconds?|secs?|s|minutes?|mins?|m|hours?|h)\b[,:]?\s*(?:to\s+)?(.+)/i.exec(text);
  if (!m) return null;
  const n = /^(an?|one)$/i.test(m[1]) ? 1 : Number(m[1]);
  const unit = m[2].toLowerCase();
  const minutes = unit.startsWith("s") ? n / 60 : unit.startsWith("h") ? n * 60 : n;
  if (!(minutes > 0)) return null;
  return { text: m[3].trim().slice(0, 200), in_minutes: Number(minutes.toFixed(4)) };
}

/** A scheduled turn (the bot's own reminder come due): what was scheduled, quoted in the
 *  turn's situation ("What you scheduled (data, as it was set): \"stretch\""), or null. */
function scheduledText(body) {
  const texts = [...(body.systemInstruction?.parts ?? []), ...(body.contents ?? []).flatMap((c) => c.parts ?? [])].map((p) => p.text ?? "");
  for (const t of texts) {
    if (!t.includes("This turn is a scheduled follow-up")) continue;
    const m = /What you scheduled \(data, as it was set\): ("(?:[^"\\]|\\.)*")/.exec(t);
    if (!m) return "";
    try {
      return JSON.parse(m[1]);
    } catch {
      return m[1].slice(1, -1);
    }
  }
  return null;
}

/** What schedule_message answered in this request (the tool's result), if it did. */
function scheduleResult(body) {
  const last = body.contents?.at(-1);
  return (last?.parts ?? []).map((p) => p.functionResponse).find((r) => r?.name === "schedule_message")?.response ?? null;
}

/** Answers one generateContent request body. */
export function offlineAnswer(body, model) {
  const files = filesSent(body);
  if (body.generationConfig?.responseSchema?.properties?.description) {
    // A media description: say what was received.
    return answer(body, model, [{ text: JSON.stringify({ description: `(${LABEL}) ${files[0] ?? "nothing"}`, transcript: "" }) }]);
  }
  if (body.generationConfig?.responseMimeType === "application/json") return structured(body, model);
  if ((body.generationConfig?.responseModalities ?? []).includes("IMAGE")) return pictureAnswer(body, model);
  const last = body.contents?.at(-1);
  // Tool results end the request only within a turn; a person's new message after a replayed
  // action shares that content (it has its [meta] part), and is answered.
  const newMessage = last?.parts?.some((p) => (p.text ?? "").startsWith("[meta]"));
  if (last?.parts?.some((p) => p.functionResponse) && !newMessage) {
    // After tool results (or when function calling is off): a plain answer; a reminder set is
    // confirmed with its time, as the tool asks.
    const set = scheduleResult(body);
    if (set?.ok) return answer(body, model, [{ text: `(${LABEL}) Okay, I'll remind you: ${set.next_run ?? "soon"} (reminder #${set.id}).` }]);
    if (set) return answer(body, model, [{ text: `(${LABEL}) I could not set that reminder: ${set.error ?? "refused"}` }]);
    return answer(body, model, [{ text: `(${LABEL}) Done.` }]);
  }
  // The bot's own reminder, come due: the bot speaks first.
  const due = scheduledText(body);
  if (due !== null) return answer(body, model, [{ text: `(${LABEL}) ⏰ Reminder: ${due || "you asked me to remind you"}` }]);
  const persona = crewPersona(body);
  if (persona && !files.length) return crewAnswer(body, model, persona);
  const text = lastUserText(body);
  const rich = !files.length && richText(text);
  if (rich) return answer(body, model, [{ text: rich }]);
  const parts = [{ text: files.length ? `(${LABEL}) I received ${files.join(", ")}.` : `(${LABEL}) You said: “${text.slice(0, 300)}”` }];
  const target = targetMessage(body);
  const toolsOn = !body.toolConfig && (body.tools ?? []).length > 0;
  if (toolsOn && target) parts.push({ functionCall: { name: "react", args: { message_id: target, emoji: "👍" } } });
  const offersPictures = (body.tools ?? []).some((t) => (t.functionDeclarations ?? []).some((d) => d.name === "generate_image"));
  const draw = /^(?:please\s+)?(?:draw|paint|sketch)\b\s*(.*)/i.exec(text);
  if (offersPictures && draw) parts.push({ functionCall: { name: "generate_image", args: { prompt: draw[1] || text } } });
  const edit = /\bmake (?:it|that|the (?:last |second |first )?(?:one|picture)) (.+)/i.exec(text);
  const picture = edit && lastBotPicture(body);
  if (offersPictures && picture) parts.push({ functionCall: { name: "generate_image", args: { prompt: `the same picture, ${edit[1]}`, photo_message_ids: [picture] } } });
  const reminder = toolsOn && reminderRequest(text);
  if (reminder) return answer(body, model, [{ functionCall: { name: "schedule_message", args: reminder } }]);
  const remember = /\bremember\b[:,]?\s*(.+)/i.exec(text);
  if (toolsOn && remember) parts.push({ functionCall: { name: "remember", args: { content: remember[1].slice(0, 200) } } });
  return answer(body, model, parts);
}

/** Serves POST /v1beta/models/<model>:generateContent (and :streamGenerateContent?alt=sse);
 *  returns false for other paths. */
export async function handleOfflineModel(req, res) {
  const m = /^\/v1beta\/models\/([^:/]+):(generateContent|streamGenerateContent)$/.exec(new URL(req.url, "http://x").pathname);
  if (!m || req.method !== "POST") return false;
  let raw = "";
  for await (const chunk of req) raw += chunk;
  let body;
  try {
    body = JSON.parse(raw);
  } catch {
    res.writeHead(400, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { code: 400, message: "Invalid JSON payload received.", status: "INVALID_ARGUMENT" } }));
    return true;
  }
  if (m[2] === "streamGenerateContent") {
    res.writeHead(200, { "content-type": "text/event-stream" });
    const whole = offlineAnswer(body, m[1]);
    const text = whole.candidates[0].content.parts.length === 1 ? whole.candidates[0].content.parts[0].text : null;
    if (text && text.length > 1500) {
      // A long answer streams slowly: a piece every 300 ms (about 10 s in all).
      const pieces = text.match(/[\s\S]{1,60}/g);
      for (let i = 0; i < pieces.length; i++) {
        const last = i === pieces.length - 1;
        const event = { ...whole, candidates: [{ ...whole.candidates[0], content: { role: "model", parts: [{ text: pieces[i] }] }, finishReason: last ? "STOP" : undefined }] };
        if (!last) delete event.usageMetadata;
        if (res.destroyed) return true;
        res.write(`data: ${JSON.stringify(event)}\r\n\r\n`);
        if (!last) await new Promise((r) => setTimeout(r, 300));
      }
      res.end();
      return true;
    }
    res.end(`data: ${JSON.stringify(whole)}\r\n\r\n`);
    return true;
  }
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify(offlineAnswer(body, m[1])));
  return true;
}
