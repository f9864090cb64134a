// Shared by scripts/deploy.mjs and scripts/destroy.mjs: running wrangler, reading what it
// said, the deploy's local record (.deploy.vars), hidden prompts, and wrangler.toml's names.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { readVars } from "../tools/util.js";
import { ScriptError } from "./webhook.mjs";
import { tomlVar } from "./deploy-plan.mjs";

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export { ScriptError };

export const fail = (message) => {
  throw new ScriptError(message);
};

/**
 * Runs wrangler (the project's own copy) and resolves {code, stdout, stderr, output}. stdin is
 * closed unless `input` is given, so wrangler never prompts and never rewrites wrangler.toml
 * (it only writes provisioned ids back when it runs on a terminal).
 */
export function wrangler(args, { input, env = {} } = {}) {
  const bin = path.join(root, "node_modules/.bin/wrangler");
  return new Promise((resolve) => {
    const child = spawn(fs.existsSync(bin) ? bin : "wrangler", args, {
      cwd: root,
      // Node's compile cache makes each of the deploy's wrangler runs start faster.
      env: { NODE_COMPILE_CACHE: path.join(os.tmpdir(), "edge-agent-node-compile-cache"), ...process.env, WRANGLER_SEND_METRICS: "false", FORCE_COLOR: "0", ...env },
      stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    if (input !== undefined) child.stdin.end(input);
    child.on("error", (e) => resolve({ code: 127, stdout, stderr: `${stderr}${e.message}`, output: e.message }));
    child.on("close", (code) => resolve({ code: code ?? 1, stdout, stderr, output: strip(`${stdout}\n${stderr}`) }));
  });
}

/** Text without terminal colours. */
export function strip(text) {
  // eslint-disable-next-line no-control-regex
  return text.replace(/\u001b\[[0-9;]*m/g, "");
}

/** The error wrangler reported (its ✘ [ERROR] block), else the end of its output. */
export function wranglerError(result) {
  const text = result.output;
  const i = text.indexOf("[ERROR]");
  let block = i >= 0 ? text.slice(i + "[ERROR]".length) : text.trim().split("\n").slice(-8).join("\n");
  block = block.split(/\n\s*(?:If you think this is a bug|🪵 {2}Logs were written)/)[0];
  return block.replace(/\n{2,}/g, "\n").trim();
}

/** The JSON value wrangler printed (after any banner lines). */
export function parseJson(text) {
  const start = text.search(/^[[{]/m);
  if (start < 0) throw new Error("no JSON in wrangler's output");
  return JSON.parse(text.slice(start));
}

/** wrangler.toml's text. */
export function projectToml() {
  return fs.readFileSync(path.join(root, "wrangler.toml"), "utf8");
}

/**
 * The default names in wrangler.toml: the worker, its D1 database and queues (those of
 * `npm run dev` and of a deployment under the default name; scripts/deploy-plan.mjs names a
 * deployment's resources after its worker).
 */
export function projectNames() {
  const toml = projectToml();
  const worker = /^name\s*=\s*"([^"]+)"/m.exec(toml)?.[1];
  const database = /^database_name\s*=\s*"([^"]+)"/m.exec(toml)?.[1];
  return { worker, database, jobs: tomlVar(toml, "JOBS_QUEUE"), dead: tomlVar(toml, "DEAD_LETTER_QUEUE") };
}

/** The deploy's local record: KEY=VALUE lines, mode 600, never committed. */
export function stateFile() {
  return process.env.DEPLOY_VARS_FILE || path.join(root, ".deploy.vars");
}

export function readState() {
  return readVars(stateFile());
}

export function writeState(vars) {
  const lines = [
    "# Written by npm run deploy (never commit this file): the bot's secrets and where it runs.",
    ...Object.entries(vars).filter(([, v]) => v !== undefined && v !== "").map(([k, v]) => `${k}=${v}`),
  ];
  fs.writeFileSync(stateFile(), `${lines.join("\n")}\n`, { mode: 0o600 });
  fs.chmodSync(stateFile(), 0o600);
}

/** Asks a question on the terminal; `hidden` echoes nothing (for secrets). */
export function ask(question, { hidden = false } = {}) {
  const stdin = process.stdin;
  // Echo goes off before the question shows, so nothing typed after it is ever shown.
  if (hidden) stdin.setRawMode(true);
  process.stderr.write(question);
  return new Promise((resolve) => {
    let value = "";
    stdin.setEncoding("utf8");
    stdin.resume();
    const done = () => {
      stdin.off("data", onData);
      if (hidden) stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write("\n");
      resolve(value.trim());
    };
    const onData = (chunk) => {
      for (const c of chunk) {
        if (c === "\r" || c === "\n") return done();
        if (c === "\u0003") {
          process.stderr.write("\n");
          process.exit(130);
        }
        if (c === "\u007f" || c === "\b") value = value.slice(0, -1);
        else value += c;
      }
    };
    stdin.on("data", onData);
  });
}

export const interactive = () => Boolean(process.stdin.isTTY);
