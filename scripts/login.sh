#!/usr/bin/env bash
# npm run login: `wrangler login` with the project's own wrangler (pinned in package.json),
# after setting up the project, so no unpinned `npx` download is involved.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
exec node_modules/.bin/wrangler login "$@"
