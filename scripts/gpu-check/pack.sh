#!/usr/bin/env bash
# Packs a Release build of Backplane with the CUDA plugin, the shared
# libraries a GPU machine without Debian's packages lacks (oneDNN, Abseil,
# OpenCL loader, HIP runtime, benchmark, libmpi), and Debian's Open MPI
# packages (for the runs under mpirun), into one folder for check.sh.
#   scripts/gpu-check/pack.sh [OUT_DIR]      run from the project's root
# The tree is built at /tmp/bp-gpu and must be unpacked at the same path on
# the GPU machine (check.sh does), so compiled-in plugin paths hold. Only
# the programs check.sh runs are built.
set -euo pipefail
out=${1:-gpu-pack}; B=/tmp/bp-gpu; here=$(cd "$(dirname "$0")" && pwd); root=$PWD
scripts/setup.sh >/dev/null
# The Python extension for the GPU machine's Python, 3.12 (a pyenv 3.12 here),
# with nanobind's CMake files from .venv (the same sources for every Python).
py=
for c in $(command -v python3.12) /root/.pyenv/versions/3.12*/bin/python3.12; do
  if [ -x "$c" ] && "$c" -c 'import sysconfig' 2>/dev/null; then py=$c; break; fi  # a pyenv shim may not run
done
pyargs=()
if [ -n "$py" ]; then
  # -U: forget another Python's cached findings (its headers, nanobind).
  pyargs=(-U_BP_NANOBIND_PYTHON "-U_Python*" "-UPython_*" -DPython_EXECUTABLE="$py"
          -Dnanobind_DIR="$(.venv/bin/python -m nanobind --cmake_dir)")
else
  echo "pack.sh: no python3.12 here: the pack has no Python package (check.sh skips its steps)" >&2
fi
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBACKPLANE_BUILD_BENCHMARKS=ON -DBACKPLANE_WERROR=OFF \
  "${pyargs[@]}" >/dev/null
targets=$(ninja -C "$B" -t targets all | grep -oE '^(gpu_[a-z_]+_tests|mpi_collectives_tests|backplane_(cli|cpu|cuda|hip|mpi|spconv|gpusim)|encoder|sparse_lidar|train|cuda_bench|_backplane):' | tr -d : | sort -u)
# shellcheck disable=SC2086
cmake --build "$B" --parallel "$(nproc)" --target $targets
stage=$(mktemp -d); C="$stage/bp-gpu"; mkdir -p "$C/deps"
cd "$B"
files=$(find . -type f -perm -u+x -not -path '*/CMakeFiles/*' \( -name backplane -o -name 'gpu_*_tests' -o -name encoder \
        -o -name sparse_lidar -o -name train -o -name cuda_bench -o -name mpi_collectives_tests \); find lib -name '*.so')
for f in $files; do mkdir -p "$C/$(dirname "$f")"; cp "$f" "$C/$f"; strip --strip-unneeded "$C/$f" 2>/dev/null || true; done
# libbackplane under its soname, beside its plugins: the default plugin
# folder is found from where libbackplane was loaded.
cp -a lib/libbackplane.so.* "$C/lib/"
cp -r "$root/conformance/onnx/expected_failures" "$C/onnx-expected"
# The Python package: its files, the extension, and the build tree's paths
# (/tmp/bp-gpu, as on the GPU machine); the CUDA DLPack tests and the sample.
if [ -n "$py" ] && ls python/backplane/_backplane.cpython-312-*.so >/dev/null 2>&1; then
  mkdir -p "$C/python/backplane"
  cp "$root"/python/backplane/*.py python/backplane/_backplane.cpython-312-*.so python/backplane/_build_paths.py \
     "$C/python/backplane/"
  cp "$root/python/tests/test_dlpack_cuda.py" "$root/samples/python/encoder_layer.py" "$C/python/"
fi
for f in $files $(ls python/backplane/_backplane.cpython-312-*.so 2>/dev/null); do ldd "$f" 2>/dev/null | awk '{print $3}'; done | grep -E '^/' | sort -u |
  grep -vE 'libc\.so|libm\.so|libstdc|libgcc|libpthread|libdl\.so|librt\.so|ld-linux|/cuda|libbackplane' |
  while read -r l; do cp -L "$l" "$C/deps/"; done
cd - >/dev/null; mkdir -p "$out/debs"
git rev-parse HEAD > "$C/HEAD"
tar cJf "$out/bp-gpu.tar.xz" -C "$stage" bp-gpu
# Open MPI and what it needs, unpacked by check.sh into a folder of its own.
(cd "$out/debs" && apt-get download -q openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc15 libevent-core-2.1-7 \
   libevent-pthreads-2.1-7 libevent-2.1-7 libnuma1 libmunge2 libltdl7 2>/dev/null)
cp "$here/check.sh" "$here/torch_baseline.py" "$here/train_curves.py" "$here/../bench_ratios.py" "$out/"
# ONNX's node tests of the pinned wheel (scripts/fetch_onnx_tests.sh), for the ONNX run on cuda.
onnx=$(scripts/fetch_onnx_tests.sh); tar cJf "$out/onnx-node.tar.xz" -C "$onnx" .
rm -rf "$stage"; ls -la "$out"
