#!/usr/bin/env bash
# Builds (Release) and runs the benchmarks in bench/; writes Google Benchmark
# JSON to build/bench/results.json (dispatch_bench),
# build/bench/spconv_results.json (spconv_bench) and, when the CUDA plugin is
# built, build/bench/cuda_results.json (cuda_bench: its benchmarks skip
# without a GPU) and prints the ratios the issues ask for. Repetitions run
# interleaved in random order, so that a noisy neighbour or a clock change
# lands on a benchmark and its baseline alike; the ratios use medians.
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
targets=(dispatch_bench spconv_bench backplane_cpu backplane_spconv)
programs=(dispatch_bench:results spconv/spconv_bench:spconv_results)
# cuda_bench exists only where CMake found nvcc (bench/gpu/CMakeLists.txt).
if ninja -C build-release -t targets all | grep -x 'cuda_bench: phony' >/dev/null; then
  targets+=(cuda_bench)
  programs+=(gpu/cuda_bench:cuda_results)
fi
cmake --build build-release --parallel "$(nproc)" --target "${targets[@]}"
mkdir -p build/bench
# A program none of whose benchmarks match the filter writes an empty JSON
# file, or none: remove the last run's, so that the ratios never mix two runs.
rm -f build/bench/results.json build/bench/spconv_results.json build/bench/cuda_results.json
for program in "${programs[@]}"; do
  BACKPLANE_FALLBACK=silent "build-release/bench/${program%%:*}" \
    --benchmark_filter="$filter" \
    --benchmark_repetitions="$reps" --benchmark_enable_random_interleaving=true \
    --benchmark_report_aggregates_only=true \
    --benchmark_out="build/bench/${program#*:}.json" --benchmark_out_format=json
done
echo
scripts/bench_ratios.py build/bench/results.json build/bench/spconv_results.json build/bench/cuda_results.json
