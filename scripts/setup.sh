#!/usr/bin/env bash
# Installs, idempotently, everything the build, the dev server and the tests need, using only
# the package registries (crates.io, npm, Debian). A second run checks and returns in seconds.
#
#   bash scripts/setup.sh            # check and install
#   source scripts/setup.sh          # the same, and export the tool paths into this shell
#
# What it provides (see docs/design.md, "Toolchain"):
#   - node_modules (wrangler, workerd, a Node 22 binary, esbuild, binaryen's wasm-opt)
#   - the wasm32-unknown-unknown standard library: `rustup target add`, or, where rustup cannot
#     download, Debian's rustc-web with a std built from source (TOOLCHAIN.md, section 1)
#   - wasm-bindgen-cli at exactly the version in Cargo.lock, and worker-build at the version
#     of the `worker` crate in Cargo.lock, installed under $EDGE_AGENT_TOOLS
#   - exports WASM_BINDGEN_BIN, ESBUILD_BIN, WASM_OPT_BIN, PATH and, on the Debian path,
#     RUSTUP_TOOLCHAIN=web, so worker-build never downloads anything.

_setup_main() {
  set -euo pipefail
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  cd "$root"
  local tools="${EDGE_AGENT_TOOLS:-$HOME/.cache/edge-agent}"
  mkdir -p "$tools"
  local log="$tools/setup.log"

  say() { echo "setup: $*" >&2; }

  # --- npm packages -----------------------------------------------------------------------
  local stamp="node_modules/.edge-agent-stamp"
  if [ ! -x node_modules/.bin/wrangler ] || [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
    say "installing npm packages"
    if [ -f package-lock.json ]; then
      npm install --no-audit --no-fund --loglevel=error >&2
    else
      npm install --no-audit --no-fund --loglevel=error >&2
    fi
    touch "$stamp"
  fi

  # --- wasm32 standard library ------------------------------------------------------------
  local toolchain=""
  if has_wasm_std ""; then
    :
  elif has_wasm_std web; then
    toolchain=web
  else
    say "adding the wasm32-unknown-unknown target with rustup"
    if timeout 120 rustup target add wasm32-unknown-unknown >>"$log" 2>&1 && has_wasm_std ""; then
      :
    else
      say "rustup could not download the target; building it from Debian's rustc-web (a few minutes)"
      debian_wasm_std "$log"
      toolchain=web
    fi
  fi
  if [ -n "$toolchain" ]; then export RUSTUP_TOOLCHAIN="$toolchain"; fi

  # --- wasm-bindgen-cli and worker-build, pinned by Cargo.lock ---------------------------
  if [ ! -f Cargo.lock ]; then cargo generate-lockfile >&2; fi
  local wbg_version wb_version
  wbg_version="$(lock_version wasm-bindgen)"
  wb_version="$(lock_version worker)"
  install_crate wasm-bindgen-cli "$wbg_version" wasm-bindgen "$tools" "$log"
  install_crate worker-build "$wb_version" worker-build "$tools" "$log"

  export WASM_BINDGEN_BIN="$tools/wasm-bindgen-cli-$wbg_version/bin/wasm-bindgen"
  export PATH="$tools/worker-build-$wb_version/bin:$root/node_modules/.bin:$PATH"
  local esbuild
  esbuild="$(ls "$root"/node_modules/@esbuild/*/bin/esbuild 2>/dev/null | head -n 1)"
  [ -x "$esbuild" ] || { say "esbuild's native binary is missing from node_modules"; return 1; }
  export ESBUILD_BIN="$esbuild"
  export WASM_OPT_BIN="$root/node_modules/.bin/wasm-opt"
  # wrangler dev would otherwise wait for a Cloudflare fetch that cannot succeed offline.
  export CLOUDFLARE_CF_FETCH_ENABLED="${CLOUDFLARE_CF_FETCH_ENABLED:-false}"
  export WRANGLER_SEND_METRICS=false
}

# True when the toolchain ($1, or the default when empty) has a usable wasm32 std.
has_wasm_std() {
  local sysroot
  if [ -n "$1" ]; then
    sysroot="$(RUSTUP_TOOLCHAIN="$1" rustc --print sysroot 2>/dev/null)" || return 1
  else
    sysroot="$(env -u RUSTUP_TOOLCHAIN rustc --print sysroot 2>/dev/null)" || return 1
  fi
  ls "$sysroot"/lib/rustlib/wasm32-unknown-unknown/lib/libstd-*.rlib >/dev/null 2>&1
}

# The version of a package in Cargo.lock.
lock_version() {
  awk -v name="$1" '$0 == "name = \"" name "\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock
}

# install_crate CRATE VERSION BIN TOOLS LOG: cargo install into TOOLS/CRATE-VERSION once.
install_crate() {
  local crate="$1" version="$2" bin="$3" tools="$4" log="$5"
  local dest="$tools/$crate-$version"
  if [ -x "$dest/bin/$bin" ]; then return 0; fi
  echo "setup: installing $crate $version (once; several minutes)" >&2
  # Not --locked: the registry mirror may lack a yanked or newer lockfile entry.
  # Host tools always build with the default (rustup) toolchain.
  if ! env -u RUSTUP_TOOLCHAIN cargo install "$crate" --version "$version" --root "$dest" >>"$log" 2>&1; then
    echo "setup: cargo install $crate failed; see $log" >&2
    tail -n 20 "$log" >&2
    return 1
  fi
}

# Debian fallback of TOOLCHAIN.md section 1: rustc-web + a wasm32 std built with build-std.
debian_wasm_std() {
  local log="$1" sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  if [ ! -x /usr/bin/rustc ] || ! /usr/bin/rustc --version | grep -qE '1\.(9[1-9]|[1-9][0-9]{2})'; then
    $sudo apt-get update >>"$log" 2>&1
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y rustc-web cargo-web rust-web-src lld-22 >>"$log" 2>&1
  fi
  rustup toolchain link web /usr >>"$log" 2>&1 || true
  local scratch
  scratch="$(mktemp -d)"
  (
    cd "$scratch"
    cargo init --lib --name wasmstd >>"$log" 2>&1
    RUSTFLAGS="-C embed-bitcode=yes" RUSTC_BOOTSTRAP=1 RUSTUP_TOOLCHAIN=web \
      cargo build --release --target wasm32-unknown-unknown -Z build-std=std,panic_abort >>"$log" 2>&1
    local dest="/usr/lib/rustlib/wasm32-unknown-unknown/lib"
    $sudo mkdir -p "$dest"
    find target/wasm32-unknown-unknown/release/deps -name 'lib*.rlib' ! -name 'libwasmstd-*' \
      -exec $sudo cp {} "$dest/" \;
  )
  rm -rf "$scratch"
  # Artifacts built against another sysroot fail with E0463; start the wasm target afresh.
  rm -rf target/wasm32-unknown-unknown
}

# Run directly or sourced; sourced, the exports stay in the caller's shell (which should use
# `set -e`, as every script here does).
_setup_main "$@"
