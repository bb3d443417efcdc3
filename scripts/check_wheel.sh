#!/usr/bin/env bash
# Builds the Python package's wheel as `pip wheel .` does from a clone, installs
# it into a fresh venv and checks it there, with neither the source nor the
# build tree in reach: the package imports from the venv, its plugins come
# from inside it, an operator runs, the tool inside it runs, and no file of
# the wheel names the clone (no RPATH, path or _build_paths.py into it).
#   scripts/check_wheel.sh [--gpu-plugins] [--unoptimized]
# The wheel builds without the CUDA and HIP plugins unless --gpu-plugins is
# given (their device compilers would take most of the time; what is checked
# here is the packaging, which is the same for every plugin). --unoptimized
# compiles it at -O0 instead of the Release build's -O3 (scripts/test.sh
# passes it: the packaging, the layout, the search paths and the calls this
# checks do not depend on code generation, and -O3 made the check most of a
# CI step; the CPU plugin's dtype loops alone took minutes), as a unity
# build (CMAKE_UNITY_BUILD: each target's sources compiled a few at a time
# as one unit, so the headers are parsed once per unit, not per file; at -O0
# the parsing is most of the time: 75 s against 129 s for the wheel, cold,
# on a 2-core machine). Sources must therefore not define one name twice in
# their anonymous namespaces within a target. It builds with
# .venv's interpreter and build dependencies (scripts/setup.sh), without build
# isolation, so it needs no network. The wheel's build folder,
# build/wheel/<tag>, is kept: a second run rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

gpu=(--config-settings=cmake.define.BACKPLANE_WITH_CUDA=OFF --config-settings=cmake.define.BACKPLANE_WITH_HIP=OFF)
optimization=()
for a in "$@"; do
  case "$a" in
    --gpu-plugins) gpu=() ;;
    --unoptimized) optimization=("--config-settings=cmake.define.CMAKE_CXX_FLAGS_RELEASE=-O0 -DNDEBUG"
                                 "--config-settings=cmake.define.CMAKE_UNITY_BUILD=ON") ;;
    *) echo "check_wheel.sh: unknown option '$a' (takes --gpu-plugins, --unoptimized)" >&2; exit 2 ;;
  esac
done
python=$repo/.venv/bin/python
if [ ! -x "$python" ]; then
  echo "check_wheel.sh: no $python; run scripts/setup.sh first (it makes .venv with the build dependencies)" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

start=$SECONDS
"$python" -m pip wheel . --no-deps --no-build-isolation --disable-pip-version-check -q -w "$tmp/dist" "${gpu[@]}" \
  "${optimization[@]}"
wheels=("$tmp"/dist/backplane-*.whl)
wheel=${wheels[0]}
[ -f "$wheel" ] || { echo "check_wheel.sh: pip wheel made no backplane wheel in $tmp/dist" >&2; exit 1; }
echo "check_wheel: built $(basename "$wheel") ($(($(stat -c %s "$wheel") / 1024)) KiB) in $((SECONDS - start)) s"

# What the wheel holds (Note [The Python package's layout] in python/CMakeLists.txt).
mkdir "$tmp/unpacked"
"$python" -m zipfile -e "$wheel" "$tmp/unpacked"
fail=0
for f in backplane/__init__.py backplane/_ops.py "backplane/_backplane.*.so" backplane/__init__.pyi backplane/py.typed \
         "backplane/lib/libbackplane.so.*" \
         backplane/lib/backplane/plugins/backplane_cpu.so backplane/lib/backplane/plugins/backplane_spconv.so \
         backplane/bin/backplane; do
  if ! compgen -G "$tmp/unpacked/$f" >/dev/null; then echo "check_wheel: the wheel has no $f" >&2; fail=1; fi
