#!/usr/bin/env bash
# run_conformance_test.sh BUILD_DIR SOURCE_DIR
#
# Proves that the two sample plugins a vendor starts from pass
# `backplane conformance` when built from an INSTALLED SDK alone:
#   1. installs BUILD_DIR into a temporary prefix (cmake --install);
#   2. builds samples/minimal_plugin and samples/vendor_plugin (toyaccel) out
#      of tree against that prefix only (CMAKE_PREFIX_PATH, no package
#      registry), and toyaccel once more with -DTOYACCEL_MUTANT (a mul.out
#      that adds);
#   3. runs the installed tool, PREFIX/bin/backplane:
#      - conformance --plugin minimal_plugin.so --backend minimal: must pass;
#      - conformance --plugin toyaccel.so --backend toyaccel: must pass;
#      - the same with --native --strict: must pass (what toyaccel serves
#        natively, for what it declares, selected with no regex: the same
#        ops a hand-written --ops regex of its kernels selects);
#      - conformance of the mutant: must FAIL, naming mul.out.
#      (A sanitizer build runs the last two only; see below.)
#   4. builds samples/vendor_plugin_test/older_abi_plugin, a plugin written
#      for plugin ABI 1.2, out of tree against the same install, three ways
#      (Note [The ABI a plugin's source targets] in plugin_api.h):
#      - stating its target (ABI 1.2): must pass conformance of its ops;
#      - unchanged but for the statement: must FAIL, its kernels handed the
#        int16 samples ABI 1.5 added (the control);
#      - refusing dtypes with the SDK's typed error: must pass (declines).
#
# Exit status: 0 pass, 1 fail, 2 usage. KEEP_TMP=1 keeps the temporary
# directory; GXX picks the compiler (default c++).
set -euo pipefail

die() {
  printf '\nrun_conformance_test.sh: FAIL: %s\n' "$*" >&2
  exit 1
}
step() { printf '\n==== %s\n' "$*"; }

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR SOURCE_DIR   (e.g. $0 build .)" >&2
  exit 2
fi
[[ -f $1/cmake_install.cmake ]] || die "$1 is not a configured Backplane build directory (no cmake_install.cmake)"
[[ -f $2/samples/minimal_plugin/CMakeLists.txt && -f $2/samples/vendor_plugin/CMakeLists.txt ]] ||
  die "$2 is not the Backplane source directory (no samples/minimal_plugin or samples/vendor_plugin)"
build_dir=$(cd "$1" && pwd)
src_dir=$(cd "$2" && pwd)
cxx=${GXX:-c++}

# toyaccel's native kernels, as `--ops` names them: only the .out forms are
# native; add/mul/relu/mm/sum's functional and in-place forms are composites
# over them (Note [The standard operator table]).
# Its own operator, toyaccel::bias_relu, is native too and certified by its
# own samples (m.spec), with the out= and in-place forms the host derives
# from it; its backward op has a cpu kernel only.
toy_native_ops='^(bp::(add|mul|relu|mm|sum)(\.|_|$)|toyaccel::bias_relu(\.|_|$))'

