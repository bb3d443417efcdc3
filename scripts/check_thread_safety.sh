#!/usr/bin/env bash
# Checks the lock annotations (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED,
# ...) of the host code with clang's -Wthread-safety; fails on any finding.
#   scripts/check_thread_safety.sh [--not-libbackplane] [BUILD_DIR [SOURCE...]]
#                                              (default: build/, every host source)
#
# The host code is every non-test source under core/, dispatcher/,
# conformance/ and cli/ that is compiled against core's headers (plugins,
# which see only the plugin SDK, are not). Each is parsed (-fsyntax-only, no
# code generated) with the flags CMake gives it, read from BUILD_DIR's
# compile_commands.json; only the thread-safety warnings are turned on, as
# errors. The build's compiler may be GCC, which ignores the annotations.
#
# --not-libbackplane leaves out libbackplane's own sources (core's and the
# dispatcher layers' objects), which every clang build compiles with
# -Wthread-safety (cmake/BackplaneOptions.cmake): CI's fuzz build is such a
# build, and scripts/test.sh passes it so that CI parses those sources once.
set -euo pipefail
cd "$(dirname "$0")/.."

skip_lib=0
if [ "${1:-}" = "--not-libbackplane" ]; then
  skip_lib=1
  shift
fi
dir="${1:-build}"
[ $# -gt 0 ] && shift
if [ ! -f "$dir/compile_commands.json" ]; then
  echo "check_thread_safety: $dir/compile_commands.json not found; configure the build first (scripts/build.sh)" >&2
  exit 2
fi
clang="${CLANGXX:-}"
if [ -z "$clang" ]; then
  for c in clang++ clang++-15 clang++-14; do
    if command -v "$c" >/dev/null 2>&1; then clang="$c"; break; fi
  done
fi
if [ -z "$clang" ]; then
  echo "check_thread_safety: clang++ not found; install clang (scripts/setup.sh does)" >&2
  exit 2
fi

python3 - "$dir/compile_commands.json" "$PWD" "$clang" "$(nproc)" "$skip_lib" "$@" <<'EOF'
import concurrent.futures
import json
import os
import shlex
import subprocess
import sys

db_path, root, clang, jobs, skip_lib = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
only = {os.path.normpath(os.path.join(root, s)) for s in sys.argv[6:]}
# libbackplane's objects: the object libraries of core and the dispatcher's layers.
LIB_TARGETS = ("backplane_core", "backplane_dispatch", "backplane_ops", "backplane_autograd", "backplane_runtime")

def in_libbackplane(args):
    out = args[args.index("-o") + 1] if "-o" in args[:-1] else ""
    return any(f"/{t}.dir/" in "/" + out for t in LIB_TARGETS)
core_include = os.path.join(root, "core", "include")

def host_source(path, args):
    rel = os.path.relpath(path, root)
    parts = rel.split(os.sep)
    if parts[0] not in ("core", "dispatcher", "conformance", "cli"):
        return False
    if "tests" in parts or rel.endswith("_test.cc"):
        return False
    return any(a == "-I" + core_include or a == core_include for a in args)

def clang_args(entry):
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    # Drop a compiler launcher (ccache) and the compiler itself.
    while args and not args[0].startswith("-") and os.path.basename(args[0]) in ("ccache", "sccache"):
        args = args[1:]
    out, skip = [], False
    rest = args[1:]
    for i, a in enumerate(rest):
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        # The build's precompiled header (CMake's cmake_pch.hxx, a GCC .gch
        # beside it, which clang cannot read): each source includes what it
        # uses, so it parses without it.
        if a == "-include" and i + 1 < len(rest) and rest[i + 1].endswith("cmake_pch.hxx"):
            skip = True
            continue
        # GCC's warning set is not clang's: only the thread-safety ones count here.
        if a in ("-c", "-MD", "-MMD") or a.startswith("-W") or a == entry["file"]:
            continue
        out.append(a)
    return [clang, "-fsyntax-only", "-Wno-everything", "-Wthread-safety", "-Werror=thread-safety"] + out + [entry["file"]]

with open(db_path) as f:
    db = json.load(f)
checks, seen = [], set()
for entry in db:
    path = os.path.normpath(os.path.join(entry.get("directory", root), entry["file"]))
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    if path in seen or not host_source(path, args) or (only and path not in only):
        continue
    if skip_lib and in_libbackplane(args):
        continue
    seen.add(path)
    checks.append((os.path.relpath(path, root), entry.get("directory", root), clang_args(entry)))
if not checks:
    sys.exit("check_thread_safety: no host sources " + ("named " if only else "") + "in " + db_path +
             "; is it Backplane's build?")

def run(check):
    rel, cwd, cmd = check
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return rel, p.returncode, p.stdout

failed = []
with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
    for rel, rc, output in pool.map(run, checks):
        if rc != 0 or output.strip():
            failed.append(rel)
            sys.stdout.write(output)
if failed:
    print(f"check_thread_safety: {len(failed)} of {len(checks)} host sources break their lock annotations "
          f"(or do not parse with {clang}): {', '.join(failed)}")
    sys.exit(1)
print(f"check_thread_safety: {len(checks)} host sources follow their lock annotations ({clang} -Wthread-safety)" +
      ("; libbackplane's own are the clang builds' to check" if skip_lib else ""))
EOF
