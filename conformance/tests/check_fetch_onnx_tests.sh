#!/usr/bin/env bash
# scripts/fetch_onnx_tests.sh refuses what it must refuse, offline: a wheel
# whose sha256 is not the pinned one (nothing unpacked), a folder it did not
# make (left as it was); and keeps a complete folder without downloading.
#   check_fetch_onnx_tests.sh SCRIPT WORK_DIR
set -euo pipefail
script="$1"
work="$2"
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

# A wheel that is not the pinned one.
printf 'PK not the onnx wheel' >"$work/fake.whl"
if BACKPLANE_ONNX_NODE_TESTS="$work/node" BACKPLANE_ONNX_WHEEL="$work/fake.whl" "$script" >"$work/out" 2>"$work/err"; then
  fail "a wheel with another hash was accepted"
fi
grep -q "HASH MISMATCH for $work/fake.whl" "$work/err" || fail "no hash mismatch message: $(cat "$work/err")"
grep -q "expected sha256 1d0a2bdb15eb2b3cb65c438f3423d9620d14fdce32f92380e6bb1b2e09568ef5" "$work/err" ||
  fail "the message does not name the expected hash"
[ ! -e "$work/node" ] || fail "something was unpacked from a rejected wheel"
[ -z "$(find "$work" -name '.node.*')" ] || fail "a staging folder was left behind"

# A folder the script did not make is never replaced.
mkdir -p "$work/mine"
echo keep >"$work/mine/file"
if BACKPLANE_ONNX_NODE_TESTS="$work/mine" BACKPLANE_ONNX_WHEEL="$work/fake.whl" "$script" >"$work/out" 2>"$work/err"; then
  fail "a foreign folder was accepted"
fi
grep -q "is not a folder of node tests this script unpacked" "$work/err" || fail "message: $(cat "$work/err")"
[ "$(cat "$work/mine/file")" = keep ] || fail "the foreign folder was changed"

# A complete folder (its stamp names the pinned wheel) is kept: no download,
# no wheel needed, and the folder is printed on stdout.
mkdir -p "$work/done"
printf '%s\n%s\n' \
  "onnx-1.22.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl sha256=1d0a2bdb15eb2b3cb65c438f3423d9620d14fdce32f92380e6bb1b2e09568ef5" \
  "3 node tests" >"$work/done/.fetched"
out="$(BACKPLANE_ONNX_NODE_TESTS="$work/done" BACKPLANE_ONNX_WHEEL="$work/fake.whl" "$script" 2>"$work/err")" ||
  fail "a complete folder was not kept: $(cat "$work/err")"
[ "$out" = "$work/done" ] || fail "printed '$out', expected $work/done"
echo "check_fetch_onnx_tests: ok"
