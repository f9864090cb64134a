#!/usr/bin/env bash
# Runs the benchmarks and writes BENCHMARKS.md: core speed (criterion), prompt sizes (the bot's
# estimate and Gemini's own tokens), and the worker under local workerd (webhook latency and
# throughput, bursts, subrequests, size; the model cost of a replayed conversation; CPU per
# invocation and D1 rows per message; every Free-plan limit per message). Each step shows its
# progress and prints its tables on stderr as it measures them.
#
# `npm run bench -- --quick` (or BENCH_QUICK=1 npm run bench): the headline figures only (the
# webhook's latency, the first request, the wasm's size, the answer speed, rows and every
# Free-plan limit per message, with fewer messages) in a few minutes, written to
# .tmp/bench/quick/BENCHMARKS.md and printed; BENCHMARKS.md is left as it is.
#
# CPU_BEFORE=<the prebuilt bundle of an earlier commit> (CPU_BEFORE_NAME: how to call it) also
# measures that bundle in the same run: bench/cpu.mjs alternates it with this commit repetition by
# repetition, bench/object.mjs measures it after this one, bench/limits.mjs each workload after
# this commit's; BENCHMARKS.md shows both.
set -euo pipefail
cd "$(dirname "$0")/.."
quick="${BENCH_QUICK:-0}"
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    *) echo "npm run bench: unknown option $arg (only --quick)" >&2; exit 2 ;;
  esac
done
source scripts/setup.sh
mkdir -p .tmp/bench
if [ "$quick" = 1 ]; then
  export BENCH_QUICK=1
  mkdir -p .tmp/bench/quick
  echo "== quick mode: headline figures into .tmp/bench/quick/BENCHMARKS.md (BENCHMARKS.md is left as it is)" >&2
  echo "== worker bundle" >&2
  bash scripts/bundle.sh
  echo "== worker: start-up, webhook latency, answer speed, size" >&2
  node bench/worker.mjs .tmp/bench/quick/worker.json
  echo "== every Free-plan limit per message" >&2
  node bench/limits.mjs
  node bench/report.mjs
  exit 0
fi
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
echo "== the chat object's asks of its state and its rows per message" >&2
node bench/object.mjs > .tmp/bench/object.json
echo "== every Free-plan limit per message" >&2
node bench/limits.mjs
echo "== a picture turn (make and upload a 2 MB picture), the Mini App's page weight, Stop, guest mode, Business suggestions" >&2
node bench/image.mjs > .tmp/bench/image.json
node bench/miniapp-weight.mjs > .tmp/bench/miniapp.json
node bench/stop.mjs > .tmp/bench/stop.json
node bench/guest.mjs > .tmp/bench/guest.json
node bench/business.mjs > .tmp/bench/business.json
node bench/report.mjs
