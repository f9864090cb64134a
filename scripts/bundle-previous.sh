#!/usr/bin/env bash
# Builds the previous release's worker into .tmp/bundle-previous, as the benchmarks build their
# "before" (`wrangler deploy --dry-run` of that commit): the release before the newest migration
# (the parent of the commit that added it; HEAD while the migration is not committed yet). The
# tests run it on today's schema, as a deploy does between `migrations apply` and the upload
# (migrations/README.md). Needs the repository's history (a clone, not an export).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
newest="$(ls migrations/*.sql | sort | tail -n 1)"
added="$(git log --diff-filter=A --format=%H -n 1 -- "$newest")"
if [ -n "$added" ]; then rev="$(git rev-parse "$added^")"; else rev="$(git rev-parse HEAD)"; fi
out=.tmp/bundle-previous
if [ -f "$out/.rev" ] && [ "$(cat "$out/.rev")" = "$rev" ]; then
  echo "previous release ${rev:0:7}: up to date" >&2
  exit 0
fi
echo "previous release ${rev:0:7}: building (for $newest)" >&2
tree=.tmp/previous-tree
git worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"
git worktree prune
git worktree add --quiet --detach "$tree" "$rev"
# The same packages when its lock file is the same (its own install otherwise); a target
# directory of its own (a build's outputs name their paths).
if cmp -s package-lock.json "$tree/package-lock.json"; then
  ln -s "$PWD/node_modules" "$tree/node_modules"
  touch -r node_modules/.edge-agent-stamp -d '-1 hour' "$tree/package-lock.json"
fi
rm -rf "$out" "$out.new"
(cd "$tree" && CARGO_TARGET_DIR="$PWD/../target-previous" bash -c 'source scripts/setup.sh && node_modules/.bin/wrangler deploy --dry-run --outdir ../bundle-previous.new') \
  >.tmp/bundle-previous.log 2>&1 || {
  cat .tmp/bundle-previous.log >&2
  exit 1
}
echo "$rev" >"$out.new/.rev"
mv "$out.new" "$out"
git worktree remove --force "$tree"
