#!/usr/bin/env bash
# Runs the bot locally: builds the worker, applies the D1 migrations to the local database,
# and starts `wrangler dev`. Creates .dev.vars with local-only secrets on first run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

if [ ! -f .dev.vars ]; then
  rand() { node -e 'process.stdout.write(require("crypto").randomBytes(18).toString("base64url"))'; }
  cat > .dev.vars <<VARS
# Local secrets for wrangler dev (never commit this file). Put real values here to talk to
# Telegram and Gemini from your machine.
TELEGRAM_BOT_TOKEN=123456789:local-development-token
TELEGRAM_WEBHOOK_SECRET=$(rand)
GEMINI_API_KEY=
ADMIN_TOKEN=$(rand)
VARS
  echo "dev: wrote .dev.vars with local secrets" >&2
fi

CI=true wrangler d1 migrations apply DB --local >&2
exec wrangler dev --port "${PORT:-8787}" "$@"
