// The deploy's decisions, as functions over what the Cloudflare API answered (no IO here, so
// tests/e2e/deploy-plan.test.js can try each case): which resources a worker uses, whether a
// worker of that name is this bot, whether an existing database may be adopted, and the
// wrangler configuration written for one deployment.

/** The resources a new deployment named `name` creates: every one takes the worker's name. */
export function resourceNames(name) {
  return { database: name, jobs: `${name}-jobs`, dead: `${name}-dead-letters` };
}

/**
 * The resources a deployed worker is bound to (its DB, JOBS and DEAD_LETTERS bindings), by
 * name; `databases` is the account's D1 list (a binding names its database by id). Null when
 * the worker has none of them (not this project, or nothing readable).
 */
export function boundResources(bindings, databases) {
  const byName = (n) => bindings.find((b) => b.name === n);
  const db = byName("DB");
  const jobs = byName("JOBS");
  const dead = byName("DEAD_LETTERS");
  if (!db && !jobs && !dead) return null;
  const dbId = db?.id ?? db?.database_id;
  return {
    database: databases.find((d) => d.uuid === dbId)?.name ?? null,
    databaseId: dbId ?? null,
    jobs: jobs?.queue_name ?? null,
    dead: dead?.queue_name ?? null,
  };
}

/**
 * Whether the worker with these bindings is this bot: "ours" (the chat-object class and the
 * bot id the deploy records as BOT_ID), "other-bot" (this project, another bot), "unknown-bot"
 * (this project, deployed before BOT_ID was recorded), "foreign" (not this project).
 */
export function ownership(bindings, botId) {
  if (!isThisProject(bindings)) return "foreign";
  const id = recordedBotId(bindings);
  if (id === null) return "unknown-bot";
  return id === String(botId) ? "ours" : "other-bot";
}

/** Whether a worker's bindings are this project's: it has the chat-object class. */
export function isThisProject(bindings) {
  return bindings.some((b) => b.type === "durable_object_namespace" && b.class_name === "ChatObject");
}

/** The bot id recorded on a worker (its BOT_ID var), or null (none, or empty). */
export function recordedBotId(bindings) {
  const id = String(bindings.find((x) => x.name === "BOT_ID" && x.type === "plain_text")?.text ?? "").trim();
  return id === "" ? null : id;
}

/**
 * The other worker that uses a queue (bound to it, or its consumer; a queue has one), or
 * undefined. `queues` is the account's queue list, `others` the bindings of every other worker
 * by resource (cloudflare-api's bindingsByResource).
 */
export function queueUser(queue, queues, others, self) {
  const q = queues.find((x) => x.queue_name === queue);
  return others.queue.get(queue) ?? q?.consumers?.map((c) => c.script ?? c.service).find((s) => s && s !== self);
}

/**
 * What to do about an upload wrangler could not finish, by Cloudflare's code (or its words
 * where wrangler rewords it); null when the error is none of these.
 */
export function uploadAdvice(error) {
  if (/\b10034\b/.test(error) || /verify your email/i.test(error)) {
    return "Cloudflare publishes workers only for accounts whose email address is verified. Open the verification email Cloudflare sent you (dash.cloudflare.com → My Profile shows the address and can send it again), click its link, then run npm run deploy again: the database is ready and the rest picks up from here.";
  }
  if (/\b10027\b/.test(error) || /exceeded the size limit/i.test(error)) {
    return "the worker is larger than your plan allows (the Free plan takes 3 MB compressed, Workers Paid 10 MB). BENCHMARKS.md gives the worker's size; upgrade the plan or build a smaller worker, then run npm run deploy again.";
  }
  if (/\b10072\b/.test(error) || /too_many_crons|limit of \d+ cron triggers/i.test(error)) {
    return "your account is at its limit of cron triggers, which all its workers share (Free plan: 5). The bot uses one (memory consolidation every 30 minutes). Remove a cron trigger from a worker you no longer need (dash.cloudflare.com → Workers & Pages → the worker → Settings → Triggers), then run npm run deploy again: the worker is uploaded and the rerun adds its trigger.";
  }
  if (/\b11004\b/.test(error) || /consumer_exists/i.test(error)) {
    return "a queue of this bot's already has a consumer (another worker); a queue has one. Deploy under another name (WORKER_NAME=<name> npm run deploy).";
  }
  if (/\b11003\b/.test(error) || /maximum number of queues/i.test(error)) {
    return "Cloudflare refused to create a queue: your account is at its queue limit. Delete queues you no longer use (npx wrangler queues list, npx wrangler queues delete <name>) or raise the limit (Workers Paid), then run npm run deploy again. The database is ready; nothing was uploaded.";
  }
  return null;
}

