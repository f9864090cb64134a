#!/usr/bin/env bash
# Installs Debian's Chromium for the playground's browser test (once; a few seconds when the
# package mirror is near). playwright-core drives it; it never downloads a browser itself.
set -euo pipefail
chromium="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ -x "$chromium" ]; then exit 0; fi
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
echo "setup: installing chromium (Debian package) for the browser test" >&2
if ! $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium >/dev/null 2>&1; then
  $sudo apt-get update >/dev/null 2>&1
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium >/dev/null
fi
