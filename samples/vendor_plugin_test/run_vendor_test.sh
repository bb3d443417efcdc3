#!/usr/bin/env bash
# run_vendor_test.sh BUILD_DIR SOURCE_DIR TEST_BINARY
#
# Proves that a vendor can build a Backplane plugin from an INSTALLED SDK,
# with another compiler and standard library than the host's, and that the
# install stands alone wherever it is moved:
#   1. installs BUILD_DIR into a temporary prefix (cmake --install), then MOVES
#      the prefix elsewhere (relocation); no installed file may name the build
#      directory, the source directory or the prefix it was installed to
#      (text files whole; binaries without their debug sections, and their
#      RUNPATH must be $ORIGIN-relative); the installed `backplane`, run from
#      / with BACKPLANE_PLUGIN_PATH unset and (where mount namespaces are
#      allowed) the build and source directories hidden, must load every
#      installed plugin from the moved prefix and nothing from anywhere else;
#   2. configures and builds SOURCE_DIR/samples/vendor_plugin (the toyaccel
#      plugin) out of tree against that prefix with g++, checks that it used
#      the installed package and headers, and runs TEST_BINARY (this build's
#      vendor_plugin_test, the host) with BACKPLANE_TOYACCEL_PLUGIN set to it;
#   3. does the same with clang++ -stdlib=libc++, checks with ldd that that
#      plugin links libc++ and not libstdc++, and runs the same TEST_BINARY
#      (a g++/libstdc++ host) against the libc++ plugin.
# Also loads each plugin with the installed `backplane` tool, as docs/plugins.md
# tells vendors to, runs `backplane conformance --backend toyaccel` on the g++
# plugin, and builds and runs a consumer application (find_package(Backplane),
# Backplane::backplane, no CMAKE_CXX_STANDARD: the package must carry C++20)
# against the moved prefix. Everything after the install uses only the
# moved prefix.
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
# Installed here, then moved to $prefix: everything after the move uses only $prefix.
install_prefix=$tmp/installed-here/backplane
prefix=$tmp/moved-there/backplane-sdk

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

# ------------------------------------------------------------------ install
step "install $build_dir into $install_prefix"
if ! cmake --install "$build_dir" --prefix "$install_prefix" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log"
  die "cmake --install $build_dir failed"
fi
for f in include/backplane/plugin.hpp include/backplane/plugin/tensor.hpp include/backplane/plugin/detail/host_table.hpp \
  include/backplane/plugin_api.h lib/cmake/Backplane/BackplaneConfig.cmake \
  lib/cmake/Backplane/BackplanePlugin.cmake bin/backplane lib/backplane/plugins/backplane_cpu.so; do
  [[ -e $install_prefix/$f ]] || die "the install has no $f"
done
echo "ok: headers, lib/cmake/Backplane, bin/backplane and the plugins installed"

# ---------------------------------------------------------------- relocate
step "relocate: move $install_prefix to $prefix"
mkdir -p "$(dirname "$prefix")"
mv "$install_prefix" "$prefix"
rmdir "$(dirname "$install_prefix")"

# No installed file may name the build machine's build or source directory,
# or the prefix it was installed to. Text files are searched whole. Binaries
# are searched without their debug sections (DWARF names the sources, for a
# debugger; nothing at run time reads it): what remains is what the loader
# and the code see (RUNPATH, strings, __FILE__ in error messages).
step "search the moved prefix for $build_dir, $src_dir and $install_prefix"
command -v objcopy >/dev/null 2>&1 || die "objcopy (binutils) not found"
command -v readelf >/dev/null 2>&1 || die "readelf (binutils) not found"
found=$(grep -rIlF -e "$build_dir" -e "$src_dir" -e "$install_prefix" "$prefix" || true)
[[ -z $found ]] || die "installed text files name the build machine's paths:
$found
$(grep -rInF -e "$build_dir" -e "$src_dir" -e "$install_prefix" "$prefix" | head -20)"
# A sanitizer build is the one exception: AddressSanitizer and
# UndefinedBehaviorSanitizer keep the name of each instrumented source file
# (the locations their reports print) in the code's read-only data, where
# neither -ffile-prefix-map (GCC 12) nor objcopy --strip-debug reaches. Those
# names, and nothing else, are allowed there; ccache's CCACHE_BASEDIR makes
# them relative on a developer's machine, so only a clean CI build shows them.
# (The consumer application below reads the same ldd output.)
libbackplane_ldd=$(ldd "$prefix/lib/libbackplane.so")
sanitizer_build=0
if grep -q 'libasan\.so\|libubsan\.so' <<<"$libbackplane_ldd"; then
  sanitizer_build=1
  echo "(a sanitizer build: its instrumented source file names may stay outside the debug info)"
