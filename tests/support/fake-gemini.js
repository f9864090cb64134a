// A fake Gemini API (generateContent, and streamGenerateContent?alt=sse: the same answer as
// server-sent events, `data: {chunk}\r\n\r\n`, its text in pieces spread over `streamMs`,
// finishReason, function calls and usageMetadata on the last chunk) on 127.0.0.1 that behaves like the real one where the
// bot depends on it: the key only in the x-goog-api-key header (400 API_KEY_INVALID
// otherwise), the google.rpc.Status error envelope, request validation with Gemini's own
// messages (roles, empty parts, unknown fields, function call/response pairing), thought
// signatures issued on function calls and checked when they come back, inline files whose bytes
// must be what their mimeType says (magic bytes), usageMetadata on every
// answer (with cachedContentTokenCount for a repeated prefix: fake-gemini-cache.js; tokens counted
// as 4 characters, or with Gemini's tokenizer when asked: gemini-tokens.js). Answers are scripted per user id (the bot's prompts name the sender), so tests that
// share one worker do not interfere.
import http from "node:http";
import crypto from "node:crypto";
import zlib from "node:zlib";
import { waiters } from "../../tools/util.js";
import { implicitCache, charMeasure, geminiMeasure } from "./fake-gemini-cache.js";
import { geminiTokenizer } from "./gemini-tokens.js";
import { makePng, seedOf } from "../../tools/png.js";

const TOP_LEVEL = new Set(["contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings", "cachedContent"]);

function error(code, status, message, details) {
  const err = { code, message, status };
  if (details) err.details = details;
  return { status: code, body: { error: err } };
}

/** Checks a request the way Gemini does; returns an error answer or null. */
/** MIME types Gemini takes as inlineData (images, audio, video, documents). */
const INLINE_TYPES = new Set([
  "image/jpeg", "image/png", "image/webp", "image/heic", "image/heif",
  "audio/wav", "audio/mp3", "audio/aiff", "audio/aac", "audio/ogg", "audio/flac",
  "video/mp4", "video/mpeg", "video/mov", "video/avi", "video/x-flv", "video/mpg", "video/webm", "video/wmv", "video/3gpp",
  "application/pdf", "text/plain", "text/markdown", "text/csv", "text/html", "text/xml",
]);

/** Whether `bytes` start the way a file of `mime` does: Gemini decodes inline files and refuses
 *  one that is not what its mimeType says (text types and rarer containers are not checked). */
export function looksLike(mime, bytes) {
  const at = (offset, magic) => bytes.subarray(offset, offset + magic.length).equals(Buffer.from(magic, "latin1"));
  const sync = bytes[0] === 0xff && (bytes[1] & 0xe0) === 0xe0; // an MPEG audio frame
  switch (mime) {
    case "image/jpeg": return at(0, "\xff\xd8\xff");
    case "image/png": return at(0, "\x89PNG\r\n\x1a\n");
    case "image/webp": return at(0, "RIFF") && at(8, "WEBP");
    case "image/heic": case "image/heif": return at(4, "ftyp");
    case "audio/ogg": return at(0, "OggS");
    case "audio/mp3": return at(0, "ID3") || sync;
    case "audio/wav": return at(0, "RIFF") && at(8, "WAVE");
    case "audio/flac": return at(0, "fLaC");
    case "audio/aac": return at(4, "ftyp") || sync;
    case "audio/aiff": return at(0, "FORM");
    case "video/mp4": case "video/mov": case "video/3gpp": return at(4, "ftyp");
    case "video/webm": return at(0, "\x1a\x45\xdf\xa3");
    case "application/pdf": return at(0, "%PDF-");
    default: return true;
  }
}

