#!/usr/bin/env bash
# Builds the worker: Rust → wasm32 → wasm-bindgen → wasm-opt → build/index.js + build/index_bg.wasm.
# wrangler runs this as its [build] command; `npm run build` runs it directly.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
exec worker-build --release "$@"