done
libs=("$tmp"/unpacked/backplane/lib/libbackplane.so*)
if [ ${#libs[@]} -ne 1 ]; then
  echo "check_wheel: the wheel holds the host library ${#libs[@]} times (${libs[*]##*/}); once, under its soname, is enough" >&2
  fail=1
fi
if [ -e "$tmp/unpacked/backplane/_build_paths.py" ]; then
  echo "check_wheel: the wheel has backplane/_build_paths.py, which names the build tree" >&2
  fail=1
fi
# Every RPATH/RUNPATH entry is relative to the file ($ORIGIN) or a system
# folder outside the clone (the CUDA plugin's points to the toolkit's cuBLAS);
# none into the clone, none relative to the working directory.
while IFS= read -r -d '' f; do
  if readelf -h "$f" >/dev/null 2>&1; then
    paths=$(readelf -d "$f" | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]/\2/p')
    IFS=: read -r -a entries <<<"$paths"
    for e in "${entries[@]}"; do
      case "$e" in
        "\$ORIGIN"*) ;;
        "$repo" | "$repo"/*) echo "check_wheel: ${f#"$tmp"/unpacked/} has RPATH entry '$e', into the clone" >&2; fail=1 ;;
        /*) ;;
        *) echo "check_wheel: ${f#"$tmp"/unpacked/} has RPATH entry '$e', relative to the working directory" >&2; fail=1 ;;
      esac
    done
  fi
done < <(find "$tmp/unpacked" -type f -print0)
# Nor any path into the clone or scikit-build-core's staging folder (the
# install prefix, <tmp>/wheel/platlib): the package finds its files from its
# own location.
if grep -rl --binary-files=text -F -e "$repo" -e /wheel/platlib "$tmp/unpacked" >"$tmp/names_repo"; then
  echo "check_wheel: these files of the wheel name the clone ($repo) or the install prefix of the build:" >&2
  sed "s|^$tmp/unpacked/|  |" "$tmp/names_repo" >&2
  fail=1
fi
[ "$fail" = 0 ] || exit 1

# Installed in a fresh venv (Debian's numpy visible, as a user's would have
# it), then used from / with nothing of the clone on any search path.
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --no-deps --no-index --disable-pip-version-check -q "$wheel"
cd /
env -u PYTHONPATH -u LD_LIBRARY_PATH -u BACKPLANE_PLUGIN_PATH -u BACKPLANE_DEVICE BACKPLANE_FALLBACK=silent \
  "$tmp/venv/bin/python" - "$tmp/venv" "$repo" <<'EOF'
import os
import subprocess
import sys

venv, repo = (os.path.realpath(p) for p in sys.argv[1:3])
import backplane

package = os.path.dirname(os.path.realpath(backplane.__file__))
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


check(package.startswith(venv + os.sep), f"backplane imported from {package}, not from the venv {venv}")
check(not package.startswith(repo + os.sep), f"backplane imported from the clone: {package}")
for name, module in sorted(sys.modules.items()):
    path = getattr(module, "__file__", None) or ""
    check(not os.path.realpath(path).startswith(repo + os.sep), f"module {name} loaded from the clone: {path}")

# The plugins: the first-party ones, loaded, from the package's own plugin directory.
plugin_dir = os.path.join(package, "lib", "backplane", "plugins")
plugins = backplane.plugins()
names = {p.name for p in plugins}
check({"cpu", "spconv"} <= names, f"plugins {sorted(names)} lack cpu or spconv")
for p in plugins:
    check(p.loaded, f"plugin {p.name} did not load: {p.error}")
    check(os.path.dirname(os.path.realpath(p.path)) == plugin_dir,
          f"plugin {p.name} came from {p.path}, not from the package's {plugin_dir}")
check("cpu" in [str(d.device) for d in backplane.devices()], f"no cpu device: {backplane.devices()}")
check("spconv" in backplane.ops.namespaces(), f"the spconv plugin's operators are missing: {backplane.ops.namespaces()}")

# Operators: elementwise and reduction ops (the host's), matmul (the CPU plugin's, oneDNN).
x = backplane.arange(6, dtype=backplane.float32).reshape(2, 3)
s = repr((x * 2 + 1).sum())
check(s == "tensor(36., float32, cpu)", f"(x * 2 + 1).sum() gave {s}")
m = repr(x @ x.t())
check(m == "tensor([[ 5., 14.],\n        [14., 50.]], float32, cpu)", f"x @ x.t() gave {m}")

# The tool inside the package runs and finds the same plugins.
tool = os.path.join(package, "bin", "backplane")
out = subprocess.run([tool, "plugins"], capture_output=True, text=True)
check(out.returncode == 0, f"{tool} plugins exited {out.returncode}: {out.stderr}")
check(plugin_dir in out.stdout, f"{tool} plugins does not list the package's plugins:\n{out.stdout}")

if failures:
    print("check_wheel: the installed package fails:", *failures, sep="\n  ", file=sys.stderr)
    sys.exit(1)
print(f"check_wheel: the installed package works: {package}, plugins {sorted(names)}, ops and tool run")
EOF