/**
 * Whether a D1 database that already exists may become this bot's: `tables` are its table
 * names, `applied` the names in its d1_migrations table (null when it has none), `ours` this
 * project's migration files. Empty, or only this project's migrations: yes.
 * Returns {ok, why}.
 */
export function adoptable({ tables, applied }, ours) {
  const user = tables.filter((t) => !/^(sqlite_|_cf_|d1_migrations$)/.test(t));
  if (applied === null || applied.length === 0) {
    return user.length === 0 ? { ok: true } : { ok: false, why: `it holds tables of another project (${user.slice(0, 5).join(", ")}) and none of this project's migrations` };
  }
  const foreign = applied.filter((m) => !ours.includes(m));
  if (foreign.length) return { ok: false, why: `its migrations are not this project's (${foreign.slice(0, 3).join(", ")})` };
  return { ok: true };
}

/** Reads a [vars] value from wrangler.toml's text ("" when absent). */
export function tomlVar(toml, key) {
  const vars = /^\[vars\]\s*$([\s\S]*?)(?=^\[|(?![\s\S]))/m.exec(toml)?.[1] ?? "";
  return new RegExp(`^${key}\\s*=\\s*"([^"]*)"`, "m").exec(vars)?.[1] ?? "";
}

/**
 * The wrangler configuration for one deployment: wrangler.toml with the worker's name, its
 * database and queues, and the vars the worker reads its queue names and the bot id from
 * (bindings do not expose a queue's name to the worker), and the Mini App's address
 * (`miniAppUrl`: MINIAPP_URL, for the buttons under /memory and /reminders) unless
 * wrangler.toml sets one. Throws when wrangler.toml no longer has a line this rewrites (so a
 * renamed key cannot silently deploy the defaults).
 */
export function deployConfig(toml, defaults, { name, database, jobs, dead, botId, miniAppUrl }) {
  let out = toml;
  const swap = (pattern, value, what) => {
    if (!pattern.test(out)) throw new Error(`wrangler.toml has no ${what} to set`);
    out = out.replace(pattern, (_, key) => `${key}"${value}"`);
  };
  const q = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  swap(/^(name\s*=\s*)"[^"]*"/m, name, "name");
  swap(/^(database_name\s*=\s*)"[^"]*"/m, database, "database_name");
  swap(new RegExp(`^(queue\\s*=\\s*)"${q(defaults.jobs)}"`, "gm"), jobs, `queue "${defaults.jobs}"`);
  swap(new RegExp(`^(queue\\s*=\\s*)"${q(defaults.dead)}"`, "gm"), dead, `queue "${defaults.dead}"`);
  swap(new RegExp(`^(dead_letter_queue\\s*=\\s*)"${q(defaults.dead)}"`, "gm"), dead, "dead_letter_queue");
  swap(/^(JOBS_QUEUE\s*=\s*)"[^"]*"/m, jobs, "JOBS_QUEUE var");
  swap(/^(DEAD_LETTER_QUEUE\s*=\s*)"[^"]*"/m, dead, "DEAD_LETTER_QUEUE var");
  swap(/^(BOT_ID\s*=\s*)"[^"]*"/m, String(botId), "BOT_ID var");
  if (miniAppUrl && !tomlVar(toml, "MINIAPP_URL")) {
    out = out.replace(/^MINIAPP_URL\s*=.*\n?/m, "").replace(/^(BOT_ID\s*=.*)$/m, `$1\nMINIAPP_URL = "${miniAppUrl}"`);
  }
  return `# Written by npm run deploy for the worker ${name} (wrangler.toml with its own names); removed after the run.\n${out}`;
}
