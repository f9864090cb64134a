#!/usr/bin/env bash
# Runs the bot locally: builds the worker, applies the D1 migrations to the local database,
# starts the playground (a local Telegram stand-in with a web chat, and the offline stand-in
# model when there is no GEMINI_API_KEY) and `wrangler dev`.
#
#   npm run dev                   # playground at http://127.0.0.1:8788, worker at :8787
#   npm run dev -- --telegram     # a real bot instead: getUpdates bridged to the local worker
#
# Creates .dev.vars with local-only secrets on first run; put real TELEGRAM_BOT_TOKEN and
# GEMINI_API_KEY there to talk to the real services.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

PORT="${PORT:-8787}"
PLAYGROUND_PORT="${PLAYGROUND_PORT:-8788}"
mode=playground
passthrough=()
for arg in "$@"; do
  case "$arg" in
    --telegram) mode=telegram ;;
    *) passthrough+=("$arg") ;;
  esac
done

if [ ! -f .dev.vars ]; then
  # 32 random bytes: 43 characters (the worker refuses shared secrets under 32).
  rand() { node -e 'process.stdout.write(require("crypto").randomBytes(32).toString("base64url"))'; }
  cat > .dev.vars <<VARS
# Local secrets for npm run dev (never commit this file). Put a real bot token and a Gemini
# key here to talk to the real services; leave GEMINI_API_KEY empty for the offline model.
TELEGRAM_BOT_TOKEN=123456789:local-development-token
TELEGRAM_WEBHOOK_SECRET=$(rand)
GEMINI_API_KEY=
ADMIN_TOKEN=$(rand)
VARS
  echo "dev: wrote .dev.vars with local secrets" >&2
fi
# An older .dev.vars may hold secrets the worker now refuses (under 32 characters).
for name in TELEGRAM_WEBHOOK_SECRET ADMIN_TOKEN; do
  value="$(sed -n "s/^$name=//p" .dev.vars | tr -d '[:space:]')"
  if [ "${#value}" -lt 32 ]; then
    echo "dev: $name in .dev.vars is shorter than 32 characters; the worker will refuse to serve. Delete the line (or the file) to have a new one generated." >&2
  fi
done
gemini_key="$(sed -n 's/^GEMINI_API_KEY=//p' .dev.vars | tr -d '[:space:]')"

CI=true wrangler d1 migrations apply DB --local >&2

vars=()
if [ "$mode" = playground ]; then
  vars+=(--var "TELEGRAM_API_BASE:http://127.0.0.1:$PLAYGROUND_PORT")
  # Crew mode in the playground's crew room (tools/playground.js CHATS.crew).
  vars+=(--var "CREW:critic,builder,moderator" --var "CREW_CHATS:-1001234000002")
fi
if [ -z "$gemini_key" ]; then
  vars+=(--var "GEMINI_API_BASE:http://127.0.0.1:$PLAYGROUND_PORT")
  # Pictures cost nothing with the stand-in model ("draw ..." makes a small PNG).
  vars+=(--var "IMAGE_MODEL:on")
fi

children=()
cleanup() { for pid in "${children[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT INT TERM

if [ "$mode" = playground ] || [ -z "$gemini_key" ]; then
  PLAYGROUND_PORT="$PLAYGROUND_PORT" WORKER_URL="http://127.0.0.1:$PORT" node tools/playground.js &
  children+=($!)
fi
if [ "$mode" = telegram ]; then
  WORKER_URL="http://127.0.0.1:$PORT" node tools/bridge.js &
  children+=($!)
fi

wrangler dev --ip 127.0.0.1 --port "$PORT" "${vars[@]}" "${passthrough[@]}"