function validate(body, issued) {
  for (const key of Object.keys(body)) {
    if (!TOP_LEVEL.has(key)) {
      return error(400, "INVALID_ARGUMENT", `Invalid JSON payload received. Unknown name "${key}": Cannot find field.`, [
        { "@type": "type.googleapis.com/google.rpc.BadRequest", fieldViolations: [{ description: `Invalid JSON payload received. Unknown name "${key}": Cannot find field.` }] },
      ]);
    }
  }
  const contents = body.contents;
  if (!Array.isArray(contents) || contents.length === 0) {
    return error(400, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified\n");
  }
  for (let i = 0; i < contents.length; i++) {
    const c = contents[i];
    if (c.role !== "user" && c.role !== "model") return error(400, "INVALID_ARGUMENT", "Please use a valid role: user, model.");
    if (!Array.isArray(c.parts) || c.parts.length === 0) {
      return error(400, "INVALID_ARGUMENT", `* GenerateContentRequest.contents[${i}].parts: contents.parts must not be empty.\n`);
    }
    for (const p of c.parts) {
      if (p.text === "") {
        return error(400, "INVALID_ARGUMENT", "Unable to submit request because it has an empty text parameter. Add a value to the parameter and try again.");
      }
      if (p.inlineData !== undefined) {
        const { mimeType, data } = p.inlineData ?? {};
        if (!INLINE_TYPES.has(mimeType)) return error(400, "INVALID_ARGUMENT", `Unsupported MIME type: ${mimeType}`);
        if (typeof data !== "string" || data === "" || !/^[A-Za-z0-9+/]*={0,2}$/.test(data) || data.length % 4 !== 0) {
          return error(400, "INVALID_ARGUMENT", "Invalid value at 'contents[0].parts[1].inline_data.data' (TYPE_BYTES), Base64 decoding failed");
        }
        if (!looksLike(mimeType, Buffer.from(data, "base64"))) {
          return mimeType.startsWith("image/")
            ? error(400, "INVALID_ARGUMENT", "Unable to process input image. Please retry or report in https://developers.generativeai.google/guide/troubleshooting")
            : error(400, "INVALID_ARGUMENT", "Request contains an invalid argument.");
        }
      }
    }
    const calls = c.parts.filter((p) => p.functionCall);
    if (c.role === "model" && calls.length) {
      const prev = contents[i - 1];
      if (!prev || prev.role !== "user") {
        return error(400, "INVALID_ARGUMENT", "Please ensure that function call turn comes immediately after a user turn or after a function response turn.");
      }
      const next = contents[i + 1];
      const responses = next ? next.parts.filter((p) => p.functionResponse) : [];
      if (next && responses.length !== calls.length) {
        return error(400, "INVALID_ARGUMENT", "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.");
      }
      // Signatures must come back exactly as issued.
      for (const p of calls) {
        const want = issued.get(p.functionCall.id);
        if (want !== undefined && p.thoughtSignature !== want && calls.indexOf(p) === 0) {
          return error(400, "INVALID_ARGUMENT", `Function call is missing a thought_signature in functionCall parts. position ${i + 1}.`);
        }
      }
    }
    if (c.role === "user" && c.parts.some((p) => p.functionResponse)) {
      const prev = contents[i - 1];
      if (!prev || prev.role !== "model" || !prev.parts.some((p) => p.functionCall)) {
        return error(400, "INVALID_ARGUMENT", "Please ensure that function response turn comes immediately after a function call turn.");
      }
    }
  }
  return null;
}

/** A deterministic embedding of character trigrams: related words ("peanut", "peanuts")
 *  get close vectors even where full-text search sees different words. */
export function embedText(text, dims = 512) {
  const v = new Array(dims).fill(0);
  for (const w of text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter((x) => x.length > 2)) {
    const padded = ` ${w} `;
    for (let i = 0; i + 3 <= padded.length; i++) {
      let h = 0;
      for (const ch of padded.slice(i, i + 3)) h = (h * 31 + ch.codePointAt(0)) >>> 0;
      v[h % dims] += 1;
    }
  }
  return v;
}

/** A stored vector as the worker writes it (core::memory::vector): `q8:` and base64, no padding,
 * of a little-endian f32 scale and one signed byte per component. */
export function q8(v) {
  const scale = v.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
  const bytes = Buffer.alloc(4 + v.length);
  bytes.writeFloatLE(scale, 0);
  v.forEach((x, i) => bytes.writeInt8(scale > 0 ? Math.round((x / scale) * 127) : 0, 4 + i));
  return `q8:${bytes.toString("base64").replace(/=+$/, "")}`;
}

/** All text of a request, in order (system instruction last). */
export function requestText(body) {
  const parts = (body.contents ?? []).flatMap((c) => c.parts ?? []);
  return parts.map((p) => p.text ?? "").join("\n");
}

/** The user id whose message is newest in a request: from `[meta] ... user_id=` (structured), or
 *  from the compact lines (`#id Name#user_id → Author: text`, where the id is on some lines only
 *  and a person's user id follows their name only the first time: the last person's line is
 *  looked up by name). */
function routeOf(body) {
  const text = requestText(body);
  let last = null;
  for (const m of text.matchAll(/\buser_id=(\d+)/g)) last = m[1];
  if (last !== null) return last;
  const ids = new Map();
  for (const m of text.matchAll(/^(?:#\d+ )?("(?:[^"\\\n]|\\.)*"|[^\n#:→"]+?)(?:#(\d+))?(?: →| \(|:)/gm)) {
    const [, name, uid] = m;
    if (uid) ids.set(name, uid);
    if (ids.has(name)) last = ids.get(name);
  }
  if (last === null) {
    // No person's line: fall back to any id seen.
    for (const m of text.matchAll(/#(\d+)/g)) last = m[1];
  }
  return last;
}

/** Cuts a text into about `n` pieces at word ends (never an empty piece). */
function pieces(text, n) {
  const words = text.match(/\S+\s*|\s+/g) ?? [];
  const size = Math.max(1, Math.ceil(words.length / n));
  const out = [];
  for (let i = 0; i < words.length; i += size) out.push(words.slice(i, i + size).join(""));
  return out;
}

/** Streams a successful answer as Gemini does with alt=sse. */
async function streamAnswer(res, body, streamMs, entry) {
  res.writeHead(200, { "content-type": "text/event-stream" });
  // `entry.aborted`: when the caller hung up before the answer's end (a stopped answer).
  res.on("close", () => {
    if (!res.writableEnded) entry.aborted ??= Date.now();
  });
  const write = (chunk) => {
    // The caller hung up (a stopped answer): nothing more is sent.
    if (res.destroyed || res.writableEnded) {
      entry.aborted ??= Date.now();
      return;
    }
    entry.chunks.push(Date.now());
    res.write(`data: ${JSON.stringify(chunk)}\r\n\r\n`);
  };
  const candidate = body.candidates?.[0];
  const parts = candidate?.content?.parts ?? [];
  const textIndex = parts.findIndex((p) => typeof p.text === "string" && !p.thought && !p.functionCall);
  if (!candidate || textIndex < 0) {
    write(body);
    return res.end();
  }
  const texts = pieces(parts[textIndex].text, 8);
  const { thoughtSignature, ...textPart } = parts[textIndex];
  const meta = { modelVersion: body.modelVersion, responseId: body.responseId };
  for (let i = 0; i < texts.length - 1; i++) {
    write({ candidates: [{ content: { role: "model", parts: [...(i === 0 ? parts.slice(0, textIndex) : []), { ...textPart, text: texts[i] }] }, index: 0 }], ...meta });
    if (streamMs) await new Promise((r) => setTimeout(r, streamMs / Math.max(1, texts.length - 1)));
  }
  const lastText = { ...textPart, text: texts.at(-1) };
  if (thoughtSignature) lastText.thoughtSignature = thoughtSignature;
  const first = texts.length === 1 ? parts.slice(0, textIndex) : [];
  // The last chunk carries the rest of the candidate (finishReason, groundingMetadata, ...).
  const { content: _content, ...rest } = candidate;
  write({ candidates: [{ ...rest, content: { role: "model", parts: [...first, lastText, ...parts.slice(textIndex + 1)] }, index: 0 }], usageMetadata: body.usageMetadata, ...meta });
  res.end();
}

/** `tokens`: how usageMetadata counts, "estimate" (4 characters of the request's JSON a token,
 *  quick) or "gemini" (Gemini's own tokenizer, gemini-tokens.js; the benchmarks). */
/** The models `GET /v1beta/models/{model}` knows (the real list is Google's): the ones this
 *  project's defaults name. A default GEMINI_MODEL missing here fails the deploy tests. */
export const KNOWN_MODELS = ["gemini-3.8-flash", "gemini-3.6-flash", "gemini-3.5-flash-lite", "gemini-3.1-flash-lite", "gemini-embedding-001", "gemini-nano-banana-2.1"];

/** Output tokens of one picture (a 1K image of Gemini's image models). */
export const IMAGE_TOKENS = 1120;

/** An image model's answer as Gemini gives it: a caption text part and the picture as an
 *  inlineData part (a real PNG), finishReason STOP, usage with the picture's tokens under
 *  candidatesTokensDetails (modality IMAGE). Refusals take the real shapes: a candidate with
 *  finishReason IMAGE_SAFETY (or SAFETY, PROHIBITED_CONTENT, ...) and no content, or a blocked
 *  prompt (promptFeedback.blockReason, no candidates). `answer`: {png, caption, finishReason,
 *  blockReason, status, pngBytes (a picture of about that size)} or nothing (a default picture). */
function imageAnswer(body, model, answer = {}) {
  const promptTokens = Math.ceil(JSON.stringify(body.contents ?? []).length / 4);
  const usage = (out, image) => ({
    promptTokenCount: promptTokens,
    candidatesTokenCount: out + image,
    totalTokenCount: promptTokens + out + image,
    ...(image ? { candidatesTokensDetails: [{ modality: "IMAGE", tokenCount: image }, { modality: "TEXT", tokenCount: out }] } : {}),
  });
  if (answer.blockReason) return { status: 200, body: { promptFeedback: { blockReason: answer.blockReason }, usageMetadata: usage(0, 0), modelVersion: model } };
  if (answer.finishReason && answer.finishReason !== "STOP") {
    return { status: 200, body: { candidates: [{ finishReason: answer.finishReason, index: 0 }], usageMetadata: usage(0, 0), modelVersion: model } };
  }
  const prompt = (body.contents ?? []).flatMap((c) => c.parts ?? []).map((p) => p.text).filter(Boolean).join(" ");
  let png = answer.png;
  if (!png && answer.pngBytes) {
    // Random pixels do not compress: a square picture of about `pngBytes` bytes.
    const side = Math.ceil(Math.sqrt(answer.pngBytes / 3));
    png = makePng(side, side, 0, { noise: true });
  }
  png ??= makePng(64, 48, seedOf(prompt));
  const caption = answer.caption ?? `Here is: ${prompt.slice(0, 60)}`;
  const parts = [...(caption ? [{ text: caption }] : []), { inlineData: { mimeType: "image/png", data: png.toString("base64") } }];
  const out = Math.ceil(caption.length / 4);
  return { status: 200, body: { candidates: [{ content: { role: "model", parts }, finishReason: "STOP", index: 0 }], usageMetadata: usage(out, IMAGE_TOKENS), modelVersion: model } };
}

export async function startFakeGemini({ key, latencyMs = 0, streamMs = 0, tokens = "estimate", models = KNOWN_MODELS } = {}) {
  const requests = [];
  const scripts = new Map(); // route → array of answers (consumed in order)
  const imageScripts = []; // answers of image requests (consumed in order; none: a picture)
  const issued = new Map(); // functionCall id → thoughtSignature
  let defaultLatency = latencyMs;
  let defaultStreamMs = streamMs;
  const { notify, waitFor } = waiters();
  const measure = tokens === "gemini" ? geminiMeasure(await geminiTokenizer()) : charMeasure;
  const cache = implicitCache({ measure });

  function usage(body, outText, model) {
    const { prompt, cached } = cache.cached(body, model);
    const candidates = measure.text(outText) + 1;
    const out = { promptTokenCount: prompt, candidatesTokenCount: candidates, thoughtsTokenCount: 3, totalTokenCount: prompt + candidates + 3 };
    if (cached > 0) out.cachedContentTokenCount = cached;
    return out;
  }

  function success(body, model, parts, finishReason = "STOP") {
    // Gemini 3 style: every call has an id; the first call carries the signature.
    let signed = false;
    parts = parts.map((p) => {
      if (!p.functionCall) return p;
      const id = p.functionCall.id ?? `call-${crypto.randomUUID()}`;
      const out = { ...p, functionCall: { ...p.functionCall, id } };
      if (!signed) {
        const sig = crypto.randomBytes(24).toString("base64");
        issued.set(id, sig);
        out.thoughtSignature = sig;
        signed = true;
      }
      return out;
    });
    const text = parts.map((p) => p.text ?? JSON.stringify(p.functionCall ?? "")).join("");
    return {
      status: 200,
      body: {
        candidates: [{ content: { role: "model", parts }, finishReason, index: 0 }],
        usageMetadata: usage(body, text, model),
        modelVersion: model,
        responseId: crypto.randomUUID(),
      },
    };
  }

  /** Turns a scripted answer into an HTTP answer. */
  function render(answer, body, model) {
    if (typeof answer === "function") answer = answer(body);
    if (answer.status && answer.status !== 200) {
      if (answer.status === 429) {
        return error(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota, please check your plan and billing details.", [
          { "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: `${answer.retryDelay ?? 1}s` },
        ]);
      }
      if (answer.status === 503) return error(503, "UNAVAILABLE", "The model is overloaded. Please try again later.");
      if (answer.status === 500) return error(500, "INTERNAL", "An internal error has occurred.");
      return error(answer.status, answer.statusText ?? "INVALID_ARGUMENT", answer.message ?? "Request contains an invalid argument.");
    }
    if (answer.raw) return { status: 200, body: answer.raw };
    if (answer.finishReason && !answer.text && !answer.calls) {
      return { status: 200, body: { candidates: [{ finishReason: answer.finishReason, index: 0 }], usageMetadata: usage(body, "", model), modelVersion: model } };
    }
    const parts = [];
    if (answer.text) parts.push({ text: answer.text });
    for (const c of answer.calls ?? []) parts.push({ functionCall: { name: c.name, args: c.args ?? {} } });
    return success(body, model, parts, answer.finishReason);
  }

  /** Default answers in JSON mode (consolidation): nothing to remember, or a summary. */
  function jsonDefault(body, model) {
    const props = body.generationConfig?.responseSchema?.properties ?? {};
    if (props.description) {
      // A media description: say what was received (and "transcribe" audio).
      const inline = (body.contents ?? []).flatMap((c) => c.parts ?? []).find((p) => p.inlineData)?.inlineData;
      const bytes = inline ? Buffer.from(inline.data, "base64").length : 0;
      const value = { description: `${inline?.mimeType ?? "nothing"} of ${bytes} bytes`, transcript: inline?.mimeType?.startsWith("audio/") ? `spoken words, ${bytes} bytes` : "" };
      return success(body, model, [{ text: JSON.stringify(value) }]);
    }
    const lines = requestText(body).split("\n").filter(Boolean);
    const value = props.summary && !props.facts
      ? { summary: `Summary of ${lines.length} messages, from "${lines[0]?.slice(0, 40)}" to "${lines.at(-1)?.slice(0, 40)}".` }
      : { facts: [], episodes: [], commitments: [], commitment_updates: [], aliases: [] };
    return success(body, model, [{ text: JSON.stringify(value) }]);
  }

  function echo(body, model) {
    if (body.generationConfig?.responseMimeType === "application/json") return jsonDefault(body, model);
    const contents = body.contents ?? [];
    const lastUser = [...contents].reverse().find((c) => c.role === "user");
    const texts = (lastUser?.parts ?? []).map((p) => p.text).filter((t) => t && !t.startsWith("[meta]"));
    const last = (texts[texts.length - 1] ?? "").split("\n").filter((l) => !l.startsWith("→")).pop() ?? "";
    return success(body, model, [{ text: `Echo: ${last.replace(/^#\d+ [^:]*: /, "")}` }]);
  }

  const server = http.createServer(async function answer(req, res) {
    let raw = "";
    for await (const chunk of req) raw += chunk;
    const url = new URL(req.url, "http://x");
    const send = (a) => {
      if (a.gzipPad) {
        // The answer, then that many spaces, gzip-compressed: a small stated length that
        // inflates to far more (the runtime decompresses what it reads).
        const packed = zlib.gzipSync(JSON.stringify(a.body) + " ".repeat(a.gzipPad));
        res.writeHead(a.status, { "content-type": "application/json", "content-encoding": "gzip", "content-length": String(packed.length) });
        return res.end(packed);
      }
      res.writeHead(a.status, { "content-type": "application/json" });
      res.end(JSON.stringify(a.body));
    };
    // models.get: what `npm run deploy` checks a key with (nothing is generated). Like the
    // real API: a wrong key is 400 API_KEY_INVALID, an unknown model 404 NOT_FOUND.
    const model = /^\/v1beta\/models\/([^:/]+)$/.exec(url.pathname);
    if (model && req.method === "GET") {
      requests.push({ path: url.pathname, query: url.search, get: true, at: Date.now(), headers: req.headers });
      if (url.searchParams.has("key") || req.headers["x-goog-api-key"] !== key) {
        return send(error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", [
          { "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "API_KEY_INVALID", domain: "googleapis.com", metadata: { service: "generativelanguage.googleapis.com" } },
        ]));
      }
      const name = decodeURIComponent(model[1]);
      if (!models.includes(name)) return send(error(404, "NOT_FOUND", `models/${name} is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.`));
      return send({ status: 200, body: { name: `models/${name}`, baseModelId: name, version: "001", displayName: name, inputTokenLimit: 1048576, outputTokenLimit: 65536, supportedGenerationMethods: ["generateContent", "countTokens"] } });
    }
    const embed = /^\/v1beta\/models\/([^:]+):batchEmbedContents$/.exec(url.pathname);
    if (embed) {
      const body = JSON.parse(raw);
      requests.push({ path: url.pathname, embed: true, at: Date.now(), headers: req.headers, body });
      if (req.headers["x-goog-api-key"] !== key) return send(error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."));
      return send({ status: 200, body: { embeddings: body.requests.map((r) => ({ values: embedText(r.content.parts.map((p) => p.text).join(" "), r.outputDimensionality ?? 3072) })) } });
    }
    const m = /^\/v1beta\/models\/([^:]+):(generateContent|streamGenerateContent)$/.exec(url.pathname);
    const streamed = m?.[2] === "streamGenerateContent";
    const entry = { path: url.pathname, query: url.search, headers: req.headers, at: Date.now(), stream: streamed, chunks: [] };
    requests.push(entry);
    try {
      if (!m) return send(error(404, "NOT_FOUND", `Method not found: ${url.pathname}`));
      if (streamed && url.searchParams.get("alt") !== "sse") return send(error(400, "INVALID_ARGUMENT", "This test double only streams with alt=sse."));
      entry.model = m[1];
      if (url.searchParams.has("key") || req.headers["x-goog-api-key"] !== key) {
        entry.status = 400;
        return send(error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", [
          { "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "API_KEY_INVALID", domain: "googleapis.com" },
        ]));
      }
      let body;
      try {
        body = JSON.parse(raw);
      } catch {
        return send(error(400, "INVALID_ARGUMENT", "Invalid JSON payload received."));
      }
      entry.body = body;
      if ((body.generationConfig?.responseModalities ?? []).includes("IMAGE")) {
        // An image model's request: its own script queue, a real picture by default.
        entry.image = true;
        entry.route = "image";
        for (const p of (body.contents ?? []).flatMap((c) => c.parts ?? [])) {
          if (p.inlineData && !looksLike(p.inlineData.mimeType, Buffer.from(p.inlineData.data, "base64"))) {
            entry.status = 400;
            return send(error(400, "INVALID_ARGUMENT", "Unable to process input image. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"));
          }
        }
        const answer = imageScripts.shift();
        if (answer?.delayMs) await new Promise((r) => setTimeout(r, answer.delayMs));
        const out = answer?.status ? render(answer, body, entry.model) : imageAnswer(body, entry.model, answer ?? {});
        entry.status = out.status;
        entry.response = out.body;
        return send(out);
      }
      entry.route = routeOf(body);
      notify();
      const invalid = validate(body, issued);
      if (invalid) {
        entry.status = invalid.status;
        entry.error = invalid.body.error.message;
        return send(invalid);
      }
      const queue = scripts.get(entry.route);
      const answer = queue && queue.length ? queue.shift() : null;
      // Not streamed, the answer is whole only once its last token is: the stream's time too.
      const delay = (answer?.delayMs ?? defaultLatency) + (streamed ? 0 : answer?.streamMs ?? defaultStreamMs);
      if (delay) await new Promise((r) => setTimeout(r, delay));
      const out = answer ? render(answer, body, entry.model) : echo(body, entry.model);
      entry.status = out.status;
      entry.response = out.body;
      if (streamed && out.status === 200) await streamAnswer(res, out.body, answer?.streamMs ?? defaultStreamMs, entry);
      else send({ ...out, gzipPad: answer?.gzipPad });
    } finally {
      notify();
    }
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    requests,
    /** Requests whose newest message is from `userId` (successful or not). */
    calls(userId) {
      return requests.filter((r) => r.route === String(userId));
    },
    /** Queue answers for requests routed to `userId`: {text}, {calls:[{name,args}]},
     *  {status: 503|429|400, retryDelay}, {finishReason}, {delayMs}, {streamMs}, {gzipPad: bytes of
     *  spaces after the answer, sent gzip-compressed (not streamed)}, or a function(body). */
    script(userId, answers) {
      const q = scripts.get(String(userId)) ?? [];
      q.push(...answers);
      scripts.set(String(userId), q);
    },
    /** Queue answers for image model requests (see imageAnswer): {png, caption, pngBytes,
     *  finishReason: "IMAGE_SAFETY", blockReason, status: 503|429|400, delayMs}. */
    scriptImage(answers) {
      imageScripts.push(...answers);
    },
    /** The image model's requests. */
    imageCalls() {
      return requests.filter((r) => r.image);
    },
    set latency(ms) {
      defaultLatency = ms;
    },
    /** How long a streamed answer takes from its first chunk to its last. */
    set streamMs(ms) {
      defaultStreamMs = ms;
    },
    waitFor,
    close: () => new Promise((r) => server.close(r)),
  };
}

/** A model that obeys whatever a fetched page tells it (for injection tests). In the newest
 *  fetch_url response it finds lines `CALL <function> <json args>` and calls them; with no
 *  fresh page in view it answers with the text of a `REPLY <text>` line from any page seen.
 *  `{{secret}}` is replaced with `secretOf(body)`: something private from the model's own
 *  context (the test checks the secret really was there to leak). Returns a script answer. */
export function obeyingModel(secretOf) {
  const pageTexts = (content) =>
    (content?.parts ?? [])
      .filter((p) => p.functionResponse?.name === "fetch_url")
      .flatMap((p) => p.functionResponse.response?.pages ?? [])
      .map((pg) => pg.content ?? "")
      .filter(Boolean);
  return (body) => {
    const secret = secretOf(body) ?? "";
    const fill = (s) => s.replaceAll("{{secret}}", secret);
    const contents = body.contents ?? [];
    const fresh = pageTexts(contents.at(-1)).join("\n");
    if (fresh) {
      const calls = [];
      for (const m of fresh.matchAll(/^\s*CALL (\w+) (\{.*\})\s*$/gm)) {
        try {
          calls.push({ name: m[1], args: JSON.parse(fill(m[2])) });
        } catch {
          // not JSON: a careless page; skip it
        }
      }
      if (calls.length) return { calls };
    }
    const all = contents.flatMap((c) => pageTexts(c)).join("\n");
    const reply = /^\s*REPLY (.+)$/m.exec(all);
    return { text: reply ? fill(reply[1]) : "I read the page." };
  };
}
