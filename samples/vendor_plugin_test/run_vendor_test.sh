#!/usr/bin/env bash
# run_vendor_test.sh BUILD_DIR SOURCE_DIR TEST_BINARY
#
# Proves that a vendor can build a Backplane plugin from an INSTALLED SDK,
# with another compiler and standard library than the host's:
#   1. installs BUILD_DIR into a temporary prefix (cmake --install);
#   2. configures and builds SOURCE_DIR/samples/vendor_plugin (the toyaccel
#      plugin) out of tree against that prefix with g++, checks that it used
#      the installed package and headers, and runs TEST_BINARY (this build's
#      vendor_plugin_test, the host) with BACKPLANE_TOYACCEL_PLUGIN set to it;
#   3. does the same with clang++ -stdlib=libc++, checks with ldd that that
#      plugin links libc++ and not libstdc++, and runs the same TEST_BINARY
#      (a g++/libstdc++ host) against the libc++ plugin.
# Also loads each plugin with the installed `backplane` tool, as the README
# tells vendors to.
#
# Exit status: 0 pass; 1 fail; 77 (ctest: skipped) only when clang++ or
# libc++ is not installed, and only after the g++ half has passed.
# Environment: GXX (default g++), CLANGXX (default clang++), KEEP_TMP=1 keeps
# the temporary directory for inspection.
set -euo pipefail

die() {
  printf '\nrun_vendor_test.sh: FAIL: %s\n' "$*" >&2
  exit 1
}
step() { printf '\n==== %s\n' "$*"; }

