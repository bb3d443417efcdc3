#!/usr/bin/env bash
# Checks that the C and C++ lines changed since BASE follow .clang-format.
#   scripts/check_format.sh [BASE]
# BASE defaults to the last commit that changed .clang-format, so on a fresh
# clone it checks every line written since the style took its present form
# (the style was adopted after the layer split, whose moved files keep their
# layout until someone edits their lines); a branch can pass
# its fork point (e.g. origin/main) to check only its own lines. Lines
# nobody changed keep their layout: the tree is never reformatted at once.
# Uncommitted changes count too. On failure it prints the diff that would fix
# the lines; `git clang-format BASE` applies it.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo "check_format: skipped: not a git checkout, so no changed lines to check"
  exit 0
fi
base="${1:-}"
if [ -z "$base" ]; then
  base=$(git log -1 --format=%H -- .clang-format)
  if [ -z "$base" ]; then
    echo "check_format: no commit changes .clang-format in this history (a shallow clone?); fetch more history or pass BASE" >&2
    exit 2
  fi
fi
if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
  echo "check_format: '$base' is not a commit here; fetch it or pass another BASE" >&2
  exit 2
fi

binary=""
for c in clang-format clang-format-15 clang-format-14; do
  if command -v "$c" >/dev/null 2>&1; then binary="$c"; break; fi
done
if [ -z "$binary" ] || ! git clang-format -h >/dev/null 2>&1; then
  echo "check_format: clang-format and git-clang-format are needed; install clang-format (scripts/setup.sh does)" >&2
  exit 2
fi

status=0
diff=$(git clang-format --binary "$binary" --style file --diff "$base" -- 2>&1) || status=$?
# git-clang-format exits 1 when it would change something; older versions
# exit 0 and print the diff, so the diff itself decides.
if [ "$status" -gt 1 ] || { [ "$status" -ne 0 ] && ! grep -q '^diff --git' <<<"$diff"; }; then
  echo "$diff" >&2
  echo "check_format: git clang-format failed (exit $status)" >&2
  exit 2
fi
if grep -q '^diff --git' <<<"$diff"; then
  echo "$diff"
  echo "check_format: lines changed since $(git rev-parse --short "$base") do not follow .clang-format;" \
       "run 'git clang-format $base' (or apply the diff above) and commit the result" >&2
  exit 1
fi
echo "check_format: lines changed since $(git rev-parse --short "$base") follow .clang-format ($("$binary" --version | head -n 1))"
