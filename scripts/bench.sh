#!/usr/bin/env bash
# Runs the benchmarks and writes BENCHMARKS.md: core speed (criterion), prompt sizes, and the
# worker under local workerd (webhook latency and throughput, bursts, subrequests, size; CPU per
# invocation and D1 rows per message).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
mkdir -p .tmp/bench
echo "== core (criterion)" >&2
cargo bench -p agent-bench --bench core -- --noplot >&2
cargo run --release -q -p agent-bench --bin prompt-size > .tmp/bench/prompt.json
echo "== worker" >&2
bash scripts/bundle.sh
node bench/worker.mjs > .tmp/bench/worker.json
echo "== model cost (implicit cache replay)" >&2
node bench/cache.mjs > .tmp/bench/cache.json
echo "== CPU per invocation, D1 rows per message" >&2
node bench/cpu.mjs
node bench/report.mjs
