#!/usr/bin/env bash
# Builds the worker and bundles it as wrangler would deploy it, into .tmp/bundle (the tests
# and benchmarks load this prebuilt bundle instead of rebuilding per run).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
rm -rf .tmp/bundle
mkdir -p .tmp
node_modules/.bin/wrangler deploy --dry-run --outdir .tmp/bundle >.tmp/bundle.log 2>&1 || {
  cat .tmp/bundle.log >&2
  exit 1
}
