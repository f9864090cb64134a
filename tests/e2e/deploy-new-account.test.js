// npm run deploy on accounts a newcomer really has (tests/support/deploy.js runs the real
// scripts and wrangler against the fakes, which refuse as Cloudflare does): no workers.dev
// subdomain yet, an unverified email, an API token without the Queues permission, a wrong
// Gemini key. Each stops with the exact step before anything is created, or a rerun after the
// step finishes the job.
import { test } from "node:test";
import assert from "node:assert/strict";
import { TOKEN, GEMINI_KEY, account, deploy, firstDeployEnv, creations, uploads, runOnTerminal } from "../support/deploy.js";

const nothingCreated = (cf) => {
  assert.deepEqual(creations(cf), [], "no database or queue created");
  assert.equal(uploads(cf).length, 0, "nothing uploaded");
  assert.equal(cf.databases.size, 0);
  assert.equal(cf.queues.size, 0);
};

test("a brand-new account without a workers.dev subdomain: stops before creating anything and says where to get one; with WORKERS_DEV_SUBDOMAIN the rerun registers it and finishes", async () => {
  const acct = await account({ cloudflare: { subdomain: null } });
  const r = await deploy(acct, firstDeployEnv);
  assert.equal(r.code, 1, r.all);
  assert.match(r.stderr, /no workers\.dev subdomain yet/);
  assert.match(r.stderr, /Workers & Pages once/);
  assert.match(r.stderr, /Nothing was created/);
  nothingCreated(acct.cf);
  assert.equal(acct.tg.calls("setWebhook").length, 0);

  const again = await deploy(acct, { ...firstDeployEnv, WORKERS_DEV_SUBDOMAIN: "my-bots" });
  assert.equal(again.code, 0, again.all);
  assert.equal(acct.cf.subdomain, "my-bots", "registered through the API");
  assert.deepEqual(acct.cf.callsTo("PUT", /\/workers\/subdomain$/).map((c) => c.body), [{ subdomain: "my-bots" }]);
  assert.equal(acct.tg.webhook.url, "https://edge-agent.my-bots.workers.dev/telegram/webhook");
  assert.deepEqual(acct.cf.unknown, []);
});

test("no subdomain on a terminal: the deploy offers to register one, refuses a taken name, registers the next and finishes", async (t) => {
  const acct = await account({ cloudflare: { subdomain: null } });
  const r = await runOnTerminal(acct, "deploy.mjs", [
    { prompt: /Register which workers\.dev subdomain/, answer: "taken" },
    { prompt: /"taken" is taken; try another\.[\s\S]*Register which workers\.dev subdomain/, answer: "alices-bots" },
  ], { env: firstDeployEnv });
  if (r === null) return t.skip("util-linux script is not installed");
  assert.equal(r.code, 0, r.output);
  assert.equal(r.unanswered, 0, r.output);
  assert.equal(acct.cf.subdomain, "alices-bots");
  assert.equal(acct.tg.webhook.url, "https://edge-agent.alices-bots.workers.dev/telegram/webhook");
});

test("an unverified email: the upload is refused (10034), the deploy says to verify it; after verifying, a rerun finishes", async () => {
  const acct = await account({ cloudflare: { emailVerified: false } });
  const r = await deploy(acct, firstDeployEnv);
  assert.equal(r.code, 1, r.all);
  assert.match(r.stderr, /email address is verified.*verification email/);
  assert.match(r.stderr, /run npm run deploy again/);
  assert.match(r.stderr, /10034/, "Cloudflare's own words are shown");
  assert.equal(acct.cf.scripts.size, 0, "nothing was published");
  assert.equal(acct.tg.calls("setWebhook").length, 0);

  acct.cf.verifyEmail();
  const again = await deploy(acct, {});
  assert.equal(again.code, 0, again.all);
  assert.equal(acct.cf.databases.size, 1, "the database of the first run is used, not a second one");
  assert.equal(acct.cf.secrets.get("edge-agent").size, 4);
  assert.match(again.stdout, /Webhook: +set/);
});

test("an API token without the Queues permission (the Workers template's): stops before creating anything and names every permission", async () => {
  const acct = await account();
  acct.cf.deny("queues");
  const r = await deploy(acct, firstDeployEnv);
  assert.equal(r.code, 1, r.all);
  assert.match(r.stderr, /lacks permissions[\s\S]*Account · Queues · Edit \(GET \/accounts\/…\/queues answered: Authentication error \[code: 10000\]\)/);
  for (const p of ["Workers Scripts · Edit", "D1 · Edit", "Queues · Edit", "Account Settings · Read", "Memberships · Read"]) assert.match(r.stderr, new RegExp(p));
  assert.match(r.stderr, /"Edit Cloudflare Workers" template alone has no D1 or Queues permission/);
  nothingCreated(acct.cf);
});

test("a wrong Gemini key: Google's refusal is shown before anything is created; a key given on a rerun replaces the stored one", async () => {
  const acct = await account();
  const wrong = "AIza-wrong-key-typed-by-hand";
  const r = await deploy(acct, { ...firstDeployEnv, GEMINI_API_KEY: wrong });
  assert.equal(r.code, 1, r.all);
  assert.match(r.stderr, /Google does not accept this Gemini API key \(INVALID_ARGUMENT: API key not valid/);
  assert.doesNotMatch(r.all, new RegExp(wrong), "the key is not shown");
  nothingCreated(acct.cf);
  const check = acct.gemini.requests.find((q) => q.get);
  assert.equal(check.query, "", "the key never goes in a URL");
  assert.equal(check.headers["x-goog-api-key"], wrong);

  // A worker that holds a wrong key (deployed before keys were checked): the right key given
  // in the environment replaces it, though the worker has one.
  const ok = await deploy(acct, firstDeployEnv);
  assert.equal(ok.code, 0, ok.all);
  acct.cf.secrets.get("edge-agent").set("GEMINI_API_KEY", wrong);
  const fixed = await deploy(acct, { GEMINI_API_KEY: GEMINI_KEY });
  assert.equal(fixed.code, 0, fixed.all);
  assert.equal(acct.cf.secrets.get("edge-agent").get("GEMINI_API_KEY"), GEMINI_KEY);
  assert.equal(acct.cf.secrets.get("edge-agent").get("TELEGRAM_BOT_TOKEN"), TOKEN);
});
