#!/usr/bin/env bash
# Deploys to Cloudflare: applies D1 migrations to the remote database, then `wrangler deploy`,
# then generates the shared secrets that are not set yet.
# Needs `wrangler login` (or CLOUDFLARE_API_TOKEN) and the database id in wrangler.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
if grep -q '00000000-0000-0000-0000-000000000000' wrangler.toml; then
  echo "deploy: set database_id in wrangler.toml first (npx wrangler d1 create edge-agent prints it)" >&2
  exit 1
fi
wrangler d1 migrations apply DB --remote
wrangler deploy "$@"

# Shared secrets: generated on the first deploy (32 random bytes, 43 characters; the worker
# refuses anything under 32), put with `wrangler secret put` (never as [vars]) and written to
# .deploy.vars (not committed, mode 600) for `npm run webhook:set` and admin API clients.
# If the list cannot be read, stop: treating a failed listing as "no secrets" would replace
# live secrets (and Telegram would be refused until the webhook is registered again).
if ! existing="$(wrangler secret list 2>/dev/null)"; then
  echo "deploy: could not list the worker's secrets (network or login?); run npm run deploy again" >&2
  exit 1
fi
for name in TELEGRAM_WEBHOOK_SECRET ADMIN_TOKEN; do
  if ! grep -q "\"$name\"" <<<"$existing"; then
    value="$(node -e 'process.stdout.write(require("crypto").randomBytes(32).toString("base64url"))')"
    printf '%s' "$value" | wrangler secret put "$name" >/dev/null
    umask 077
    echo "$name=$value" >> .deploy.vars
    echo "deploy: generated $name and saved it in .deploy.vars" >&2
  fi
done
for name in TELEGRAM_BOT_TOKEN GEMINI_API_KEY; do
  if ! grep -q "\"$name\"" <<<"$existing"; then
    echo "deploy: set $name with: npx wrangler secret put $name" >&2
  fi
done
