#!/usr/bin/env bash
# Builds (Release) and runs the benchmarks in bench/; writes Google Benchmark
# JSON to build/bench/results.json and prints the ratios the issues ask for.
#   scripts/bench.sh [--filter=REGEX] [--repetitions=N]
set -euo pipefail
cd "$(dirname "$0")/.."

filter="."
reps=10
for a in "$@"; do
  case "$a" in
    --filter=*) filter="${a#--filter=}" ;;
    --repetitions=*) reps="${a#--repetitions=}" ;;
    *) echo "bench.sh: unknown option '$a'" >&2; exit 2 ;;
  esac
done

scripts/setup.sh
# Release build in its own folder, so it does not fight the test build's flags.
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DBACKPLANE_BUILD_TESTS=OFF \
  -DBACKPLANE_BUILD_BENCHMARKS=ON >/dev/null
cmake --build build-release --parallel "$(nproc)" --target dispatch_bench backplane_cpu
mkdir -p build/bench
BACKPLANE_FALLBACK=silent build-release/bench/dispatch_bench \
  --benchmark_filter="$filter" \
  --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true \
  --benchmark_out=build/bench/results.json --benchmark_out_format=json
echo
scripts/bench_ratios.py build/bench/results.json
