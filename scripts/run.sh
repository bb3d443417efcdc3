#!/usr/bin/env bash
# The main job: set up, build, run the demo.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh
dir=$(scripts/build.sh --print-dir)
echo
echo "== quickstart: an operator defined, implemented on CPU, run on cpu and on a device without a kernel"
"$dir/samples/quickstart/quickstart"
echo
echo "== backplane plugins: what a process loads by default"
"$dir/dispatcher/cli/backplane" plugins
echo
echo "== backplane ops: the op x backend table (native / composite / fallback / missing)"
"$dir/dispatcher/cli/backplane" ops
