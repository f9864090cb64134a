// A fake Cloudflare API on loopback for the deploy tests: the real wrangler talks to it
// through CLOUDFLARE_API_BASE_URL (with CLOUDFLARE_API_TOKEN and CLOUDFLARE_ACCOUNT_ID).
// It keeps what a deploy creates (D1 databases backed by real SQLite, queues and their
// consumers, worker scripts with their upload metadata, secrets, cron schedules), records
// every call, answers in the API's envelope ({success, errors, messages, result}) with the
// API's error codes, takes faults by route, and logs any route it does not know loudly (a
// wrangler upgrade that calls something new shows up in the test output at once).
//
// It also stands in for the deployed worker's workers.dev origin: GET /health and
// GET /telegram/commands answer for the last uploaded script (deploy.mjs reaches the worker
// there when DEPLOY_WORKER_ORIGIN points at this server).
import http from "node:http";
import crypto from "node:crypto";
import zlib from "node:zlib";
import { DatabaseSync } from "node:sqlite";

const json = (res, status, body) => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
};
const ok = (res, result, extra = {}) => json(res, 200, { success: true, errors: [], messages: [], result, ...extra });
const err = (res, status, code, message) => json(res, status, { success: false, errors: [{ code, message }], messages: [], result: null });

/** Splits a multipart/form-data body into its parts ({name, filename, type, data}). */
function parseMultipart(body, contentType) {
  const boundary = /boundary=(?:"([^"]+)"|([^;]+))/.exec(contentType ?? "");
  if (!boundary) return [];
  const sep = Buffer.from(`--${boundary[1] ?? boundary[2]}`);
  const parts = [];
  let start = body.indexOf(sep);
  while (start >= 0) {
    const next = body.indexOf(sep, start + sep.length);
    if (next < 0) break;
    const chunk = body.subarray(start + sep.length + 2, next - 2); // skip CRLF after the boundary and before the next
    const headerEnd = chunk.indexOf("\r\n\r\n");
    if (headerEnd >= 0) {
      const headers = chunk.subarray(0, headerEnd).toString();
      const name = /name="([^"]*)"/.exec(headers)?.[1];
      const filename = /filename="([^"]*)"/.exec(headers)?.[1];
      const type = /content-type:\s*([^\r\n]+)/i.exec(headers)?.[1];
      parts.push({ name, filename, type, data: chunk.subarray(headerEnd + 4) });
    }
    start = next;
  }
  return parts;
}

export const FAKE_ACCOUNT_ID = "0123456789abcdef0123456789abcdef";
export const FAKE_API_TOKEN = "fake-cloudflare-api-token-for-tests";

// The API's own refusals, as it words them (wrangler and the deploy read the codes).
export const REFUSALS = {
  noSubdomain: [404, 10007, "workers.api.error.script_not_found"],
  uploadWithoutSubdomain: [400, 10063, "You need a workers.dev subdomain in order to proceed. Please go to the dashboard and open the Workers menu. Opening the Workers landing page for the first time will create a workers.dev subdomain automatically."],
  subdomainTaken: [400, 10031, "workers.api.error.subdomain_unavailable"],
  // Sic: the availability check answers a free name with an error too (the dashboard reads it so).
  subdomainFree: [400, 10032, "subdomain_unavailable"],
  hasSubdomain: [409, 10036, "workers.api.error.account_has_subdomain"],
  emailUnverified: [403, 10034, "You need to verify your email address to use Workers. For more information, read our documentation on verifying your email address: https://developers.cloudflare.com/fundamentals/setup/account/verify-email-address/"],
  consumerExists: [400, 11004, "workers.api.error.consumer_exists"],
  tooLarge: (accountId) => [400, 10027, `Your Worker exceeded the size limit of 3 MiB. Please upgrade to a paid plan to deploy Workers up to 10 MiB. https://dash.cloudflare.com/${accountId}/workers/plans`],
  tooManyCrons: (limit) => [400, 10072, `This account has reached the Workers Free limit of ${limit} cron triggers per account.`],
  noPermission: [403, 10000, "Authentication error"],
};

