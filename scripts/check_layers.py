#!/usr/bin/env python3
"""Checks that the folder map is the dependency graph (Note [Layers], docs/design.md).

The layers, lowest first:
    plugin_sdk < core < dispatch < ops < autograd < runtime < conformance < cli
Plugins sit on plugin_sdk alone. Two checks, each failing with the file or
target that points upward:

  includes  every `#include "backplane/..."` or `<backplane/...>` in every
            source of the repository (tests, fuzz targets, samples, the
            Python package and benchmarks included) resolves to a header of
            the same or a lower layer (plugins: the SDK), and no include
            climbs out of its folder with `..`;
  targets   (with --build DIR) no CMake target of a layer links a target of
            a higher layer, read from the link graph CMake wrote there.

The linker checks the third direction itself: each layer with the ones below
it links as a shared library that may leave no symbol undefined
(backplane_layer_check_* in dispatcher/CMakeLists.txt).

    scripts/check_layers.py [--build BUILD_DIR] [--root SOURCE_TREE]
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name, rank, its public include root (headers there belong to the layer)
LAYERS = [
    ("plugin_sdk", 0, "plugin_sdk/include"),
    ("core", 1, "core/include"),
    ("dispatch", 2, "dispatcher/dispatch/include"),
    ("ops", 3, "dispatcher/ops/include"),
    ("autograd", 4, "dispatcher/autograd/include"),
    ("runtime", 5, "dispatcher/runtime/include"),
    ("conformance", 6, "conformance/include"),
    ("cli", 7, None),
]
RUNTIME, APP = 5, 7
# Every source folder of the repository and the rank of what its files may
# include; the longest matching prefix wins, and a source in no folder here
# is an error (so that a new folder is placed in the layers, not skipped).
# Tests sit beside the layer or plugin they test and may use the host
# library as applications do (the runtime and below); plugins, the plugin
# folders of tests and samples included, see only the SDK (rank 0);
# applications (cli, python, samples, bench) sit on top.
FOLDERS = {
    "plugin_sdk": 0,
    "core": 1,
    "dispatcher/dispatch": 2,
    "dispatcher/ops": 3,
    "dispatcher/autograd": 4,
    "dispatcher/autograd/tests": RUNTIME,
    "dispatcher/runtime": 5,
    "dispatcher/dispatch/tests": RUNTIME,
    "dispatcher/ops/tests": RUNTIME,
    "dispatcher/runtime/tests": RUNTIME,
    "dispatcher/runtime/tests/plugins": 0,
    "dispatcher/fuzz": RUNTIME,
    "dispatcher/fuzz/abi_fuzz_plugin.cc": 0,
    "testing": RUNTIME,
    "conformance": 6,
    "conformance/testing": 0,
    "cli": APP,
    "cli/testing": 0,
    "plugins": 0,
    "samples": APP,
    "samples/minimal_plugin": 0,
    "samples/vendor_plugin": 0,
    "python": APP,
    "bench": APP,
    "bench/plugins": 0,
    "cmake": APP,  # the fuzz replay driver
}
# Each plugin's tests/ folder holds host programs that load the plugin as
# applications do (plugins/gpu/tests also compiles plugin sources, which see
# only the SDK either way).
PLUGIN_TESTS = re.compile(r"^plugins/[^/]+/tests(/|$)")
SKIP_DIRS = {".git", ".venv", ".cache", "corpus", "node_modules", "__pycache__"}

# CMake targets of each layer.
TARGETS = {
    "backplane_plugin_api": 0,
    "backplane_core": 1,
    "backplane_dispatch": 2,
    "backplane_ops": 3,
    "backplane_autograd": 4,
    "backplane_runtime": 5,
    "backplane": 5,
    "Backplane::backplane": 5,
    "Backplane::plugin_sdk": 0,
    "backplane_conformance": 6,
    "backplane_cli": 7,
}
FIRST_PARTY_PLUGINS = {"backplane_cpu", "backplane_cuda", "backplane_hip", "backplane_spconv", "backplane_gpusim"}

# Quoted and angle includes alike.
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
SOURCE_EXT = (".h", ".hpp", ".cc", ".cpp", ".cu", ".cuh", ".c")


def header_owner(root, header):
    """The rank of the layer whose include root holds `header`, or None."""
    if not header.startswith("backplane/"):
        return None
    for _, rank, inc in LAYERS:
        if inc and os.path.isfile(os.path.join(root, inc, header)):
            return rank
    return None


def layer_name(rank):
    if rank == APP:
        return "cli/applications"
    return next(name for name, r, _ in LAYERS if r == rank)


def allowed_rank(rel):
    """What the source at repository path `rel` may include, or None if it
    is in no known folder."""
    if PLUGIN_TESTS.match(rel):
        return RUNTIME
    best, rank = -1, None
    for folder, r in FOLDERS.items():
        if (rel == folder or rel.startswith(folder + "/")) and len(folder) > best:
            best, rank = len(folder), r
    return rank


def sources(root):
    for dirpath, dirs, files in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")
                         and not (rel_dir == "." and d in ("docs", "scripts", ".ci")))
        for f in sorted(files):
            if f.endswith(SOURCE_EXT):
                yield os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/")


def check_includes(root=ROOT):
    problems = []
    for rel in sources(root):
        rank = allowed_rank(rel)
        if rank is None:
            problems.append(f"{rel}: in no folder the layer check knows; add its folder to FOLDERS in "
                            f"scripts/check_layers.py")
            continue
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        what = "a plugin (plugins include only plugin_sdk)" if rank == 0 else f"'{layer_name(rank)}'"
        for quote, header in INCLUDE.findall(text):
            spelled = f"{quote}{header}{'>' if quote == '<' else quote}"
            if header.startswith("../") or "/../" in header:
                problems.append(f"{rel}: includes {spelled} through '..': give the folder an include root "
                                f"(target_include_directories) and include by its path there")
                continue
            owner = header_owner(root, header)
            if owner is not None and owner > rank:
                problems.append(f"{rel}: includes {spelled} of layer '{layer_name(owner)}', above {what}")
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
    parser.add_argument("--root", default=ROOT, help="the source tree to check (default: this repository)")
    args = parser.parse_args()
    problems = check_includes(args.root)
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
