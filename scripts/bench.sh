#!/usr/bin/env bash
# Builds (Release) and runs the benchmarks in bench/; writes Google Benchmark
# JSON to build/bench/results.json (dispatch_bench),
# build/bench/spconv_results.json (spconv_bench) and, when the CUDA plugin is
# built, build/bench/cuda_results.json (cuda_bench: its benchmarks skip
# without a GPU) and, when libtorch is found, build/bench/train_results.json
# (train_bench: a training step against libtorch's), and prints the ratios the issues ask for. Repetitions run
# interleaved in random order, so that a noisy neighbour or a clock change
# lands on a benchmark and its baseline alike; the ratios use medians. Then,
# when the Python package builds (a Python with nanobind: scripts/setup.sh
# makes .venv), bench/python/bench_ops.py times one operator call from Python
# next to PyTorch's. Last, where the mpi plugin is built, all_reduce across 2
# processes (mpirun) through Backplane and through MPI_Allreduce directly
# (bench/comm/allreduce_bench.cc), printed as a table.
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
# The Python package builds with .venv's interpreter when there is one.
python_exe=()
[ -x .venv/bin/python ] && python_exe=(-DPython_EXECUTABLE="$PWD/.venv/bin/python")
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DBACKPLANE_BUILD_TESTS=OFF \
  -DBACKPLANE_BUILD_BENCHMARKS=ON "${python_exe[@]}" >/dev/null
targets=(dispatch_bench spconv_bench backplane_cpu backplane_spconv)
programs=(dispatch_bench:results spconv/spconv_bench:spconv_results)
# train_bench exists only where CMake found libtorch (bench/CMakeLists.txt).
if ninja -C build-release -t targets all | grep -x 'train_bench: phony' >/dev/null; then
  targets+=(train_bench)
  programs+=(train_bench:train_results)
fi
# cuda_bench exists only where CMake found nvcc (bench/gpu/CMakeLists.txt).
if ninja -C build-release -t targets all | grep -x 'cuda_bench: phony' >/dev/null; then
  targets+=(cuda_bench)
  programs+=(gpu/cuda_bench:cuda_results)
fi
# Every plugin this build has, so that BM_LoadAllPlugins loads all of them
# (the GPU and MPI plugins exist where their toolkits were found).
for plugin in backplane_cuda backplane_gpusim backplane_hip backplane_mpi; do
  if ninja -C build-release -t targets all | grep -x "$plugin: phony" >/dev/null; then
    targets+=("$plugin")
  fi
done
cmake --build build-release --parallel "$(nproc)" --target "${targets[@]}"
mkdir -p build/bench
# A program none of whose benchmarks match the filter writes an empty JSON
# file, or none: remove the last run's, so that the ratios never mix two runs.
rm -f build/bench/results.json build/bench/spconv_results.json build/bench/cuda_results.json build/bench/train_results.json
for program in "${programs[@]}"; do
  BACKPLANE_FALLBACK=silent "build-release/bench/${program%%:*}" \
    --benchmark_filter="$filter" \
    --benchmark_repetitions="$reps" --benchmark_enable_random_interleaving=true \
    --benchmark_report_aggregates_only=true \
    --benchmark_out="build/bench/${program#*:}.json" --benchmark_out_format=json
done
echo
scripts/bench_ratios.py build/bench/results.json build/bench/spconv_results.json build/bench/cuda_results.json \
  build/bench/train_results.json

# One operator call from Python, end to end, next to torch.add (Debian's
# torch when importable). The package target exists only where CMake found
# a Python with nanobind (python/CMakeLists.txt).
if ninja -C build-release -t targets all | grep -x 'backplane_python_package: phony' >/dev/null; then
  cmake --build build-release --parallel "$(nproc)" --target backplane_python_package
  python=$(sed -n 's/^Python_EXECUTABLE:[A-Z]*=//p' build-release/CMakeCache.txt)
  echo
  PYTHONPATH="$PWD/build-release/python" BACKPLANE_FALLBACK=silent "$python" bench/python/bench_ops.py
else
  echo
  echo "bench.sh: no Python package in build-release (no Python with nanobind; scripts/setup.sh makes .venv):" \
    "bench/python/bench_ops.py skipped"
fi

# all_reduce across 2 processes: Backplane's comm::all_reduce_ against
# MPI_Allreduce called directly, 8 B to 64 MiB. The target exists only where
# CMake found MPI (bench/CMakeLists.txt).
if ninja -C build-release -t targets all | grep -x 'allreduce_bench: phony' >/dev/null; then
  cmake --build build-release --parallel "$(nproc)" --target allreduce_bench backplane_mpi
  as_root=()
  [ "$(id -u)" -eq 0 ] && as_root=(--allow-run-as-root)
  echo
  BACKPLANE_FALLBACK=silent mpirun "${as_root[@]}" -np 2 build-release/bench/comm/allreduce_bench
else
  echo
  echo "bench.sh: no mpi plugin in build-release (Open MPI not found): bench/comm/allreduce_bench skipped"
fi
