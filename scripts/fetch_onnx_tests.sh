#!/usr/bin/env bash
# Fetches ONNX's node tests (onnx/backend/test/data/node/: 1,765 tests, one
# folder each of model.onnx and test_data_set_N/*.pb) from the onnx 1.22.0
# wheel on PyPI, pinned and hash-checked (later versions dropped the files),
# unpacks only that folder, and prints its path on stdout.
#   <repo>/.cache/onnx-1.22.0/node    the default folder (git-ignored)
#   BACKPLANE_ONNX_NODE_TESTS=DIR     unpack into DIR instead (the variable the
#                                     tests and `backplane conformance --onnx` runs read)
#   BACKPLANE_ONNX_WHEEL=FILE         use this already downloaded wheel (still
#                                     hash-checked) instead of downloading one
# Idempotent: a complete folder (its stamp file names the wheel's hash) is
# kept as it is. Needs python3 with pip for the download (scripts/setup.sh
# makes <repo>/.venv, which has it); unpacking needs only python3.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
version=1.22.0
# One file whatever the local Python: the CPython 3.11 manylinux x86-64 wheel.
wheel_name="onnx-${version}-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
wheel_sha256=1d0a2bdb15eb2b3cb65c438f3423d9620d14fdce32f92380e6bb1b2e09568ef5
member_prefix=onnx/backend/test/data/node/

dest="${BACKPLANE_ONNX_NODE_TESTS:-$repo/.cache/onnx-$version/node}"
stamp="$dest/.fetched"
stamp_text="$wheel_name sha256=$wheel_sha256"

if [ -f "$stamp" ] && [ "$(head -n 1 "$stamp")" = "$stamp_text" ]; then
  echo "fetch_onnx_tests: $dest is complete ($(tail -n 1 "$stamp"))" >&2
  echo "$dest"
  exit 0
fi

# Never delete a folder this script did not make.
if [ -e "$dest" ] && [ ! -f "$stamp" ] && [ -n "$(ls -A "$dest" 2>/dev/null || echo x)" ]; then
  echo "fetch_onnx_tests: $dest exists and is not a folder of node tests this script unpacked (no $stamp);" >&2
  echo "  remove it or set BACKPLANE_ONNX_NODE_TESTS to another folder" >&2
  exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

if [ -n "${BACKPLANE_ONNX_WHEEL:-}" ]; then
  wheel="$BACKPLANE_ONNX_WHEEL"
  echo "fetch_onnx_tests: using $wheel" >&2
else
  python=python3
  if [ -x "$repo/.venv/bin/python" ]; then python="$repo/.venv/bin/python"; fi
  if ! "$python" -m pip --version >/dev/null 2>&1; then
    echo "fetch_onnx_tests: $python has no pip; run scripts/setup.sh (it makes $repo/.venv) or install python3-pip," >&2
    echo "  or download $wheel_name yourself and pass it as BACKPLANE_ONNX_WHEEL=FILE" >&2
    exit 1
  fi
  echo "fetch_onnx_tests: downloading $wheel_name from PyPI" >&2
  # --require-hashes makes pip refuse any other file; the check below
  # covers a wheel that did not come through pip.
  echo "onnx==$version --hash=sha256:$wheel_sha256" >"$tmp/requirements.txt"
  "$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.11 --implementation cp --abi cp311 --platform manylinux_2_28_x86_64 \
    --require-hashes -r "$tmp/requirements.txt" -d "$tmp/wheel" >&2
  wheel="$tmp/wheel/$wheel_name"
  if [ ! -f "$wheel" ]; then
    echo "fetch_onnx_tests: pip did not download $wheel_name; it left: $(ls "$tmp/wheel")" >&2
    exit 1
  fi
fi

actual="$(sha256sum "$wheel" | cut -d ' ' -f 1)"
if [ "$actual" != "$wheel_sha256" ]; then
  echo "fetch_onnx_tests: HASH MISMATCH for $wheel" >&2
  echo "  expected sha256 $wheel_sha256 ($wheel_name)" >&2
  echo "  got      sha256 $actual" >&2
  echo "  the file is not the pinned onnx $version wheel; nothing was unpacked" >&2
  exit 1
fi

# Unpack into a sibling folder, then move it into place, so that an
# interrupted run never leaves a folder that looks complete.
mkdir -p "$(dirname "$dest")"
staging="$(mktemp -d "$(dirname "$dest")/.node.XXXXXX")"
trap 'rm -rf "$tmp" "$staging"' EXIT
count="$(python3 - "$wheel" "$member_prefix" "$staging" <<'EOF'
import os
import sys
import zipfile

wheel, prefix, out = sys.argv[1:]
tests = set()
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        if not info.filename.startswith(prefix) or info.is_dir():
            continue
        relative = info.filename[len(prefix):]
        parts = relative.split("/")
        if any(p in ("", ".", "..") for p in parts):
            sys.exit(f"fetch_onnx_tests: refusing the member {info.filename!r} (not a plain relative path)")
        target = os.path.join(out, *parts)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(info) as src, open(target, "wb") as dst:
            dst.write(src.read())
        if parts[-1] == "model.onnx":
            tests.add(os.path.dirname(relative))
if not tests:
    sys.exit(f"fetch_onnx_tests: the wheel has no node tests under {prefix}")
print(len(tests))
EOF
)"
chmod 755 "$staging"
echo "$stamp_text" >"$staging/.fetched"
echo "$count node tests" >>"$staging/.fetched"
rm -rf "$dest"
mv "$staging" "$dest"
echo "fetch_onnx_tests: unpacked $count node tests into $dest" >&2
echo "$dest"