/**
 * Starts the fake API. `subdomain` is the account's workers.dev subdomain (null: a brand-new
 * account without one), `emailVerified` whether the account's email is verified (uploads are
 * refused until it is), `scriptSizeLimit` the plan's limit on a worker's gzip size (Free: 3 MiB),
 * `cronLimit` the account's cron triggers across all workers (Free: 5). Returns the server's
 * handle: `base` (the API base URL wrangler is given), `origin` (the worker origin), `calls`
 * (every request: {method, path, query, body?}), the state (`databases`, `queues`, `scripts`,
 * `secrets`), `fault()`, `deny()` and `close()`.
 */
export async function startFakeCloudflare({ accountId = FAKE_ACCOUNT_ID, token = FAKE_API_TOKEN, subdomain = "test-account", emailVerified = true, scriptSizeLimit = 3 * 1024 * 1024, cronLimit = 5 } = {}) {
  const calls = [];
  const unknown = [];
  const faults = []; // {method, path: RegExp, sql?: RegExp, status, code, message, times}
  const databases = new Map(); // uuid -> {uuid, name, created_at, sqlite, queries: []}
  const queues = new Map(); // queue_id -> {queue_id, queue_name, consumers: []}
  const scripts = new Map(); // name -> {name, metadata, modules, uploads, migration_tag, versions, subdomainEnabled}
  const secrets = new Map(); // script name -> Map(name -> value)
  const schedules = new Map(); // script name -> [{cron}]
  let queueLimit = Infinity;
  let seq = 0;
  const denied = new Set(); // "workers" | "d1" | "queues": the token lacks that permission
  const takenSubdomains = new Set(["taken", "cloudflare", "workers"]);
  let workerReachable = true;

  function faultFor(method, path, sql) {
    const f = faults.find((f) => f.times > 0 && f.method === method && f.path.test(path) && (!f.sql || (sql && f.sql.test(sql))));
    if (f) f.times -= 1;
    return f;
  }

  const dbByIdOrName = (idOrName) => databases.get(idOrName) ?? [...databases.values()].find((d) => d.name === idOrName);
  const dbInfo = (d) => ({ uuid: d.uuid, name: d.name, version: "production", created_at: d.created_at, num_tables: 0, file_size: 0, running_in_region: "WEUR" });
  // A queue's producers: the deployed workers with a binding to it.
  const producersOf = (q) => [...scripts.values()].filter((s) => (s.metadata?.bindings ?? []).some((b) => b.type === "queue" && b.queue_name === q.queue_name))
    .map((s) => ({ type: "worker", script: s.name }));
  const queueInfo = (q) => {
    const producers = producersOf(q);
    return { queue_id: q.queue_id, queue_name: q.queue_name, created_on: q.created_on, modified_on: q.created_on,
      producers, producers_total_count: producers.length, consumers: q.consumers, consumers_total_count: q.consumers.length };
  };
  const cronsElsewhere = (name) => [...schedules.entries()].filter(([script]) => script !== name).reduce((n, [, list]) => n + list.length, 0);

  /** Runs SQL on a fake database as D1's /query does: one result per statement. */
  function runSql(d, sql, params = []) {
    d.queries.push(sql);
    const single = sql.trim().replace(/;\s*$/, "");
    if (/^\s*(select|pragma)\b/i.test(single) && !single.includes(";")) {
      const rows = d.sqlite.prepare(single).all(...params).map((r) => ({ ...r }));
      return [{ results: rows, success: true, meta: { changes: 0, duration: 0.1, rows_read: rows.length, rows_written: 0, size_after: 0 } }];
    }
    d.sqlite.exec(sql);
    return [{ results: [], success: true, meta: { changes: 1, duration: 0.1, rows_read: 0, rows_written: 1, size_after: 0 } }];
  }

  function versionOf(script, id) {
    return {
      id,
      number: script.versions.indexOf(id) + 1,
      metadata: { created_on: new Date().toISOString(), author_email: "test@example.com", source: "wrangler" },
      annotations: {},
      resources: {
        bindings: [...(script.versionMeta.get(id)?.bindings ?? []), ...[...(secrets.get(script.name)?.keys() ?? [])].map((name) => ({ type: "secret_text", name }))],
        script: { etag: "etag", handlers: ["fetch", "queue", "scheduled"] },
        script_runtime: { compatibility_date: script.versionMeta.get(id)?.compatibility_date, compatibility_flags: script.versionMeta.get(id)?.compatibility_flags ?? [] },
      },
    };
  }

  /** The API routes: returns true when handled. */
  function route(req, res, method, path, query, body, raw) {
    const a = `/accounts/${accountId}`;
    let m;
    // --- identity ----------------------------------------------------------------------
    if (method === "GET" && path === "/user/tokens/verify") return ok(res, { id: "tok", status: "active" });
    if (method === "GET" && path === "/user") return ok(res, { id: "user", email: "test@example.com" });
    if (method === "GET" && path === "/accounts") return ok(res, [{ id: accountId, name: "Test account" }], { result_info: { page: 1, per_page: 20, count: 1, total_count: 1 } });
    if (method === "GET" && path === "/memberships") return ok(res, [{ id: "m", account: { id: accountId, name: "Test account" }, permissions: {} }], { result_info: { page: 1, per_page: 20, count: 1, total_count: 1 } });
    if (path.startsWith(`${a}/`)) {
      const kind = path.startsWith(`${a}/d1/`) ? "d1" : path.startsWith(`${a}/queues`) ? "queues" : path.startsWith(`${a}/workers/`) ? "workers" : null;
      if (kind && denied.has(kind)) return err(res, ...REFUSALS.noPermission);
    }
    if (path === `${a}/workers/subdomain`) {
      if (method === "GET") return subdomain ? ok(res, { subdomain }) : err(res, ...REFUSALS.noSubdomain);
      if (method === "PUT") {
        if (subdomain) return err(res, ...REFUSALS.hasSubdomain);
        if (takenSubdomains.has(body.subdomain)) return err(res, ...REFUSALS.subdomainTaken);
        subdomain = body.subdomain;
        return ok(res, { subdomain });
      }
    }
    if ((m = /^\/accounts\/[^/]+\/workers\/subdomains\/([^/]+)$/.exec(path)) && method === "GET") {
      return err(res, ...(takenSubdomains.has(decodeURIComponent(m[1])) ? REFUSALS.subdomainTaken : REFUSALS.subdomainFree));
    }
    // Looked at by wrangler delete (Workers Sites namespaces, containers): none here.
    if (method === "GET" && (path === `${a}/storage/kv/namespaces` || path === `${a}/containers/applications`)) return ok(res, [], { result_info: { page: 1, per_page: 100, count: 0, total_count: 0 } });
    if (path.startsWith("/accounts/") && !path.startsWith(a)) return err(res, 403, 10000, "Authentication error");

    // --- D1 -----------------------------------------------------------------------------
    if (path === `${a}/d1/database`) {
      if (method === "GET") {
        const name = query.get("name");
        const page = Number(query.get("page") ?? 1);
        const all = [...databases.values()].filter((d) => !name || d.name === name).map(dbInfo);
        const perPage = Number(query.get("per_page") ?? 1000);
        const result = all.slice((page - 1) * perPage, page * perPage);
        return ok(res, result, { result_info: { page, per_page: perPage, count: result.length, total_count: all.length } });
      }
      if (method === "POST") {
        if ([...databases.values()].some((d) => d.name === body.name)) return err(res, 400, 7502, "A database with that name already exists");
        const uuid = crypto.randomUUID();
        const d = { uuid, name: body.name, created_at: new Date().toISOString(), sqlite: new DatabaseSync(":memory:"), queries: [] };
        databases.set(uuid, d);
        return ok(res, { ...dbInfo(d), created_in_region: "WEUR" });
      }
    }
    if ((m = /^\/accounts\/[^/]+\/d1\/database\/([^/]+)$/.exec(path))) {
      const d = dbByIdOrName(decodeURIComponent(m[1]));
      if (!d) return err(res, 404, 7404, `The database ${m[1]} could not be found`);
      if (method === "GET") return ok(res, dbInfo(d));
      if (method === "DELETE") {
        databases.delete(d.uuid);
        return ok(res, null);
      }
    }
    if ((m = /^\/accounts\/[^/]+\/d1\/database\/([^/]+)\/query$/.exec(path)) && method === "POST") {
      const d = dbByIdOrName(m[1]);
      if (!d) return err(res, 404, 7404, `The database ${m[1]} could not be found`);
      const f = faultFor("POST", path, body.sql);
      if (f) return err(res, f.status ?? 400, f.code ?? 7500, f.message ?? "SQLITE_ERROR");
      try {
        return ok(res, runSql(d, body.sql, body.params));
      } catch (e) {
        return err(res, 400, 7500, `${e.message}: SQLITE_ERROR`);
      }
    }

    // --- Queues -------------------------------------------------------------------------
    if (path === `${a}/queues`) {
      if (method === "GET") {
        const name = query.get("name");
        const page = Number(query.get("page") ?? 1);
        const all = [...queues.values()].filter((q) => !name || q.queue_name === name).map(queueInfo);
        const result = page === 1 ? all : [];
        return ok(res, result, { result_info: { page, per_page: 100, count: result.length, total_count: all.length } });
      }
      if (method === "POST") {
        if ([...queues.values()].some((q) => q.queue_name === body.queue_name)) return err(res, 400, 11009, "A queue with this name already exists");
        if (queues.size >= queueLimit) return err(res, 400, 11003, `You have reached the maximum number of queues allowed for your account (${queueLimit})`);
        const q = { queue_id: crypto.randomUUID().replaceAll("-", ""), queue_name: body.queue_name, created_on: new Date().toISOString(), consumers: [] };
        queues.set(q.queue_id, q);
        return ok(res, queueInfo(q));
      }
    }
    if ((m = /^\/accounts\/[^/]+\/queues\/([^/]+)(\/consumers(?:\/([^/]+))?)?$/.exec(path))) {
      const q = queues.get(m[1]) ?? [...queues.values()].find((x) => x.queue_name === m[1]);
      if (!q) return err(res, 404, 11000, "Queue does not exist");
      if (!m[2]) {
        if (method === "GET") return ok(res, queueInfo(q));
        if (method === "DELETE") {
          queues.delete(q.queue_id);
          return ok(res, null);
        }
      } else if (!m[3]) {
        if (method === "GET") return ok(res, q.consumers);
        if (method === "POST") {
          // A queue has one consumer: a second (another worker's, or this one's again) is refused.
          if (q.consumers.length) return err(res, ...REFUSALS.consumerExists);
          const { script_name, ...rest } = body;
          const c = { consumer_id: crypto.randomUUID(), queue_name: q.queue_name, script: script_name, ...rest };
          q.consumers.push(c);
          return ok(res, c);
        }
      } else {
        const i = q.consumers.findIndex((c) => c.consumer_id === m[3] || c.script === m[3]);
        if (i < 0) return err(res, 404, 11000, "Consumer does not exist");
        if (method === "PUT") {
          const { script_name, ...rest } = body;
          q.consumers[i] = { ...q.consumers[i], ...rest, script: script_name ?? q.consumers[i].script };
          return ok(res, q.consumers[i]);
        }
        if (method === "DELETE") {
          q.consumers.splice(i, 1);
          return ok(res, null);
        }
      }
    }

    // --- Workers ------------------------------------------------------------------------
    if (method === "GET" && path === `${a}/workers/scripts`) {
      return ok(res, [...scripts.values()].map((s) => ({ id: s.name, migration_tag: s.migration_tag, created_on: s.created_on, modified_on: s.created_on })));
    }
    if (method === "GET" && path === `${a}/workers/durable_objects/namespaces`) {
      const namespaces = [...scripts.values()].flatMap((s) => (s.metadata.bindings ?? []).filter((b) => b.type === "durable_object_namespace")
        .map((b) => ({ id: `${s.name}-${b.class_name}`, name: `${s.name}_${b.class_name}`, script: s.name, class: b.class_name, use_sqlite: true })));
      return ok(res, namespaces, { result_info: { page: 1, per_page: 1000, count: namespaces.length, total_count: namespaces.length } });
    }
    if ((m = /^\/accounts\/[^/]+\/workers\/workers\/([^/]+)$/.exec(path)) && method === "GET") {
      const s = scripts.get(decodeURIComponent(m[1]));
      if (!s) return err(res, 404, 10007, "This Worker does not exist on your account.");
      return ok(res, { id: s.tag, name: s.name, subdomain: { enabled: s.subdomainEnabled, previews_enabled: s.subdomainEnabled }, created_on: s.created_on });
    }
    if ((m = /^\/accounts\/[^/]+\/workers\/(scripts|services)\/([^/]+)(\/.*)?$/.exec(path))) {
      const name = decodeURIComponent(m[2]);
      const rest = m[3] ?? "";
      const s = scripts.get(name);
      const remove = () => {
        scripts.delete(name);
        secrets.delete(name);
        schedules.delete(name);
        for (const q of queues.values()) q.consumers = q.consumers.filter((c) => c.script !== name);
        return ok(res, null);
      };
      if (m[1] === "services") {
        if (!s) return err(res, 404, 10090, "This Worker does not exist on your account.");
        if (method === "DELETE" && rest === "") return remove();
        if (method === "GET" && rest === "") {
          return ok(res, { id: name, default_environment: { environment: "production", script: { id: name, tag: s.tag, last_deployed_from: "wrangler", migration_tag: s.migration_tag } } });
        }
      }
      if (m[1] === "scripts") {
        const upload = () => {
          const parts = parseMultipart(raw, req.headers["content-type"]);
          const meta = parts.find((p) => p.name === "metadata");
          if (!meta) return { error: [400, 10021, "metadata part missing"] };
          const metadata = JSON.parse(meta.data.toString());
          // wrangler's provisioning keeps a binding the deployed version has ({type: "inherit"});
          // the API resolves it to that binding, and the version's settings show it resolved.
          if (s?.metadata && Array.isArray(metadata.bindings)) {
            metadata.bindings = metadata.bindings.map((b) => (b.type === "inherit" ? (s.metadata.bindings ?? []).find((x) => x.name === b.name) ?? b : b));
          }
          const f = faultFor(method, path);
          if (f) return { error: [f.status ?? 400, f.code ?? 10021, f.message ?? "upload refused"] };
          if (!emailVerified) return { error: REFUSALS.emailUnverified };
          const code = parts.filter((p) => p.name !== "metadata");
          const gzip = zlib.gzipSync(Buffer.concat(code.map((p) => p.data)), { level: 1 }).length;
          if (gzip > scriptSizeLimit) return { error: REFUSALS.tooLarge(accountId) };
          const script = s ?? { name, tag: crypto.randomUUID().replaceAll("-", ""), created_on: new Date().toISOString(), versions: [], versionMeta: new Map(), uploads: [], subdomainEnabled: false };
          const migrations = metadata.migrations;
          if (migrations) {
            if ((script.migration_tag ?? undefined) !== migrations.old_tag) {
              return { error: [400, 10079, `migration tag precondition failed; current tag is ${script.migration_tag}`] };
            }
            script.migration_tag = migrations.new_tag;
          }
          const version = crypto.randomUUID();
          script.versions.push(version);
          script.versionMeta.set(version, metadata);
          script.uploads.push({ via: rest || "script", metadata, modules: parts.filter((p) => p.name !== "metadata").map((p) => ({ name: p.name, filename: p.filename, type: p.type, size: p.data.length })) });
          scripts.set(name, script);
          return { script, version };
        };
        if (method === "PUT" && rest === "") {
          const u = upload();
          if (u.error) return err(res, ...u.error);
          u.script.metadata = u.script.versionMeta.get(u.version);
          u.script.deployed = u.version;
          return ok(res, { id: name, etag: "etag", tag: u.script.tag, deployment_id: u.version, pipeline_hash: "hash", startup_time_ms: 5, created_on: u.script.created_on, modified_on: new Date().toISOString(), migration_tag: u.script.migration_tag, handlers: ["fetch", "queue", "scheduled"] });
        }
        if (method === "POST" && rest === "/versions" && s) {
          const u = upload();
          if (u.error) return err(res, ...u.error);
          return ok(res, { id: u.version, number: u.script.versions.length, metadata: {}, resources: { script: { etag: "etag", handlers: ["fetch", "queue", "scheduled"] }, bindings: [] }, startup_time_ms: 5 });
        }
        if (!s) return err(res, 404, 10007, "This Worker does not exist on your account.");
        if (method === "DELETE" && rest === "") return remove();
        if (method === "GET" && rest === "/settings") {
          return ok(res, { bindings: versionOf(s, s.deployed).resources.bindings, compatibility_date: s.metadata.compatibility_date, compatibility_flags: [], logpush: false, placement: {}, tail_consumers: [], usage_model: "standard" });
        }
        if (method === "PATCH" && rest === "/settings") return ok(res, {});
        if (method === "GET" && rest === "/secrets") {
          return ok(res, [...(secrets.get(name)?.keys() ?? [])].map((n) => ({ name: n, type: "secret_text" })));
        }
        if (method === "PATCH" && rest === "/secrets-bulk") {
          const map = secrets.get(name) ?? new Map();
          for (const [k, v] of Object.entries(body.secrets ?? {})) {
            if (v === null) map.delete(k);
            else map.set(k, v.text);
          }
          secrets.set(name, map);
          return ok(res, {});
        }
        if (method === "PUT" && rest === "/secrets") {
          const map = secrets.get(name) ?? new Map();
          map.set(body.name, body.text);
          secrets.set(name, map);
          return ok(res, { name: body.name, type: "secret_text" });
        }
        if (rest === "/subdomain") {
          if (method === "GET") return ok(res, { enabled: s.subdomainEnabled, previews_enabled: s.subdomainEnabled });
          if (method === "POST") {
            if (!subdomain && body.enabled) return err(res, ...REFUSALS.uploadWithoutSubdomain);
            s.subdomainEnabled = !!body.enabled;
            return ok(res, { enabled: s.subdomainEnabled, previews_enabled: !!body.previews_enabled });
          }
        }
        if (rest === "/schedules") {
          if (method === "PUT") {
            if (cronsElsewhere(name) + body.length > cronLimit) return err(res, ...REFUSALS.tooManyCrons(cronLimit));
            schedules.set(name, body);
            return ok(res, { schedules: body });
          }
          if (method === "GET") return ok(res, { schedules: schedules.get(name) ?? [] });
        }
        if (method === "POST" && rest === "/deployments") {
          const v = body.versions?.[0]?.version_id;
          if (!s.versionMeta.has(v)) return err(res, 400, 10007, "version not found");
          s.metadata = s.versionMeta.get(v);
          s.deployed = v;
          return ok(res, { id: `d-${v}`, strategy: "percentage", versions: body.versions });
        }
        if (method === "PATCH" && rest === "/script-settings") return ok(res, body);
        if (method === "GET" && rest === "/deployments") {
          const v = s.deployed;
          return ok(res, { deployments: [{ id: `d-${v}`, source: "wrangler", strategy: "percentage", author_email: "test@example.com", created_on: new Date().toISOString(), annotations: {}, versions: [{ version_id: v, percentage: 100 }] }] });
        }
        if ((m = /^\/versions\/([^/]+)$/.exec(rest)) && method === "GET") {
          if (!s.versionMeta.has(m[1])) return err(res, 404, 10007, "version not found");
          return ok(res, versionOf(s, m[1]));
        }
        if (method === "GET" && rest === "/references") return ok(res, { dispatch_namespace_outbounds: [], custom_domains: [], workers_triggered_by_consumers: [], service_bindings: [], durable_objects: [] });
        if (method === "GET" && rest === "/tails") return ok(res, []);
      }
    }
    return false;
  }

  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const raw = Buffer.concat(chunks);
    const url = new URL(req.url, "http://x");
    // The deployed worker's origin (workers.dev stand-in).
    if (!url.pathname.startsWith("/client/v4")) {
      // A workers.dev name that does not resolve yet: the connection fails.
      if (!workerReachable) return req.socket.destroy();
      const latest = [...scripts.values()].at(-1);
      if (!latest) return json(res, 404, { error: "There is nothing here yet" });
      if (url.pathname === "/health") return json(res, 200, { ok: true, name: latest.name, version: "test" });
      if (url.pathname === "/telegram/commands") return json(res, 200, [{ command: "new", description: "Start a new conversation" }, { command: "help", description: "What I can do" }]);
      return json(res, 404, { error: "not found" });
    }
    const path = url.pathname.slice("/client/v4".length);
    const entry = { seq: ++seq, method: req.method, path, query: url.search };
    calls.push(entry);
    if (req.headers.authorization !== `Bearer ${token}`) {
      return err(res, 400, 9106, "Missing X-Auth-Key, X-Auth-Email or Authorization headers");
    }
    let body = {};
    // Some calls send JSON without a content type (queue consumers): parse all but uploads.
    if (!(req.headers["content-type"] ?? "").startsWith("multipart/") && raw.length) {
      try {
        body = JSON.parse(raw.toString());
      } catch {
        return err(res, 400, 10026, "could not parse JSON");
      }
    }
    entry.body = body;
    const f = !/\/query$/.test(path) && !(req.method === "PUT" && /\/workers\/scripts\/[^/]+$/.test(path)) ? faultFor(req.method, path) : undefined;
    if (f) return err(res, f.status ?? 400, f.code ?? 10000, f.message ?? "fault");
    try {
      if (route(req, res, req.method, path, url.searchParams, body, raw) !== false) return;
    } catch (e) {
      console.error(`fake-cloudflare: ${req.method} ${path} threw: ${e.stack}`);
      return err(res, 500, 10013, e.message);
    }
    unknown.push(`${req.method} ${path}${url.search}`);
    console.error(`fake-cloudflare: UNKNOWN ROUTE ${req.method} ${path}${url.search}`);
    return err(res, 404, 7003, `fake-cloudflare does not know ${req.method} ${path}`);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const origin = `http://127.0.0.1:${server.address().port}`;
  return {
    base: `${origin}/client/v4`,
    origin,
    accountId,
    token,
    calls,
    unknown,
    databases,
    queues,
    scripts,
    secrets,
    schedules,
    /** Calls matching a method and a path pattern. */
    callsTo(method, pattern) {
      return calls.filter((c) => c.method === method && pattern.test(c.path));
    },
    /** Fails the next `times` calls to `method` + `path` (a RegExp; `sql` for D1 queries). */
    fault(f) {
      faults.push({ times: 1, ...f });
    },
    /** The account's queue limit (creating past it answers the API's error). */
    setQueueLimit(n) {
      queueLimit = n;
    },
    /** Adds a worker script that is not the bot (another project's worker), with its bindings and cron triggers. */
    addForeignScript(name, { bindings = [], crons = [] } = {}) {
      const version = crypto.randomUUID();
      const metadata = { main_module: "index.js", compatibility_date: "2024-01-01", bindings: [{ type: "plain_text", name: "GREETING", text: "hi" }, ...bindings] };
      scripts.set(name, { name, tag: "foreign", created_on: new Date().toISOString(), versions: [version], versionMeta: new Map([[version, metadata]]), deployed: version, uploads: [], subdomainEnabled: true, metadata });
      if (crons.length) schedules.set(name, crons.map((cron) => ({ cron })));
    },
    /** Adds a D1 database (another project's, or an empty one) and runs `sql` on it. */
    addDatabase(name, sql = "") {
      const uuid = crypto.randomUUID();
      const d = { uuid, name, created_at: new Date().toISOString(), sqlite: new DatabaseSync(":memory:"), queries: [] };
      if (sql) d.sqlite.exec(sql);
      databases.set(uuid, d);
      return d;
    },
    /** Adds a queue, consumed by `consumer` (a script name) when given. */
    addQueue(name, consumer) {
      const q = { queue_id: crypto.randomUUID().replaceAll("-", ""), queue_name: name, created_on: new Date().toISOString(), consumers: [] };
      if (consumer) q.consumers.push({ consumer_id: crypto.randomUUID(), queue_name: name, script: consumer, type: "worker", settings: {} });
      queues.set(q.queue_id, q);
      return q;
    },
    /** The token lacks a permission from now on: "workers", "d1" or "queues" (403, code 10000). */
    deny(kind) {
      denied.add(kind);
    },
    allow(kind) {
      denied.delete(kind);
    },
    /** The account's email is verified from now on. */
    verifyEmail() {
      emailVerified = true;
    },
    setScriptSizeLimit(bytes) {
      scriptSizeLimit = bytes;
    },
    /** Removes a script's cron triggers (what a person does in the dashboard). */
    removeCrons(name) {
      schedules.delete(name);
    },
    /** Whether the workers.dev origin answers (a fresh name does not resolve at first). */
    setWorkerReachable(yes) {
      workerReachable = yes;
    },
    get subdomain() {
      return subdomain;
    },
    close: () => new Promise((r) => server.close(r)),
  };
}

// Run on its own (for poking wrangler by hand): node tests/support/fake-cloudflare.js
if (import.meta.url === `file://${process.argv[1]}`) {
  const cf = await startFakeCloudflare();
  console.log(`CLOUDFLARE_API_BASE_URL=${cf.base} CLOUDFLARE_API_TOKEN=${cf.token} CLOUDFLARE_ACCOUNT_ID=${cf.accountId}`);
  setInterval(() => {}, 1 << 30);
  const log = () => {
    for (const c of cf.calls.splice(0)) console.log(`${c.method} ${c.path}${c.query}`);
  };
  setInterval(log, 300);
}
