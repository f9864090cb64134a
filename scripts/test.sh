#!/usr/bin/env bash
# Runs every test: the core's unit and property tests natively, then the end-to-end suite
# against the real wasm worker under workerd (built once into .tmp/bundle).
#   npm test                     # everything
#   npm test -- tests/e2e/x.test.js   # only these end-to-end files (core tests still run)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

echo "== core: cargo test" >&2
cargo test -p agent-core --quiet

echo "== worker: build" >&2
bash scripts/bundle.sh
# The previous release's worker, which tests/e2e/release-overlap.test.js runs on today's schema.
bash scripts/bundle-previous.sh
bash scripts/setup-browser.sh

echo "== end to end" >&2
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  mapfile -t files < <(ls tests/e2e/*.test.js)
fi
exec node --test --test-concurrency="${TEST_CONCURRENCY:-2}" --test-timeout=240000 "${files[@]}"
