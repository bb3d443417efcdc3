#!/usr/bin/env bash
# Checks that every C, C++, CUDA and HIP source in the repository follows
# .clang-format, whole files (the tree was reformatted at once; that commit
# is in .git-blame-ignore-revs, which `git blame` skips when configured with
# `git config blame.ignoreRevsFile .git-blame-ignore-revs`).
#   scripts/check_format.sh          check; on failure print the diff that fixes it
#   scripts/check_format.sh --fix    reformat the failing files in place
set -euo pipefail
cd "$(dirname "$0")/.."

fix=0
case "${1:-}" in
  "") ;;
  --fix) fix=1 ;;
  *) echo "check_format: unknown option '$1' (--fix reformats in place)" >&2; exit 2 ;;
esac

binary=""
for c in clang-format clang-format-15 clang-format-14; do
  if command -v "$c" >/dev/null 2>&1; then binary="$c"; break; fi
done
if [ -z "$binary" ]; then
  echo "check_format: clang-format is needed; install clang-format (scripts/setup.sh does)" >&2
  exit 2
fi

# The sources: git's list where this is a checkout (untracked files that git
# does not ignore included), else every such file outside build folders.
if git rev-parse --git-dir >/dev/null 2>&1; then
  mapfile -d '' files < <(git ls-files -z --cached --others --exclude-standard -- \
    '*.h' '*.hpp' '*.c' '*.cc' '*.cpp' '*.cu' '*.cuh' ':!:*/corpus/*')
else
  mapfile -d '' files < <(find . \( -name 'build*' -o -name .venv -o -name .cache -o -name corpus \) -prune -o \
    -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.c' -o -name '*.cc' -o -name '*.cpp' -o -name '*.cu' \
    -o -name '*.cuh' \) -print0)
fi
existing=()
for f in "${files[@]}"; do [ -f "$f" ] && existing+=("$f"); done

if [ "$fix" = 1 ]; then
  printf '%s\0' "${existing[@]}" | xargs -0 -r -n 50 -P "$(nproc)" "$binary" --style=file -i
  echo "check_format: reformatted ${#existing[@]} files with $("$binary" --version | head -n 1)"
  exit 0
fi

# One clang-format per 100 files; it names each file that differs
# ("FILE:LINE:COL: error: code should be clang-formatted").
mapfile -t bad < <(printf '%s\0' "${existing[@]}" |
  xargs -0 -r -n 100 -P "$(nproc)" "$binary" --style=file --dry-run --Werror 2>&1 |
  sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
if [ ${#bad[@]} -gt 0 ]; then
  for f in "${bad[@]}"; do diff -u "$f" <("$binary" --style=file "$f") --label "$f" --label "$f (formatted)" || true; done
  echo "check_format: ${#bad[@]} of ${#existing[@]} files do not follow .clang-format (diff above):" \
       "run 'scripts/check_format.sh --fix' and commit the result" >&2
  exit 1
fi
echo "check_format: all ${#existing[@]} sources follow .clang-format ($("$binary" --version | head -n 1))"
