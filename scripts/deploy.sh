#!/usr/bin/env bash
# npm run deploy: sets up the toolchain (the build needs it), then runs scripts/deploy.mjs,
# which does whatever is missing between a BotFather token and a live bot: the D1 database,
# its migrations, the worker (wrangler provisions the queues), the secrets, the webhook.
#   npm run deploy
#   TELEGRAM_BOT_TOKEN=... GEMINI_API_KEY=... npm run deploy     # without a terminal
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
exec node scripts/deploy.mjs "$@"
