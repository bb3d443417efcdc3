#!/usr/bin/env bash
# The main job: set up, build, then run the encoder demo and the sparse LiDAR
# backbone on the device picked at run time (`auto`: a GPU when a plugin
# finds one, else the CPU), each checked against the CPU, with per-op
# reports. BACKPLANE_DEVICE=cpu (or cuda:0, ...) picks another device; extra
# arguments go to the encoder.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
# Only what this script runs (the CMake target backplane_demo: the tool, the
# host library, the plugins and the two demos); scripts/test.sh builds the rest.
# Without a GPU device (NVIDIA's or AMD's device nodes), --device auto picks
# the CPU: the GPU plugins, most of the build time, are left out
# (backplane_demo_host) until scripts/build.sh or scripts/test.sh builds them,
# and the encoder (the host library, the CPU plugin, the sample) is built and
# run first, before the rest (the spconv plugin, the LiDAR sample, the tool).
if compgen -G '/dev/nvidia[0-9]*' >/dev/null || [ -e /dev/kfd ]; then
  group=backplane_demo first=backplane_demo
else
  echo "run.sh: no GPU device (/dev/nvidia*, /dev/kfd): building without the GPU plugins"
  group=backplane_demo_host first=encoder
fi
scripts/build.sh --target "$first"
dir=$(scripts/build.sh --print-dir)
echo
echo "== encoder: a BERT-base encoder layer on --device auto, checked against the CPU"
"$dir/samples/encoder/encoder" --device auto "$@"
[ "$first" = "$group" ] || scripts/build.sh --target "$group"
echo
echo "== sparse_lidar: SECOND's sparse 3-D backbone on a synthetic LiDAR scan, on --device auto, checked"
"$dir/samples/sparse_lidar/sparse_lidar" --device auto --iters 1
echo
echo "== backplane devices: what this machine offers"
"$dir/cli/backplane" devices
