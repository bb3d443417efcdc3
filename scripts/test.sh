#!/usr/bin/env bash
# Sets up, builds and runs every test.
#   scripts/test.sh                              the normal build (build/)
#   scripts/test.sh --sanitize=address,undefined  AddressSanitizer + UBSan (build-asan-ubsan/)
#   scripts/test.sh --sanitize=thread             ThreadSanitizer (build-tsan/): the concurrency
#                                                 tests only (ctest label tsan, target backplane_tsan_tests)
set -euo pipefail
cd "$(dirname "$0")/.."

# Each phase prints its time ("test.sh: build took 812 s"), so that a CI
# log shows where its minutes went (CONTRIBUTING.md, "CI's time").
t0=$SECONDS
took() {
  echo "test.sh: $1 took $((SECONDS - t0)) s"
  t0=$SECONDS
}
scripts/setup.sh --tests
took "set-up"
# The normal run also checks the source: changed lines follow .clang-format
# (seconds, so before the build), and the lock annotations hold (clang's
# -Wthread-safety on the host sources with this build's flags, after it;
# libbackplane's own sources are the fuzz build's to check, which compiles
# them with clang and -Wthread-safety). Sanitizer runs build the same
# sources and skip both.
checks=1
case " $* " in *--sanitize=*) checks=0 ;; esac
[ "$checks" = 1 ] && scripts/check_format.sh
# ThreadSanitizer runs the concurrency tests only: the small executables
# labelled tsan (registration while dispatching, plugins loaded and unloaded
# while threads call and hold their tensors, the profiler across threads,
# the simulator's streams from many threads, the CPU allocator), built alone,
# so that CI can afford the step (minutes, cold). The other tests, the
# conformance runs and the wheel run in the normal and ASan+UBSan builds.
tsan=0
case " $* " in *--sanitize=thread*) tsan=1 ;; esac
tsan_target=()
[ "$tsan" = 1 ] && tsan_target=(--target backplane_tsan_tests)
# GCC 12's TSan runtime cannot map its shadow memory under the address-space
# randomisation of some newer kernels (vm.mmap_rnd_bits above 28) and dies
# at start; the TSan executables run while building (test discovery) and in
# ctest, so both go without randomisation where the machine allows it.
no_aslr=()
if [ "$tsan" = 1 ] && setarch "$(uname -m)" -R true 2>/dev/null; then no_aslr=(setarch "$(uname -m)" -R); fi
"${no_aslr[@]}" scripts/build.sh "${tsan_target[@]}" "$@"
took "the build"
dir=$(scripts/build.sh --print-dir "$@")
if [ "$checks" = 1 ]; then
  scripts/check_thread_safety.sh --not-libbackplane "$dir"
  took "the lock-annotation check"
fi

# allocator_may_return_null: the device API checks ask every allocator for
# 2^60 bytes and expect a clean kResourceExhausted, which needs the null
# that malloc returns without ASan.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"
# The leak checker crashes at exit scanning the thread-local storage of the
# dlopen'ed CPU plugin (oneDNN streams, libgomp state), so it runs without TLS
# roots and suppresses exactly those TLS blocks (scripts/lsan.supp says why).
export LSAN_OPTIONS="${LSAN_OPTIONS:-use_tls=0:suppressions=$PWD/scripts/lsan.supp}"
export BACKPLANE_FALLBACK="${BACKPLANE_FALLBACK:-silent}"
if [ "$tsan" = 1 ]; then
  # The CPU plugin's threads are OpenMP's (libgomp), which ThreadSanitizer
  # does not see into: its barriers would read as races. One thread, should
  # a test of the subset load it.
  export BACKPLANE_NUM_THREADS="${BACKPLANE_NUM_THREADS:-1}"
  "${no_aslr[@]}" ctest --test-dir "$dir" -L tsan --no-tests=error --output-on-failure --parallel "$(nproc)" --timeout 600
  took "ctest"
  exit 0
fi
# ONNX's node tests, which scripts/setup.sh --tests fetched: the loader's
# test reads the whole corpus, and the corpus runs as conformance below.
BACKPLANE_ONNX_NODE_TESTS="$(scripts/fetch_onnx_tests.sh)"
export BACKPLANE_ONNX_NODE_TESTS
# ctest runs nproc test programs at once and each one's CPU kernels start as
# many OpenMP threads as there are cores, so the machine is oversubscribed:
# libgomp's threads spin between parallel regions by default, burning the
# core another test needs (half of a dtype sweep's time was spinning). The
# tests wait passively; the conformance runs below, alone on the machine,
# keep the default.
OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}" \
  ctest --test-dir "$dir" --output-on-failure --parallel "$(nproc)" --timeout 600
took "ctest"

# The conformance command, as a vendor's CI runs it, on every plugin this
# build made: device API checks and every op spec on each backend with a
# device (backends without one are reported and skipped). Reports land in
# the build directory. The normal run only: under the sanitizers,
# conformance_tests has just run every spec on the same backends (and
# through the CPU fallback), and conformance_cli the command's own paths.
if [ "$checks" = 1 ]; then
  plugin_args=()
  for p in "$dir"/lib/backplane/plugins/*.so; do plugin_args+=(--plugin "$p"); done
  "$dir"/cli/backplane --no-default-plugins "${plugin_args[@]}" conformance \
    --json "$dir/conformance.json" --junit "$dir/conformance.xml" --markdown "$dir/conformance.md"
  took "the conformance run"
fi

# The same command over ONNX's node tests (Note [ONNX node tests]) on the
# CPU plugin and the GPU simulator, with each backend's checked-in expected
# failures (conformance/onnx/expected_failures/<backend>.txt); reports in
# the build directory as onnx-conformance.{json,xml,md}.
"$dir"/cli/backplane --no-default-plugins --plugin "$dir/lib/backplane/plugins/backplane_cpu.so" \
  --plugin "$dir/lib/backplane/test_plugins/backplane_gpusim.so" conformance --onnx "$BACKPLANE_ONNX_NODE_TESTS" \
  --backend cpu --backend gpusim --onnx-expected conformance/onnx/expected_failures \
  --json "$dir/onnx-conformance.json" --junit "$dir/onnx-conformance.xml" --markdown "$dir/onnx-conformance.md"
took "the ONNX conformance run"

# The Python package as `pip wheel .` builds it, installed and used with no
# build tree around (scripts/check_wheel.sh); the normal run only: sanitizer
# builds have no Python package. It builds its own Release tree
# (build/wheel/), of only what the package needs, without the GPU plugins,
# unoptimized (-O0: what it checks does not depend on code generation).
if [ "$checks" = 1 ]; then
  scripts/check_wheel.sh --unoptimized
  took "the wheel check"
fi
