#!/usr/bin/env bash
# Installs the Debian packages Backplane needs, then the Python package's
# build dependencies (from PyPI) into <repo>/.venv; skips what is present.
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
  libonnx-dev libprotobuf-dev      # the ONNX protobuf classes: reading ONNX's node tests (conformance --onnx)
  libre2-dev            # RE2, linear-time regexes for name patterns (conformance --ops, ops --schemas)
  python3               # tests that parse the tool's JSON and JUnit reports
  python3-numpy         # the DLPack interop test (dispatcher/runtime/tests/dlpack_interop_test.py)
  python3-venv python3-dev         # the Python package (python/): .venv below, and Python's headers
  clang libc++-dev libc++abi-dev   # building the vendor sample with libc++; clang also runs scripts/check_thread_safety.sh
  libclang-rt-dev                  # libFuzzer and clang's sanitizer runtimes: the fuzz build (scripts/fuzz.sh)
  clang-format                     # scripts/check_format.sh (git clang-format)
  hipcc libamdhip64-dev            # the HIP plugin (compiles; no AMD GPU needed)
  libopenmpi-dev openmpi-bin       # Open MPI: the CPU engine of the comm:: collectives, and mpirun for their tests
)
# Test-only: libtorch, which the differential tests against PyTorch link
# (dispatcher/ops/tests/torch_parity); no product target uses it.
# The Python package's tests: pytest, PyTorch for the DLPack round trips and
# mypy for the type stubs; test dependencies, never the package's. The docs
# check (scripts/check_markdown.py) parses every .md with markdown-it-py.
case " $* " in *" --tests "*) packages+=(libtorch-dev python3-pytest python3-torch python3-mypy python3-markdown-it) ;; esac

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

# The Python package's build dependencies come from PyPI (the C++ side's stay
# Debian's): a venv of Debian's python3 at .venv, with the system site
# packages visible so that Debian's numpy, torch and pytest serve the tests.
# scripts/build.sh configures with .venv/bin/python when it exists. Pinned,
# with the packages scikit-build-core pulls in.
python_build_requirements=(
  nanobind==3.1.0
  scikit-build-core==1.1.2 packaging==26.4 pathspec==1.1.1
)
venv="$(cd "$(dirname "$0")/.." && pwd)/.venv"
if [ ! -x "$venv/bin/python" ] || ! grep -qx "include-system-site-packages = true" "$venv/pyvenv.cfg" 2>/dev/null; then
  echo "setup: making $venv (a venv of /usr/bin/python3 with --system-site-packages)"
  rm -rf "$venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
# One interpreter start tells which pins are missing or at another version.
missing_python=$("$venv/bin/python" - "${python_build_requirements[@]}" <<'EOF'
import sys
from importlib import metadata
for req in sys.argv[1:]:
    name, _, version = req.partition("==")
    try:
        if metadata.version(name) == version:
            continue
    except metadata.PackageNotFoundError:
        pass
    print(req)
EOF
)
if [ -z "$missing_python" ]; then
  echo "setup: .venv has the Python build dependencies (${python_build_requirements[*]})"
else
  echo "setup: pip-installing into .venv: ${missing_python//$'\n'/ }"
  # shellcheck disable=SC2086  # one requirement per line, no spaces in them
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check $missing_python
fi

# ONNX's node tests (pinned onnx 1.22.0 wheel, hash-checked) for scripts/test.sh: .cache/onnx-1.22.0/node.
case " $* " in *" --tests "*) onnx_tests="$("$(dirname "$0")/fetch_onnx_tests.sh")"; echo "setup: ONNX node tests in $onnx_tests" ;; esac

# The CUDA toolkit is not a Debian package here; the build uses it when nvcc
# is found (on PATH or in /usr/local/cuda/bin) and skips the CUDA plugin otherwise.
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: CUDA toolkit found"
else
  echo "setup: no CUDA toolkit (nvcc); the CUDA plugin will be skipped"
fi
