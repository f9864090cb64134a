// The Cloudflare API calls deploy and destroy make themselves (wrangler does the building,
// uploading and migrating): the login's token and account, and the checks wrangler does not
// make before it creates something (workers.dev subdomain, token permissions, what an existing
// worker, database or queue belongs to). Answers come in the API's envelope
// ({success, errors, result}); a refusal throws an ApiError with Cloudflare's code and words.
import { wrangler, parseJson, ask, interactive, fail } from "./wrangler-run.mjs";

export class ApiError extends Error {
  constructor(status, errors, method, path) {
    const first = errors?.[0] ?? {};
    super(`${first.message ?? `HTTP ${status}`} [code: ${first.code ?? status}]`);
    this.status = status;
    this.code = first.code ?? null;
    this.errors = errors ?? [];
    this.where = `${method} ${path}`;
  }
}

/** Whether the API said the credentials are missing or invalid (not: lack a permission). */
const isLoginError = (e) => e instanceof ApiError && (e.status === 401 || [9106, 9109, 6003, 6111].includes(e.code));

export const NOT_LOGGED_IN =
  "you are not logged in to Cloudflare. Run `npm run login` (the project's own wrangler, after its setup), or set CLOUDFLARE_API_TOKEN to an API token with the permissions listed in README (\"An API token for CI\"), then `npm run deploy` again.";

/** Every permission the deploy uses, as Cloudflare's token editor names them. */
export const PERMISSIONS = [
  "Account · Workers Scripts · Edit",
  "Account · D1 · Edit",
  "Account · Queues · Edit",
  "Account · Account Settings · Read",
  "User · Memberships · Read",
  "User · User Details · Read",
];

/**
 * The credentials wrangler uses (`wrangler auth token --json`, which refreshes an expired
 * login): an API token (CLOUDFLARE_API_TOKEN or the login's OAuth token) or a global key with
 * its email. Null when not logged in.
 */
async function loginHeaders() {
  if (process.env.CLOUDFLARE_API_TOKEN) return { authorization: `Bearer ${process.env.CLOUDFLARE_API_TOKEN}` };
  const r = await wrangler(["auth", "token", "--json"]);
  if (r.code !== 0) return null;
  let parsed;
  try {
    parsed = parseJson(r.stdout);
  } catch {
    return null;
  }
  if (parsed.type === "api_key" && parsed.key && parsed.email) return { "x-auth-key": parsed.key, "x-auth-email": parsed.email };
  return parsed.token ? { authorization: `Bearer ${parsed.token}` } : null;
}

/**
 * Connects: the token and the account (CLOUDFLARE_ACCOUNT_ID, else the token's only account,
 * else asked on a terminal). Exports CLOUDFLARE_ACCOUNT_ID so every wrangler run after this uses
 * the same account. Returns {accountId, call, get, a} (`a` is the account's path prefix).
 */
