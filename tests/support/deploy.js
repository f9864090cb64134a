// The deploy tests' harness: a fresh fake account (the fake Cloudflare API, the fake
// Telegram, the fake Gemini for the key check, an empty home and deploy record) and a runner for scripts/deploy.mjs and
// scripts/destroy.mjs that points the real wrangler at the fake (CLOUDFLARE_API_BASE_URL,
// CLOUDFLARE_API_TOKEN, CLOUDFLARE_ACCOUNT_ID). wrangler builds (scripts/build.sh finds the
// worker npm test built), bundles and uploads the real worker.
import { after } from "node:test";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startFakeCloudflare } from "./fake-cloudflare.js";
import { startFakeTelegram } from "../../tools/telegram-emulator.js";
import { startFakeGemini } from "./fake-gemini.js";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const TOKEN = "123456789:TEST-token_for-the-fake";
export const GEMINI_KEY = "gemini-key-for-the-deploy-test";
export const WORKER_URL = "https://edge-agent.test-account.workers.dev";
export const MIGRATIONS = fs.readdirSync(path.join(ROOT, "migrations")).filter((f) => f.endsWith(".sql")).sort();
export const TOML = fs.readFileSync(path.join(ROOT, "wrangler.toml"), "utf8");

const closers = [];
after(async () => {
  for (const close of closers) await close();
});

/**
 * A fresh account: fake Cloudflare (`cloudflare` are its options: a brand-new account has
 * `subdomain: null`), fake Telegram for the bot `token`, fake Gemini, an empty home and deploy
 * record. `cf` shares another account's fake Cloudflare (a second bot in the same account,
 * deployed from another checkout: its own record and bot).
 */
export async function account({ cloudflare = {}, cf: shared, token = TOKEN, username = "edge_test_bot" } = {}) {
  const cf = shared ?? (await startFakeCloudflare(cloudflare));
  const tg = await startFakeTelegram({ token, bot: { id: Number(token.split(":")[0]), first_name: "Edge", username } });
  const gemini = await startFakeGemini({ key: GEMINI_KEY });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "edge-agent-deploy-test-"));
  closers.push(() => tg.close(), () => gemini.close(), () => fs.rmSync(dir, { recursive: true, force: true }));
  if (!shared) closers.push(() => cf.close());
  const home = os.homedir();
  const env = {
    PATH: process.env.PATH,
    // No wrangler login of this machine is seen; the Rust toolchain (for the build) still is.
    HOME: dir,
    XDG_CONFIG_HOME: path.join(dir, ".config"),
    RUSTUP_HOME: process.env.RUSTUP_HOME ?? path.join(home, ".rustup"),
    CARGO_HOME: process.env.CARGO_HOME ?? path.join(home, ".cargo"),
    EDGE_AGENT_TOOLS: process.env.EDGE_AGENT_TOOLS ?? path.join(home, ".cache/edge-agent"),
    CLOUDFLARE_API_BASE_URL: cf.base,
    CLOUDFLARE_API_TOKEN: cf.token,
    CLOUDFLARE_ACCOUNT_ID: cf.accountId,
    TELEGRAM_API_BASE: tg.base,
    GEMINI_API_BASE: gemini.base,
    DEPLOY_WORKER_ORIGIN: cf.origin,
    DEPLOY_VARS_FILE: path.join(dir, ".deploy.vars"),
    DEPLOY_HEALTH_WAIT_MS: "0",
  };
  for (const name of ["RUSTUP_TOOLCHAIN", "WASM_BINDGEN_BIN", "ESBUILD_BIN", "WASM_OPT_BIN"]) {
    if (process.env[name]) env[name] = process.env[name];
  }
  return { cf, tg, gemini, dir, env, vars: () => readVars(env.DEPLOY_VARS_FILE) };
}

function readVars(file) {
  if (!fs.existsSync(file)) return {};
  return Object.fromEntries(fs.readFileSync(file, "utf8").split("\n").filter((l) => /^[A-Z_]+=/.test(l)).map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]));
}

/** Runs scripts/<script> with the account's environment plus `env`; no terminal. */
export function run(acct, script, { env = {}, args = [] } = {}) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(ROOT, "scripts", script), ...args], {
      cwd: ROOT,
      env: { ...acct.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (code) => resolve({ code, stdout, stderr, all: `${stdout}\n${stderr}` }));
  });
}

/**
 * Runs scripts/<script> on a terminal (util-linux `script` gives it a pseudo-terminal) and
 * types each answer when its prompt (a RegExp) has appeared. Resolves {code, output}: all the
 * terminal showed. Null when `script` is not installed.
 */
export function runOnTerminal(acct, scriptName, answers, { env = {} } = {}) {
  const tool = ["/usr/bin/script", "/bin/script"].find((p) => fs.existsSync(p));
  if (!tool) return null;
  const command = [process.execPath, path.join(ROOT, "scripts", scriptName)].map((a) => `'${a}'`).join(" ");
  return new Promise((resolve) => {
    const child = spawn(tool, ["-qec", command, "/dev/null"], { cwd: ROOT, env: { ...acct.env, ...env }, stdio: ["pipe", "pipe", "pipe"] });
    let output = "";
    const pending = [...answers];
    const onData = (d) => {
      output += d;
      while (pending.length && pending[0].prompt.test(output)) child.stdin.write(`${pending.shift().answer}\r`);
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("close", (code) => resolve({ code, output, unanswered: pending.length }));
  });
}

export const deploy = (acct, env) => run(acct, "deploy.mjs", { env });
/** Runs the project's wrangler with the account's environment (the old deploy's steps). */
export function wranglerIn(acct, args, { input } = {}) {
  return new Promise((resolve) => {
    const child = spawn(path.join(ROOT, "node_modules/.bin/wrangler"), args, { cwd: ROOT, env: { ...acct.env, WRANGLER_SEND_METRICS: "false" }, stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"] });
    let all = "";
    child.stdout.on("data", (d) => (all += d));
    child.stderr.on("data", (d) => (all += d));
    if (input !== undefined) child.stdin.end(input);
    child.on("close", (code) => resolve({ code, all }));
  });
}
export const OTHER_TOKEN = "555666777:SECOND-bot_token-for-the-fake";
export const firstDeployEnv = { TELEGRAM_BOT_TOKEN: TOKEN, GEMINI_API_KEY: GEMINI_KEY };
export const creations = (cf) => cf.calls.filter((c) => c.method === "POST" && /\/(d1\/database|queues)$/.test(c.path));
export const uploads = (cf) => cf.calls.filter((c) => (c.method === "PUT" && /\/workers\/scripts\/[^/]+$/.test(c.path)) || (c.method === "POST" && /\/workers\/scripts\/[^/]+\/versions$/.test(c.path)));
export const occurrences = (text, needle) => text.split(needle).length - 1;
