#!/usr/bin/env bash
# Installs the Debian packages Backplane needs; skips what is present.
# Idempotent. Run as root (CI does), or with sudo available.
#   scripts/setup.sh --tests   also what only the tests need (scripts/test.sh)
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  libboost-dev          # Boost.DLL (header-only) for the plugin loader
  libabsl-dev           # Status/StatusOr, containers
  libdnnl-dev           # oneDNN, for the CPU plugin
  libgtest-dev libgmock-dev
  libbenchmark-dev
  libdlpack-dev
  python3               # tests that parse the tool's JSON and JUnit reports
  python3-numpy         # the DLPack interop test (dispatcher/tests/api/dlpack_interop_test.py)
  clang libc++-dev libc++abi-dev   # building the vendor sample with libc++; clang also runs scripts/check_thread_safety.sh
  clang-format                     # scripts/check_format.sh (git clang-format)
  hipcc libamdhip64-dev            # the HIP plugin (compiles; no AMD GPU needed)
)
# Test-only: libtorch, which the differential tests against PyTorch link
# (dispatcher/tests/torch_parity); no product target uses it.
case " $* " in *" --tests "*) packages+=(libtorch-dev) ;; esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      echo "setup: not root and no sudo; install these packages first: ${missing[*]}" >&2
      exit 1
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "setup: done"
fi

# The CUDA toolkit is not a Debian package here; the build uses it when nvcc
# is found (on PATH or in /usr/local/cuda/bin) and skips the CUDA plugin otherwise.
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: CUDA toolkit found"
else
  echo "setup: no CUDA toolkit (nvcc); the CUDA plugin will be skipped"
fi