export async function connect() {
  const base = (process.env.CLOUDFLARE_API_BASE_URL || "https://api.cloudflare.com/client/v4").replace(/\/$/, "");
  const auth = await loginHeaders();
  if (!auth) fail(NOT_LOGGED_IN);

  async function call(method, path, body) {
    let res;
    try {
      res = await fetch(`${base}${path}`, {
        method,
        headers: { ...auth, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(30_000),
      });
    } catch (e) {
      fail(`could not reach the Cloudflare API (${e.cause?.code ?? e.message}); check your connection and run again`);
    }
    const json = await res.json().catch(() => ({ success: false, errors: [{ code: res.status, message: `HTTP ${res.status}` }] }));
    if (!res.ok || json.success === false) throw new ApiError(res.status, json.errors, method, path.split("?")[0]);
    return json.result;
  }
  const get = (path) => call("GET", path);

  let accountId = process.env.CLOUDFLARE_ACCOUNT_ID;
  if (!accountId) {
    let accounts;
    try {
      accounts = await get("/accounts?per_page=50");
    } catch (e) {
      if (isLoginError(e) || (e instanceof ApiError && e.status === 403)) fail(NOT_LOGGED_IN);
      throw e;
    }
    if (accounts.length === 1) accountId = accounts[0].id;
    else if (accounts.length === 0) fail("this Cloudflare login has no account. Sign up at dash.cloudflare.com first, then run again.");
    else {
      const list = accounts.map((x, i) => `  ${i + 1}. ${x.name} (${x.id})`).join("\n");
      if (!interactive()) fail(`this login has ${accounts.length} Cloudflare accounts; say which: CLOUDFLARE_ACCOUNT_ID=<id> npm run deploy\n${list}`);
      const answer = await ask(`Your login has ${accounts.length} Cloudflare accounts:\n${list}\nDeploy to which one (number)? `);
      accountId = accounts[Number(answer) - 1]?.id;
      if (!accountId) fail("no such account; nothing was created.");
    }
  }
  process.env.CLOUDFLARE_ACCOUNT_ID = accountId;
  return { accountId, a: `/accounts/${accountId}`, call, get };
}

/**
 * Reads what the deploy needs to decide anything, each read also checking the login (with
 * CLOUDFLARE_ACCOUNT_ID nothing before this has) and a permission the later writes need (a
 * token that cannot read a kind of resource cannot edit it either): the account's workers, D1
 * databases and queues. Stops, naming every missing permission, before anything is created.
 */
export async function accountState(api) {
  const reads = [
    ["scripts", `${api.a}/workers/scripts`, "Account · Workers Scripts · Edit"],
    ["databases", `${api.a}/d1/database?per_page=1000`, "Account · D1 · Edit"],
    ["queues", `${api.a}/queues?per_page=1000`, "Account · Queues · Edit"],
  ];
  const state = {};
  const missing = [];
  for (const [key, path, permission] of reads) {
    try {
      state[key] = await api.get(path);
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      if (isLoginError(e)) fail(NOT_LOGGED_IN);
      if (e.status === 403 || e.code === 10000) missing.push(`${permission} (GET ${path.split("?")[0].replace(api.a, "/accounts/…")} answered: ${e.message})`);
      else fail(`could not read your account's ${key}: ${e.message}`);
    }
  }
  if (missing.length) {
    fail(
      `your Cloudflare API token lacks permissions this deploy needs, so nothing was created:\n  - ${missing.join("\n  - ")}\n` +
        `Edit the token (dash.cloudflare.com → My Profile → API Tokens) to have all of: ${PERMISSIONS.join("; ")}. ` +
        `The "Edit Cloudflare Workers" template alone has no D1 or Queues permission: add both. Then run npm run deploy again.`,
    );
  }
  return state;
}

/** The bindings of a deployed worker (its current settings), or [] when it has none. */
export async function scriptBindings(api, name) {
  try {
    const settings = await api.get(`${api.a}/workers/scripts/${encodeURIComponent(name)}/settings`);
    return settings?.bindings ?? [];
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return [];
    throw e;
  }
}

/** Which other workers are bound to a database id or a queue name: {database: Map, queue: Map}. */
export async function bindingsByResource(api, scripts, except) {
  const database = new Map();
  const queue = new Map();
  for (const s of scripts) {
    const name = s.id ?? s.name;
    if (name === except) continue;
    for (const b of await scriptBindings(api, name)) {
      if (b.type === "d1") database.set(b.id ?? b.database_id, name);
      if (b.type === "queue") queue.set(b.queue_name, name);
    }
  }
  return { database, queue };
}

const NO_SUBDOMAIN =
  "your Cloudflare account has no workers.dev subdomain yet, and the bot needs one for its address (https://<worker>.<subdomain>.workers.dev). " +
  "Open dash.cloudflare.com → Workers & Pages once and pick a subdomain there (or run npm run deploy on a terminal, which offers to register one, or set WORKERS_DEV_SUBDOMAIN=<name>), then run npm run deploy again. Nothing was created.";

/**
 * The account's workers.dev subdomain: {subdomain} when it has one. A brand-new account has
 * none (code 10007): on a terminal (or with WORKERS_DEV_SUBDOMAIN) a free name is chosen now
 * and {subdomain, register} returned (register() creates it, after every other check); else
 * the deploy stops here, before anything is created.
 */
export async function workersDevSubdomain(api) {
  try {
    return { subdomain: (await api.get(`${api.a}/workers/subdomain`)).subdomain };
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    if (e.status === 403 || e.code === 10000) fail(`your API token may not read the account's workers.dev subdomain (${e.message}); it needs ${PERMISSIONS[0]}. Nothing was created.`);
    if (e.code !== 10007) fail(`could not read your account's workers.dev subdomain: ${e.message}`);
  }
  const fromEnv = process.env.WORKERS_DEV_SUBDOMAIN;
  if (!fromEnv && !interactive()) fail(NO_SUBDOMAIN);
  if (!fromEnv) {
    process.stderr.write(
      "Your Cloudflare account has no workers.dev subdomain yet: every worker's address is <worker>.<subdomain>.workers.dev,\n" +
        "and the subdomain is chosen once per account (your name or your project's, say).\n",
    );
  }
  for (;;) {
    const wanted = (fromEnv ?? (await ask("Register which workers.dev subdomain (letters, digits, dashes; empty to stop)? "))).trim().toLowerCase();
    if (!wanted) fail(NO_SUBDOMAIN);
    let problem = null;
    if (!/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/.test(wanted)) problem = `"${wanted}" cannot be a workers.dev subdomain: 1 to 63 letters, digits and dashes, not starting or ending with a dash`;
    else problem = await subdomainTaken(api, wanted);
    if (!problem) {
      return {
        subdomain: wanted,
        register: async () => {
          try {
            await api.call("PUT", `${api.a}/workers/subdomain`, { subdomain: wanted });
          } catch (e) {
            if (!(e instanceof ApiError)) throw e;
            fail(`Cloudflare did not register the workers.dev subdomain "${wanted}": ${e.message}. Choose another (WORKERS_DEV_SUBDOMAIN=<name>, or in the dashboard: Workers & Pages), then run again. Nothing was created.`);
          }
          console.error(`deploy: workers.dev subdomain registered: ${wanted}.workers.dev (a new one can take a few minutes to be reachable)`);
        },
      };
    }
    if (fromEnv) fail(`${problem}. Choose another (WORKERS_DEV_SUBDOMAIN=<name>) and run again. Nothing was created.`);
    process.stderr.write(`${problem}; try another.\n`);
  }
}

/**
 * Why a subdomain cannot be had, or null when it is free. The API answers the availability
 * check with an error either way, as the dashboard reads it: 10032 free, 10031 taken.
 */
async function subdomainTaken(api, name) {
  try {
    const r = await api.get(`${api.a}/workers/subdomains/${encodeURIComponent(name)}`);
    return r?.available === false ? `the workers.dev subdomain "${name}" is taken` : null;
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    if (e.code === 10032) return null;
    if (e.code === 10031) return `the workers.dev subdomain "${name}" is taken`;
    return `could not check whether "${name}" is free (${e.message})`;
  }
}

/** Runs a read-only SQL statement on a D1 database; its rows. */
export async function d1Rows(api, databaseId, sql) {
  const result = await api.call("POST", `${api.a}/d1/database/${databaseId}/query`, { sql, params: [] });
  return result?.[0]?.results ?? [];
}
