#!/usr/bin/env bash
# npm run destroy: removes the webhook, the worker and the queues; the database only with
# --delete-database. Asks first (--yes skips the question).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
exec node scripts/destroy.mjs "$@"