tmp=$(mktemp -d "${TMPDIR:-/tmp}/backplane_conformance_test.XXXXXX")
cleanup() {
  if [[ ${KEEP_TMP:-0} == 1 ]]; then echo "run_conformance_test.sh: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
prefix=$tmp/prefix
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

step "install $build_dir into $prefix"
if ! cmake --install "$build_dir" --prefix "$prefix" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log"
  die "cmake --install $build_dir failed"
fi
tool=$prefix/bin/backplane
[[ -x $tool ]] || die "the install has no bin/backplane"

# build SAMPLE OUT [CMAKE ARGS...]: samples/SAMPLE built out of tree against
# the install only.
build() {
  local sample=$1 out=$2
  shift 2
  step "build samples/$sample into $out${*:+ ($*)}"
  cmake -S "$src_dir/samples/$sample" -B "$out" "${generator[@]}" \
    -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER="$cxx" "$@" >"$out.configure.log" 2>&1 ||
    { cat "$out.configure.log"; die "configuring samples/$sample against the installed package failed"; }
  grep -q "^Backplane_DIR:PATH=$prefix/lib/cmake/Backplane\$" "$out/CMakeCache.txt" ||
    die "find_package(Backplane) did not use the install: $(grep '^Backplane_DIR' "$out/CMakeCache.txt")"
  cmake --build "$out" >"$out.build.log" 2>&1 || { cat "$out.build.log"; die "building samples/$sample failed"; }
}

# conformance EXPECT LOG ARGS...: runs the installed tool's conformance with
# ARGS; EXPECT is pass (exit 0) or fail (exit 1). The output goes to LOG.
conformance() {
  local expect=$1 log=$2 rc=0
  shift 2
  step "backplane conformance $* (must $expect)"
  BACKPLANE_FALLBACK=silent "$tool" conformance "$@" >"$log" 2>&1 || rc=$?
  tail -n 25 "$log"
  if [[ $expect == pass && $rc -ne 0 ]]; then die "conformance $* exited $rc; it must pass (see above)"; fi
  if [[ $expect == fail && $rc -ne 1 ]]; then die "conformance $* exited $rc; it must fail with 1"; fi
  return 0
}

build minimal_plugin "$tmp/minimal"
build vendor_plugin "$tmp/toy"
build vendor_plugin "$tmp/toy_mutant" -DCMAKE_CXX_FLAGS=-DTOYACCEL_MUTANT
minimal_so=$tmp/minimal/minimal_plugin.so
toy_so=$tmp/toy/toyaccel.so
mutant_so=$tmp/toy_mutant/toyaccel.so
for so in "$minimal_so" "$toy_so" "$mutant_so"; do [[ -f $so ]] || die "the build produced no $so"; done

# In a sanitizer build the two whole runs are left to the normal build: all
# but a handful of their forms go through the CPU fallback, which
# conformance_tests (PassesThroughTheCpuFallback) already runs for every op
# under the sanitizers, and they were 180 s of the sanitizer run's ctest.
# The runs below, the plugins' own kernels, stay.
if grep -q 'libasan\.so\|libtsan\.so' <<<"$(ldd "$tool")"; then
  step "a sanitizer build: the whole runs of minimal and toyaccel are the normal build's (see above)"
else
  conformance pass "$tmp/minimal.log" --plugin "$minimal_so" --backend minimal
  grep -q 'conformance: PASSED' "$tmp/minimal.log" || die "the minimal plugin's run did not say PASSED"

  conformance pass "$tmp/toy.log" --plugin "$toy_so" --backend toyaccel
  grep -q 'conformance: PASSED' "$tmp/toy.log" || die "toyaccel's run did not say PASSED"
fi

conformance pass "$tmp/toy_strict.log" --plugin "$toy_so" --backend toyaccel --native --strict \
  --json "$tmp/toy_strict.json"
grep -q 'conformance: PASSED' "$tmp/toy_strict.log" || die "toyaccel's --native --strict run did not say PASSED"
# --native chose exactly the specs the regex of toyaccel's kernels names,
# plus the device checks.
native_ops=$(python3 -c 'import json, sys
print("\n".join(sorted({r["op"] for r in json.load(open(sys.argv[1]))["results"]})))' "$tmp/toy_strict.json")
grep -q '^device\.copy$' <<<"$native_ops" || die "toyaccel's --native run skipped the device checks"
unexpected=$(grep -v '^device\.' <<<"$native_ops" | grep -Ev "$toy_native_ops" || true)
[[ -z $unexpected ]] || die "--native ran specs with no native toyaccel kernel: $unexpected"
for op in 'bp::add\.Tensor' 'bp::mul\.Tensor' 'bp::relu' 'bp::mm' 'bp::sum\..*' 'toyaccel::bias_relu'; do
  grep -qx "$op" <<<"$native_ops" || die "--native did not run $op, which toyaccel serves natively: $native_ops"
done
# The plugin's own operator: certified (not uncertified), its gradient form
# too (m.derivative), against the plugin's reference function, which the
# result says.
python3 - "$tmp/toy_strict.json" <<'PY' || die "toyaccel::bias_relu was not certified by its own samples"
import json, sys
rs = [r for r in json.load(open(sys.argv[1]))["results"] if r["op"].startswith("toyaccel::bias_relu")]
forms = {r["form"]: r for r in rs}
assert set(forms) == {"functional", "inplace", "out", "gradient"}, forms
for r in rs:
    assert r["outcome"] == "pass", r
    assert "reference: plugin toyaccel's reference function" in r.get("note", ""), r
assert forms["functional"]["samples"] >= 8, forms["functional"]
PY

# The mutant: conformance must catch the wrong mul.out, and say which op.
conformance fail "$tmp/mutant.log" --plugin "$mutant_so" --backend toyaccel --ops '^bp::(mul|add)(\.|_|$)'
# (The failures section lists "  BACKEND:DEVICE  OP (FORM, KERNEL): why".)
failures=$(sed -n '/^failures:$/,/^$/p' "$tmp/mutant.log")
grep -Eq '^  toyaccel:0  bp::mul\.out \(out, native \(float32\)' <<<"$failures" ||
  die "the mutant's report does not list bp::mul.out (out form) among the failures"
# add's own forms pass; its gradient form may fail, rightly: add's backward
# multiplies by alpha with the device's (wrong) mul, and its message names
# the formula.
if grep -Eq '^  toyaccel:0  bp::add[^ ]* \((functional|inplace|out),' <<<"$failures"; then
  die "the mutant's report blames add's forward too"
fi
grep -Eq '^  toyaccel:0  bp::mul\.Tensor \(gradient,' <<<"$failures" ||
  die "the mutant's report does not list mul's gradient form among the failures"

# The plugin's own operator on every backend that serves it (the cpu too,
# where the samples that keep a tensor on the host mix no devices and do
# not apply).
conformance pass "$tmp/toy_own_all.log" --plugin "$toy_so" --ops '^toyaccel::'
grep -q 'conformance: PASSED' "$tmp/toy_own_all.log" || die "toyaccel's own operator did not pass on every backend"

# The mutant's bias_relu subtracts the bias: its own samples must catch it.
conformance fail "$tmp/mutant_own.log" --plugin "$mutant_so" --backend toyaccel --ops '^toyaccel::'
failures=$(sed -n '/^failures:$/,/^$/p' "$tmp/mutant_own.log")
grep -Eq '^  toyaccel:0  toyaccel::bias_relu \(functional, native \(float32\)' <<<"$failures" ||
  die "the mutant's report does not list toyaccel::bias_relu among the failures"

# A plugin's source written for an older ABI minor, rebuilt against this SDK.
older=$tmp/older_abi
build vendor_plugin_test/older_abi_plugin "$older"
older_ops='^bp::(neg|abs|relu)(\.|_|$)'
conformance pass "$tmp/older_target.log" --plugin "$older/target_1_2/older_abi.so" --backend olderabi --ops "$older_ops"
grep -q 'conformance: PASSED' "$tmp/older_target.log" || die "the ABI 1.2 plugin's run did not say PASSED"
conformance fail "$tmp/older_newest.log" --plugin "$older/newest/older_abi.so" --backend olderabi --ops "$older_ops"
grep -Eq "^  olderabi:0  bp::neg\.out \(out, native\): error at sample '[^']* int16': .*unknown dtype" \
  "$tmp/older_newest.log" || die "the untargeted build's report does not blame neg.out's int16 sample"
conformance pass "$tmp/older_typed.log" --plugin "$older/typed/older_abi.so" --backend olderabi --ops "$older_ops"
grep -q 'conformance: PASSED' "$tmp/older_typed.log" || die "the typed-error build's run did not say PASSED"

step "PASS: minimal_plugin and toyaccel, built from the installed SDK, pass conformance; the mul.out and bias_relu mutants are caught; a plugin written for ABI 1.2 passes rebuilt against this SDK"
