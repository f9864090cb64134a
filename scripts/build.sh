#!/usr/bin/env bash
# Builds the worker: Rust → wasm32 → wasm-bindgen → wasm-opt → build/index.js + build/index_bg.wasm.
# wrangler runs this as its [build] command; `npm run build` runs it directly.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
# Nothing changed since the last build: keep it (wrangler dev runs this on every start).
if [ -f build/index.js ] && [ -z "$(find src crates/core/src prompts build.rs Cargo.toml Cargo.lock -newer build/index.js -print -quit)" ]; then
  echo "build: up to date" >&2
  exit 0
fi
exec worker-build --release "$@"
