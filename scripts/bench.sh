#!/usr/bin/env bash
# Runs the benchmarks and writes BENCHMARKS.md: core speed (criterion), prompt sizes (the bot's
# estimate and Gemini's own tokens), and the worker under local workerd (webhook latency and
# throughput, bursts, subrequests, size; the model cost of a replayed conversation; CPU per
# invocation and D1 rows per message).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
mkdir -p .tmp/bench
echo "== core (criterion)" >&2
cargo bench -p agent-bench --bench core -- --noplot >&2
cargo run --release -q -p agent-bench --bin prompt-size -- .tmp/bench/prompt-requests.json > .tmp/bench/prompt.json
echo "== prompt size and the cache simulation in Gemini's tokens" >&2
node bench/tokens.mjs .tmp/bench/prompt-requests.json > .tmp/bench/tokens.json
echo "== worker" >&2
bash scripts/bundle.sh
node bench/worker.mjs .tmp/bench/worker.json
echo "== model cost (implicit cache replay)" >&2
node bench/cache.mjs > .tmp/bench/cache.json
echo "== CPU per invocation, D1 rows per message" >&2
node bench/cpu.mjs
node bench/report.mjs