if [[ $# -ne 3 ]]; then
  echo "usage: $0 BUILD_DIR SOURCE_DIR TEST_BINARY" >&2
  echo "  e.g. $0 build . build/samples/vendor_plugin_test/vendor_plugin_test" >&2
  exit 2
fi
[[ -f $1/cmake_install.cmake ]] || die "$1 is not a configured Backplane build directory (no cmake_install.cmake)"
[[ -f $2/samples/vendor_plugin/CMakeLists.txt ]] || die "$2 is not the Backplane source directory (no samples/vendor_plugin)"
[[ -x $3 ]] || die "$3 is not an executable; build it first (ninja -C BUILD_DIR vendor_plugin_test)"
build_dir=$(cd "$1" && pwd)
src_dir=$(cd "$2" && pwd)
test_bin=$(cd "$(dirname "$3")" && pwd)/$(basename "$3")
sample=$src_dir/samples/vendor_plugin
gxx=${GXX:-g++}
clangxx=${CLANGXX:-clang++}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/backplane_vendor_test.XXXXXX")
cleanup() {
  if [[ ${KEEP_TMP:-0} == 1 ]]; then echo "run_vendor_test.sh: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
prefix=$tmp/prefix

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

# ------------------------------------------------------------------ install
step "install $build_dir into $prefix"
if ! cmake --install "$build_dir" --prefix "$prefix" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log"
  die "cmake --install $build_dir failed"
fi
for f in include/backplane/plugin.hpp include/backplane/plugin_api.h lib/cmake/Backplane/BackplaneConfig.cmake \
  lib/cmake/Backplane/BackplanePlugin.cmake bin/backplane; do
  [[ -e $prefix/$f ]] || die "the install has no $f"
done
echo "ok: headers, lib/cmake/Backplane and bin/backplane installed"

# build_plugin DIR COMPILER [CMAKE ARGS...]: configures and builds the sample
# out of tree against the install, then checks it really used the install.
build_plugin() {
  local out=$1 cxx=$2
  shift 2
  step "configure and build samples/vendor_plugin with $cxx${*:+ $*} into $out"
  cmake -S "$sample" -B "$out" "${generator[@]}" \
    -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
    -DCMAKE_CXX_COMPILER="$cxx" "$@" ||
    die "configuring samples/vendor_plugin against the installed package failed ($cxx)"
  cmake --build "$out" --verbose || die "building the toyaccel plugin failed ($cxx)"
  [[ -f $out/toyaccel.so ]] || die "the build produced no $out/toyaccel.so"
  # The package and the headers must come from the install, not the tree.
  grep -q "^Backplane_DIR:PATH=$prefix/lib/cmake/Backplane\$" "$out/CMakeCache.txt" ||
    die "find_package(Backplane) did not use the install: $(grep '^Backplane_DIR' "$out/CMakeCache.txt")"
  grep -q -- "$prefix/include" "$out/compile_commands.json" ||
    die "toyaccel.cc was not compiled against $prefix/include"
  if grep -q -- "$src_dir/plugin_sdk" "$out/compile_commands.json"; then
    die "toyaccel.cc was compiled against the source tree's plugin_sdk, not the install"
  fi
  echo "ok: built $out/toyaccel.so from $prefix (Backplane_DIR and include path checked)"
}

# check_exports SO: only the plugin entry points are exported as functions.
check_exports() {
  local so=$1 got
  if ! command -v nm >/dev/null 2>&1; then
    echo "note: nm not found; exported symbols not checked"
    return
  fi
  got=$(nm -D --defined-only "$so" | awk '$2 == "T" { print $3 }' | sort | tr '\n' ' ')
  [[ $got == "backplane_plugin_init backplane_plugin_query backplane_plugin_shutdown " ]] ||
    die "$so exports other functions than the entry points: $got"
  echo "ok: exported functions: $got"
}

# run_host SO LABEL: the host test against plugin SO, then the installed tool.
run_host() {
  local so=$1 label=$2 out
  step "vendor_plugin_test (g++ host) against the $label plugin"
  BACKPLANE_TOYACCEL_PLUGIN=$so "$test_bin" --gtest_color=no ||
    die "vendor_plugin_test failed against the $label plugin $so"
  step "installed backplane tool: --no-default-plugins --plugin ($label)"
  out=$("$prefix/bin/backplane" --no-default-plugins --plugin "$so" plugins) ||
    die "backplane plugins --plugin $so failed: $out"
  echo "$out"
  grep -Eq '^toyaccel +1\.0\.0 .*toyaccel: 2 +3 +loaded' <<<"$out" ||
    die "backplane plugins does not list toyaccel 1.0.0 as loaded with 2 devices and 3 kernels"
  out=$("$prefix/bin/backplane" --no-default-plugins --plugin "$so" devices) || die "backplane devices failed: $out"
  grep -q '^  toyaccel:1\( \|$\)' <<<"$out" || die "backplane devices does not list toyaccel:1: $out"
  echo "ok: the installed tool loads it and lists toyaccel:0 and toyaccel:1"
}

# ------------------------------------------------------------------- g++
command -v "$gxx" >/dev/null 2>&1 || die "$gxx not found (set GXX)"
build_plugin "$tmp/gcc" "$gxx"
gcc_so=$tmp/gcc/toyaccel.so
step "ldd $gcc_so"
ldd_out=$(ldd "$gcc_so")
echo "$ldd_out"
# (here-strings, not pipes: grep -q exiting early would fail the pipe under pipefail)
grep -q 'libstdc++\.so' <<<"$ldd_out" || die "the g++ plugin does not link libstdc++?"
check_exports "$gcc_so"
run_host "$gcc_so" "g++/libstdc++"

# --------------------------------------------------------- clang + libc++
skip() {
  printf '\nrun_vendor_test.sh: SKIP (the g++ half passed): %s\n' "$*"
  exit 77
}
command -v "$clangxx" >/dev/null 2>&1 || skip "$clangxx not found; install clang (or set CLANGXX)"
# <__config> exists only in libc++, so this tells "libc++ headers missing"
# apart from any other problem; then a trivial program must link.
if ! echo '#include <__config>' | "$clangxx" -stdlib=libc++ -x c++ -E - >/dev/null 2>"$tmp/probe.log"; then
  cat "$tmp/probe.log"
  skip "libc++ headers not found by $clangxx -stdlib=libc++; install libc++-dev and libc++abi-dev"
fi
printf '#include <string>\nint main() { return static_cast<int>(std::string("x").size()) - 1; }\n' >"$tmp/probe.cc"
if ! "$clangxx" -stdlib=libc++ "$tmp/probe.cc" -o "$tmp/probe" >"$tmp/probe.log" 2>&1; then
  cat "$tmp/probe.log"
  skip "$clangxx -stdlib=libc++ cannot link a program; install libc++-dev and libc++abi-dev"
fi

build_plugin "$tmp/clang" "$clangxx" \
  -DCMAKE_CXX_FLAGS=-stdlib=libc++ \
  -DCMAKE_MODULE_LINKER_FLAGS=-stdlib=libc++ \
  -DCMAKE_SHARED_LINKER_FLAGS=-stdlib=libc++
clang_so=$tmp/clang/toyaccel.so
grep -q -- '-stdlib=libc++' "$tmp/clang/compile_commands.json" || die "the clang build did not compile with -stdlib=libc++"
step "ldd $clang_so (must link libc++, not libstdc++)"
ldd_out=$(ldd "$clang_so")
echo "$ldd_out"
if grep -q 'not found' <<<"$ldd_out"; then die "$clang_so has unresolved libraries"; fi
grep -Eq '^[[:space:]]*libc\+\+\.so' <<<"$ldd_out" || die "$clang_so does not link libc++: the test would not prove its claim"
if grep -q 'libstdc++' <<<"$ldd_out"; then die "$clang_so links libstdc++: the test would not prove its claim"; fi
echo "ok: $clang_so links libc++ and not libstdc++"
check_exports "$clang_so"
run_host "$clang_so" "clang++/libc++"

step "PASS: toyaccel built out of tree from the installed SDK with g++ and with clang++ -stdlib=libc++; both pass vendor_plugin_test in a g++ host"
