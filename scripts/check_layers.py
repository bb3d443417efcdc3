#!/usr/bin/env python3
"""Checks that the folder map is the dependency graph (Note [Layers], docs/design.md).

The layers, lowest first:
    plugin_sdk < core < dispatch < ops < runtime < conformance < cli
Plugins sit on plugin_sdk alone. Two checks, each failing with the file or
target that points upward:

  includes  every `#include "backplane/..."` in a layer's sources resolves
            to a header of the same or a lower layer (plugins: the SDK);
  targets   (with --build DIR) no CMake target of a layer links a target of
            a higher layer, read from the link graph CMake wrote there.

The linker checks the third direction itself: each layer with the ones below
it links as a shared library that may leave no symbol undefined
(backplane_layer_check_* in dispatcher/CMakeLists.txt).

    scripts/check_layers.py [--build BUILD_DIR]
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name, rank, folders whose sources belong to it, its public include root
LAYERS = [
    ("plugin_sdk", 0, ["plugin_sdk/include", "plugin_sdk/cmake"], "plugin_sdk/include"),
    ("core", 1, ["core/include", "core/src"], "core/include"),
    ("dispatch", 2, ["dispatcher/dispatch"], "dispatcher/dispatch/include"),
    ("ops", 3, ["dispatcher/ops"], "dispatcher/ops/include"),
    ("runtime", 4, ["dispatcher/runtime"], "dispatcher/runtime/include"),
    ("conformance", 5, ["conformance/include", "conformance/src"], "conformance/include"),
    ("cli", 6, ["cli"], None),
]
# Tests sit on the layer they test; they may use what that layer links.
TEST_LAYERS = [("core/tests", 1), ("core/testing", 1), ("dispatcher/tests", 4), ("conformance/tests", 5),
               ("conformance/testing", 0)]
PLUGIN_FOLDERS = ["plugins", "samples/vendor_plugin", "dispatcher/tests/plugins", "bench/plugins", "cli/testing",
                  "conformance/testing"]

# CMake targets of each layer.
TARGETS = {
    "backplane_plugin_api": 0,
    "backplane_core": 1,
    "backplane_dispatch": 2,
    "backplane_ops": 3,
    "backplane_runtime": 4,
    "backplane": 4,
    "Backplane::backplane": 4,
    "Backplane::plugin_sdk": 0,
    "backplane_conformance": 5,
    "backplane_cli": 6,
}
FIRST_PARTY_PLUGINS = {"backplane_cpu", "backplane_cuda", "backplane_hip", "backplane_spconv", "backplane_gpusim"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"(backplane/[^"]+)"', re.M)
SOURCE_EXT = (".h", ".hpp", ".cc", ".cpp", ".cu", ".c", ".cuh")


def header_owner(header):
    """The rank of the layer whose include root holds `header`, or None."""
    for _, rank, _, inc in LAYERS:
        if inc and os.path.isfile(os.path.join(ROOT, inc, header)):
            return rank
    return None


def layer_name(rank):
    return next(name for name, r, _, _ in LAYERS if r == rank)


def sources(folder):
    for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
        for f in files:
            if f.endswith(SOURCE_EXT):
                yield os.path.join(dirpath, f)


def check_includes():
    problems = []
    plugin_dirs = [os.path.join(ROOT, p) for p in PLUGIN_FOLDERS]

    def check(path, allowed_rank, what):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for header in INCLUDE.findall(text):
            owner = header_owner(header)
            if owner is not None and owner > allowed_rank:
                problems.append(f"{os.path.relpath(path, ROOT)}: includes \"{header}\" of layer "
                                f"'{layer_name(owner)}', above {what}")

    for name, rank, folders, _ in LAYERS:
        for folder in folders:
            for path in sources(folder):
                check(path, rank, f"'{name}'")
    for folder, rank in TEST_LAYERS:
        for path in sources(folder):
            if any(path.startswith(p + os.sep) for p in plugin_dirs):
                continue
            check(path, rank, f"the '{layer_name(rank)}' layer its tests sit on")
    for folder in PLUGIN_FOLDERS:
        for path in sources(folder):
            check(path, 0, "a plugin (plugins include only plugin_sdk)")
    return problems


def check_targets(build_dir):
    """Reads <build>/layer_links.txt, which the root CMakeLists.txt writes at
    configure time: one line per target, its name, a tab, and its direct and
    interface link libraries separated by ';'."""
    problems = []
    path = os.path.join(build_dir, "layer_links.txt")
    if not os.path.isfile(path):
        return [f"{path} is missing: configure the build with CMake first"]
    seen = set()
    with open(path) as f:
        for line in f:
            if "\t" not in line:
                continue
            a, links = line.rstrip("\n").split("\t", 1)
            seen.add(a)
            for item in links.split(";"):
                # $<BUILD_INTERFACE:x>, $<LINK_ONLY:x>, ... name x
                b = re.sub(r"^(\$<[A-Z_]+:)+", "", item).rstrip(">")
                if a in FIRST_PARTY_PLUGINS and b in TARGETS and TARGETS[b] > 0:
                    problems.append(f"target {a} (a plugin) links {b}: plugins link only the SDK")
                if a in TARGETS and b in TARGETS and TARGETS[b] > TARGETS[a]:
                    problems.append(f"target {a} (layer '{layer_name(TARGETS[a])}') links {b} "
                                    f"(layer '{layer_name(TARGETS[b])}', above it)")
    missing = [t for t in TARGETS if t not in seen and "::" not in t]
    if missing:
        problems.append(f"the build has no target(s) {', '.join(missing)}: update TARGETS in {__file__}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", help="a configured build folder whose CMake targets to check")
    args = parser.parse_args()
    problems = check_includes()
    if args.build:
        problems += check_targets(args.build)
    for p in problems:
        print(f"check_layers: {p}", file=sys.stderr)
    if problems:
        print(f"check_layers: {len(problems)} upward dependencies; the layers are "
              "plugin_sdk < core < dispatch < ops < runtime < conformance < cli (docs/design.md, Note [Layers])",
              file=sys.stderr)
        return 1
    print("check_layers: every include and target link points down the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
