#!/usr/bin/env bash
# check_minimal_plugin_readme.sh SOURCE_DIR
#
# The minimal plugin is shown in README.md ("The minimal plugin") verbatim: the
# fenced block after each marker line
#   <!-- verbatim: samples/minimal_plugin/FILE -->
# must equal that file, and both files must be there. And the plugin stays
# minimal: at most 40 lines of C++ and one backplane_add_plugin call.
set -euo pipefail
die() {
  printf 'check_minimal_plugin_readme.sh: FAIL: %s\n' "$*" >&2
  exit 1
}
[[ $# -eq 1 ]] || { echo "usage: $0 SOURCE_DIR" >&2; exit 2; }
src=$(cd "$1" && pwd)
readme=$src/README.md
[[ -f $readme ]] || die "no $readme"

for file in samples/minimal_plugin/minimal_plugin.cc samples/minimal_plugin/CMakeLists.txt; do
  [[ -f $src/$file ]] || die "no $src/$file"
  marker="<!-- verbatim: $file -->"
  count=$(grep -cxF -- "$marker" "$readme" || true)
  [[ $count == 1 ]] || die "README.md must hold the line '$marker' once, followed by a fenced copy of $file (found $count)"
  # The block: from the fence after the marker to the closing fence.
  block=$(awk -v m="$marker" '
    $0 == m { found = 1; next }
    found == 1 && /^```/ { found = 2; next }
    found == 2 && /^```/ { exit }
    found == 2 { print }
    found == 1 { exit 1 }   # anything but a fence right after the marker
  ' "$readme") || die "the line after '$marker' in README.md must open a fenced code block"
  diff -u --label "$file" --label "README.md's copy" "$src/$file" <(printf '%s\n' "$block") ||
    die "README.md's copy of $file differs from the file (diff above); copy the file into README.md"
  echo "ok: README.md shows $file verbatim"
done

lines=$(wc -l <"$src/samples/minimal_plugin/minimal_plugin.cc")
((lines <= 40)) || die "samples/minimal_plugin/minimal_plugin.cc has $lines lines; the minimal plugin is at most 40"
calls=$(grep -c 'backplane_add_plugin(' "$src/samples/minimal_plugin/CMakeLists.txt" || true)
[[ $calls == 1 ]] || die "samples/minimal_plugin/CMakeLists.txt must build the plugin with one backplane_add_plugin call (found $calls)"
echo "ok: minimal_plugin.cc is $lines lines (at most 40), with one backplane_add_plugin call"