fi
elves=0
while IFS= read -r -d '' f; do
  [[ $(head -c 4 "$f" | od -An -c | tr -d ' ') == '177ELF' ]] || continue
  elves=$((elves + 1))
  objcopy --strip-debug "$f" "$tmp/stripped" || die "objcopy --strip-debug $f failed"
  if grep -qaF -e "$build_dir" -e "$src_dir" -e "$install_prefix" "$tmp/stripped"; then
    named=$(strings -a "$tmp/stripped" | grep -F -e "$build_dir" -e "$src_dir" -e "$install_prefix" || true)
    if [[ $sanitizer_build == 1 ]]; then
      named=$(awk -v s="$src_dir/" -v b="$build_dir/" \
        '!((index($0, s) == 1 || index($0, b) == 1) && $0 !~ /[[:space:]]/ && $0 ~ /\.(cc|cpp|cu|h|hpp|cuh|inc)$/)' \
        <<<"$named")
    fi
    [[ -z $named ]] || die "$f names the build machine's paths outside its debug info:
$(head -10 <<<"$named")"
  fi
  # Every RUNPATH entry is relative to the file ($ORIGIN), or a system
  # location that is not this build's (the CUDA plugin's toolkit folder).
  runpath=$(readelf -d "$f" | sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]/\2/p')
  if [[ -n $runpath ]]; then
    echo "  $(basename "$f"): RUNPATH $runpath"
    # (an empty entry would search the working directory)
    [[ $runpath != :* && $runpath != *: && $runpath != *::* ]] || die "$f has an empty RUNPATH entry: '$runpath'"
    IFS=: read -r -a entries <<<"$runpath"
    for e in "${entries[@]}"; do
      [[ $e == '$ORIGIN'* || $e == /usr/* || $e == /opt/* ]] || die "$f has RUNPATH entry '$e' (not \$ORIGIN-relative)"
    done
  fi
done < <(find "$prefix" -type f -print0)
[[ $elves -ge 3 ]] || die "found only $elves ELF files in $prefix (expected the tool, libbackplane.so and plugins)"
# (a here-string, not a pipe: grep -q exiting early would fail the pipe under pipefail)
grep -q 'R.*PATH.*\$ORIGIN/\.\./lib' <<<"$(readelf -d "$prefix/bin/backplane")" ||
  die "bin/backplane has no \$ORIGIN-relative RUNPATH to lib/: $(readelf -d "$prefix/bin/backplane" | grep PATH)"
echo "ok: no installed file names $build_dir, $src_dir or $install_prefix ($elves ELF files checked, debug info aside)"

# in_moved_install CMD...: runs CMD from /, with BACKPLANE_PLUGIN_PATH unset
# and, where the system allows mount namespaces (root, or unprivileged user
# namespaces), with the build and source directories hidden under an empty
# tmpfs, so that only the moved prefix is there to be found. Elsewhere the
# directories stay visible and the checks above and below still hold.
hide_dirs=()
if [[ $prefix != "$build_dir"/* && $prefix != "$src_dir"/* ]] && command -v unshare >/dev/null 2>&1; then
  # The build directory first: once the source directory is covered, a build
  # directory inside it is no longer there to mount over.
  hide='mount -t tmpfs backplane-hidden "$1" && mount -t tmpfs backplane-hidden "$2"'
  for u in "unshare -m --propagation private" "unshare -r -m --propagation private"; do
    # shellcheck disable=SC2086 # $u is a command and its options
    if $u sh -c "$hide && test ! -e \"\$1/CMakeCache.txt\"" sh "$build_dir" "$src_dir" 2>/dev/null; then
      read -r -a hide_dirs <<<"$u"
      break
    fi
  done
fi
# Under the sanitizer build, LSAN_OPTIONS names a suppressions file in the
# source tree, which the moved install's programs cannot see: they get a copy.
if [[ ${LSAN_OPTIONS:-} =~ suppressions=([^:]+) ]]; then
  supp=${BASH_REMATCH[1]}
  if [[ -f $supp ]]; then
    cp "$supp" "$tmp/lsan.supp"
    export LSAN_OPTIONS=${LSAN_OPTIONS/suppressions=$supp/suppressions=$tmp/lsan.supp}
  fi
fi
in_moved_install() {
  if [[ ${#hide_dirs[@]} -gt 0 ]]; then
    "${hide_dirs[@]}" sh -c "$hide"' && shift 2 && cd / && exec env -u BACKPLANE_PLUGIN_PATH "$@"' sh \
      "$build_dir" "$src_dir" "$@"
  else
    (cd / && exec env -u BACKPLANE_PLUGIN_PATH "$@")
  fi
}
if [[ ${#hide_dirs[@]} -gt 0 ]]; then
  echo "the installed programs run with $build_dir and $src_dir hidden (${hide_dirs[*]}, tmpfs over each)"
else
  echo "note: no mount namespace here; the installed programs run with $build_dir and $src_dir visible"
fi

# The installed tool: it can find plugins only through its own prefix (Note
# [Default plugin directory]).
step "installed backplane plugins (BACKPLANE_PLUGIN_PATH unset, run from /, build and source trees hidden)"
out=$(in_moved_install ldd "$prefix/bin/backplane") || die "ldd $prefix/bin/backplane failed"
grep -q "libbackplane\.so.* => $prefix/bin/\.\./lib/libbackplane\.so" <<<"$out" ||
  grep -q "libbackplane\.so.* => $prefix/lib/libbackplane\.so" <<<"$out" ||
  die "the installed tool does not use the moved prefix's libbackplane.so:
$out"
out=$(in_moved_install "$prefix/bin/backplane" plugins) ||
  die "the installed backplane plugins failed:
$out"
echo "$out"
shopt -s nullglob
installed_plugins=("$prefix"/lib/backplane/plugins/*.so)
shopt -u nullglob
[[ ${#installed_plugins[@]} -ge 2 ]] || die "expected the cpu and spconv plugins in $prefix/lib/backplane/plugins"
for so in "${installed_plugins[@]}"; do
  grep -qF "$so" <<<"$out" || die "backplane plugins does not list the installed $so"
done
for name in cpu spconv; do
  grep -Eq "^$name .* loaded +$prefix/lib/backplane/plugins/backplane_$name\.so\$" <<<"$out" ||
    die "backplane plugins does not show the $name plugin loaded from $prefix/lib/backplane/plugins"
done
# Every library it tried (the PATH column) is inside the moved prefix.
stray=$(awk 'NF >= 2 && ($(NF-1) == "loaded" || $(NF-1) == "FAILED") { print $NF }' <<<"$out" | grep -vF "$prefix/lib/backplane/plugins/" || true)
[[ -z $stray ]] || die "the installed tool tried plugins outside the moved prefix: $stray"
out=$(in_moved_install "$prefix/bin/backplane" --help) || die "backplane --help failed"
grep -qx "  $prefix/lib/backplane/plugins" <<<"$out" ||
  die "backplane --help does not name $prefix/lib/backplane/plugins as the default plugin directory:
$(grep -A3 'Default plugin sources' <<<"$out")"
echo "ok: the moved install loads its ${#installed_plugins[@]} plugins from $prefix/lib/backplane/plugins and nothing else"

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
  grep -Eq '^toyaccel +1\.0\.0 .*toyaccel: 2 +8 +7 +loaded' <<<"$out" ||
    die "backplane plugins does not list toyaccel 1.0.0 as loaded with 2 devices and 8 kernels, 7 of them typed (bias_relu_backward's signature, which no standard op has, is called boxed)"
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

# ------------------------------------------- conformance, from the moved install
step "installed backplane conformance --plugin $gcc_so --backend toyaccel (as above)"
set +e
in_moved_install "$prefix/bin/backplane" conformance --plugin "$gcc_so" --backend toyaccel >"$tmp/conformance.log" 2>&1
conformance_rc=$?
set -e
cat "$tmp/conformance.log"
# The sample must pass (exit 0): its kernels declare float32 and every other
# dtype goes to the CPU fallback, which the moved install finds in its own
# prefix. The summary has a row for the toyaccel backend served by the
# toyaccel plugin, and the verdict line.
[[ $conformance_rc == 0 ]] ||
  die "backplane conformance --backend toyaccel from the moved install exited $conformance_rc (a pass is 0)"
grep -Eq '^toyaccel +toyaccel +[1-9][0-9]* +[0-9]+ +[0-9]+ ' "$tmp/conformance.log" ||
  die "the conformance summary has no row for backend toyaccel (plugin toyaccel, with devices) with counts"
grep -Eq '^conformance: PASSED' "$tmp/conformance.log" || die "the conformance run did not print PASSED"
echo "ok: conformance ran toyaccel from the moved install (exit $conformance_rc)"

# --------------------------------------------- an application, from the moved install
# A consumer's default flags: no CMAKE_CXX_STANDARD, so Backplane::backplane
# must bring C++20 (its headers use std::bit_cast) itself.
step "build and run a consumer application against $prefix (no CMAKE_CXX_STANDARD)"
app_src=$tmp/app-src
mkdir -p "$app_src"
cat >"$app_src/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.22)
project(backplane_consumer CXX)
find_package(Backplane REQUIRED)
if(NOT Backplane_PLUGIN_INSTALL_DIR STREQUAL EXPECTED_PLUGIN_DIR)
  message(FATAL_ERROR "Backplane_PLUGIN_INSTALL_DIR is '${Backplane_PLUGIN_INSTALL_DIR}', not the moved prefix's '${EXPECTED_PLUGIN_DIR}'")
endif()
add_executable(app app.cc)
target_link_libraries(app PRIVATE Backplane::backplane)
CMAKE
cat >"$app_src/app.cc" <<'CXX'
#include <cstdio>
#include <vector>

#include "backplane/backplane.h"  // scalar_type.h: std::bit_cast

int main() {
  using namespace backplane;
  Runtime rt;  // loads the default plugins: the moved prefix's
  Device cpu = rt.device("cpu");
  Tensor a = tensorFromVector<float>({1, 2, 3}, {3}, cpu);
  Tensor b = tensorFromVector<float>({10, 20, 30}, {3}, cpu);
  std::vector<float> sum = (a + b).toVector<float>();
  for (const PluginStatus& p : plugins().plugins())
    std::printf("plugin %s %s %s\n", p.name.c_str(), p.loaded ? "loaded" : "failed", p.path.c_str());
  std::printf("sum: %g %g %g\n", sum[0], sum[1], sum[2]);
  return sum == std::vector<float>{11, 22, 33} ? 0 : 1;
}
CXX
if echo '#include <bit>
int main() { return std::bit_cast<int>(0.0f); }' | "$gxx" -x c++ - -o "$tmp/probe_default_std" >/dev/null 2>&1; then
  echo "note: $gxx defaults to C++20 or later; this build does not show that the package adds it"
else
  echo "($gxx's default standard has no std::bit_cast: the package must add C++20)"
fi
# A sanitizer build's libbackplane.so needs its runtime first in the
# application: the application is built with the same sanitizers.
sanitize=()
if grep -q 'libasan\.so' <<<"$libbackplane_ldd"; then
  sanitize=(-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined)
  echo "(the install is an AddressSanitizer build: the application is built with -fsanitize=address,undefined)"
fi
in_moved_install cmake -S "$app_src" -B "$tmp/app" "${generator[@]}" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_CXX_COMPILER="$gxx" \
  "${sanitize[@]}" -DEXPECTED_PLUGIN_DIR="$prefix/lib/backplane/plugins" ||
  die "configuring the consumer application against the moved install failed"
in_moved_install cmake --build "$tmp/app" --verbose || die "building the consumer application (Backplane::backplane) failed"
grep -Eq -- '-std=(gnu|c)\+\+(20|2a|23|2b)' "$tmp/app/compile_commands.json" ||
  die "Backplane::backplane did not bring C++20 to the consumer: $(grep -o -- '-std=[^ ]*' "$tmp/app/compile_commands.json")"
grep -q -- "$prefix/include" "$tmp/app/compile_commands.json" || die "app.cc was not compiled against $prefix/include"
out=$(in_moved_install "$tmp/app/app") || die "the consumer application failed:
$out"
echo "$out"
grep -q '^sum: 11 22 33$' <<<"$out" || die "the consumer application printed the wrong sum"
grep -q "^plugin cpu loaded $prefix/lib/backplane/plugins/backplane_cpu\.so\$" <<<"$out" ||
  die "the consumer application did not load the cpu plugin from $prefix/lib/backplane/plugins"
stray=$(grep '^plugin ' <<<"$out" | grep -vF " $prefix/lib/backplane/plugins/" || true)
[[ -z $stray ]] || die "the consumer application loaded plugins from outside the moved prefix: $stray"
echo "ok: the consumer application built with the package's C++20 and added on the cpu plugin of the moved prefix"

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

step "PASS: the install, moved to another prefix, stands alone; toyaccel built out of tree from it with g++ and with clang++ -stdlib=libc++; both pass vendor_plugin_test in a g++ host"
