#!/usr/bin/env bash
# Deploys to Cloudflare: applies D1 migrations to the remote database, then `wrangler deploy`.
# Needs `wrangler login` (or CLOUDFLARE_API_TOKEN) and the database id in wrangler.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
if grep -q '00000000-0000-0000-0000-000000000000' wrangler.toml; then
  echo "deploy: set database_id in wrangler.toml first (npx wrangler d1 create edge-agent prints it)" >&2
  exit 1
fi
wrangler d1 migrations apply DB --remote
exec wrangler deploy "$@"
