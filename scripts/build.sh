#!/usr/bin/env bash
# Configures and builds Backplane.
#   scripts/build.sh [--sanitize=address,undefined|thread|fuzzer] [--release] [--debug-info=lines|full]
#                    [--no-werror] [--target T]... [-- extra cmake args]
# Warnings are errors by default, as in CI. --target builds only T (and what
# it needs), e.g. backplane_demo, what scripts/run.sh runs; default: everything.
# The default build type is RelWithDebInfo with line tables only (-g1: file
# and line in backtraces and sanitizer reports; Note [Line tables] in
# cmake/BackplaneOptions.cmake); --debug-info=full gives a debugger variables.
#   scripts/build.sh --print-dir [same options]   prints the build folder and exits
# Each sanitizer set builds into its own folder: build/, build-asan-ubsan/, build-tsan/.
# --sanitize=fuzzer is the fuzz build (build-fuzz/, clang, libFuzzer with ASan
# and UBSan; Note [Fuzzing] in docs/design.md): build its target backplane_fuzzers,
# as scripts/fuzz.sh does.
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=""
build_type=RelWithDebInfo
werror=ON
debug_info=lines
extra=()
print_dir=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize=*) sanitize="${1#--sanitize=}" ;;
    --release) build_type=Release ;;
    --debug-info=lines|--debug-info=full) debug_info="${1#--debug-info=}" ;;
    --debug-info=*) echo "build.sh: --debug-info takes lines or full (got '${1#--debug-info=}')" >&2; exit 2 ;;
    --werror) werror=ON ;;
    --no-werror) werror=OFF ;;
    --print-dir) print_dir=1 ;;
    --target) [ $# -ge 2 ] || { echo "build.sh: --target needs a target name" >&2; exit 2; }
      shift; targets+=(--target "$1") ;;
    --target=*) targets+=(--target "${1#--target=}") ;;
    --) shift; extra+=("$@"); break ;;
    *) echo "build.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done

case "$sanitize" in
  "") dir=build ;;
  address,undefined|undefined,address) dir=build-asan-ubsan; sanitize=address,undefined ;;
  address) dir=build-asan ;;
  undefined) dir=build-ubsan ;;
  thread) dir=build-tsan ;;
  fuzzer) dir=build-fuzz; sanitize=fuzzer,address,undefined ;;
  *) echo "build.sh: --sanitize takes address,undefined, thread or fuzzer (got '$sanitize')" >&2; exit 2 ;;
esac

if [ "$print_dir" = 1 ]; then echo "$dir"; exit 0; fi

generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
if [ -f "$dir/CMakeCache.txt" ] && ! grep -q "CMAKE_GENERATOR:INTERNAL=${generator[1]:-Unix Makefiles}" "$dir/CMakeCache.txt"; then
  rm -rf "$dir"
fi
benchmarks=ON
[ -n "$sanitize" ] && benchmarks=OFF   # benchmarks under sanitizers measure nothing useful
# The Python package (python/) builds with .venv's interpreter, which
# scripts/setup.sh makes with nanobind and scikit-build-core in it; without
# it CMake looks for a Python with nanobind and skips the package if none.
compilers=()
if [ "$dir" = build-fuzz ]; then
  command -v clang++ >/dev/null 2>&1 || { echo "build.sh: the fuzz build needs clang++ (scripts/setup.sh installs it)" >&2; exit 2; }
  compilers=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
fi
python=()
[ -x .venv/bin/python ] && python=(-DPython_EXECUTABLE="$PWD/.venv/bin/python")
cmake -S . -B "$dir" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE="$build_type" \
  -DBACKPLANE_SANITIZE="$sanitize" \
  -DBACKPLANE_WERROR="${werror:-OFF}" \
  -DBACKPLANE_DEBUG_INFO="$debug_info" \
  -DBACKPLANE_BUILD_BENCHMARKS="$benchmarks" \
  "${compilers[@]}" "${python[@]}" "${extra[@]}" >/dev/null
cmake --build "$dir" --parallel "$(nproc)" "${targets[@]}"
