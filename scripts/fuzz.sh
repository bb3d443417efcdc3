#!/usr/bin/env bash
# Sets up (scripts/setup.sh), builds the fuzz targets and runs each on its
# corpus (Note [Fuzzing] in docs/design.md).
#   scripts/fuzz.sh [--seconds N] [--jobs J] [--update-corpus] [TARGET...]
# --seconds N       each target's run (default 30; CI runs 20)
# --jobs J          targets run at once (default: the number of cores)
# --update-corpus   minimise what the run found into the checked-in seed corpus
#                   (libFuzzer's -merge=1): commit the new files it adds
# TARGET...         default: every target in build-fuzz/fuzzers.txt
# Each target starts from its checked-in seed corpus and a working corpus
# kept in build-fuzz/fuzz-corpus/<target>/ (so repeated runs go on where they
# stopped). Any crash, leak, timeout (25 s an input), out-of-memory or
# sanitizer report fails the script; the input is saved under
# build-fuzz/fuzz-artifacts/ and the command to reproduce it is printed.
# Fix the bug, then add the input to the seed corpus as crash-<what>: the
# replay ctest (fuzz_replay.<target>) runs it in every test run after that.
# The summary has one row per target: executions, executions per second,
# coverage (edges) and features, and the corpus (inputs/bytes) at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=30
jobs=$(nproc)
update=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) [ $# -ge 2 ] || { echo "fuzz.sh: --seconds needs a number" >&2; exit 2; }; shift; seconds="$1" ;;
    --seconds=*) seconds="${1#--seconds=}" ;;
    --jobs) [ $# -ge 2 ] || { echo "fuzz.sh: --jobs needs a number" >&2; exit 2; }; shift; jobs="$1" ;;
    --jobs=*) jobs="${1#--jobs=}" ;;
    --update-corpus) update=1 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) targets+=("$1") ;;
  esac
  shift
done
case "$seconds" in ''|*[!0-9]*) echo "fuzz.sh: --seconds takes a whole number of seconds (got '$seconds')" >&2; exit 2 ;; esac
case "$jobs" in ''|*[!0-9]*|0) echo "fuzz.sh: --jobs takes a positive number (got '$jobs')" >&2; exit 2 ;; esac

scripts/setup.sh
scripts/build.sh --sanitize=fuzzer --target backplane_fuzzers
dir=$(scripts/build.sh --print-dir --sanitize=fuzzer)
registry="$dir/fuzzers.txt"

declare -A binary corpus dict
all=()
while IFS=$'\t' read -r name bin seed d; do
  case "$name" in ''|'#'*) continue ;; esac
  binary[$name]="$bin"; corpus[$name]="$seed"; dict[$name]="$d"; all+=("$name")
done <"$registry"
if [ ${#targets[@]} -eq 0 ]; then targets=("${all[@]}"); fi
for t in "${targets[@]}"; do
  if [ -z "${binary[$t]:-}" ]; then
    echo "fuzz.sh: no fuzz target '$t'; the targets are: ${all[*]}" >&2
    exit 2
  fi
done

# halt_on_error and abort_on_error turn every sanitizer report into a crash
# libFuzzer saves; leaks are checked at the end of each input (libFuzzer's
# -detect_leaks, with LSan).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-use_tls=0:suppressions=$PWD/scripts/lsan.supp}"
export BACKPLANE_FALLBACK="${BACKPLANE_FALLBACK:-silent}"

logs="$dir/fuzz-logs"
artifacts="$dir/fuzz-artifacts"
mkdir -p "$logs" "$artifacts"

run_one() {
  local t="$1" work="$dir/fuzz-corpus/$1"
  mkdir -p "$work"
  local args=(-max_total_time="$seconds" -timeout=25 -rss_limit_mb=3072 -print_final_stats=1
              -artifact_prefix="$artifacts/$t-")
  [ "${dict[$t]}" != - ] && args+=(-dict="${dict[$t]}")
  "${binary[$t]}" "${args[@]}" "$work" "${corpus[$t]}" >"$logs/$t.log" 2>&1
}

count_files() { find "$1" -maxdepth 1 -type f | wc -l; }

echo "fuzz: ${#targets[@]} targets, ${seconds} s each, ${jobs} at a time; logs in $logs"
declare -A status
pids=()
names=()
for t in "${targets[@]}"; do
  run_one "$t" &
  pids+=($!); names+=("$t")
  if [ ${#pids[@]} -ge "$jobs" ]; then
    if wait "${pids[0]}"; then status[${names[0]}]=0; else status[${names[0]}]=$?; fi
    pids=("${pids[@]:1}"); names=("${names[@]:1}")
  fi
done
for i in "${!pids[@]}"; do
  if wait "${pids[$i]}"; then status[${names[$i]}]=0; else status[${names[$i]}]=$?; fi
done

failed=0
printf '\n%-28s %8s %10s %8s %7s %8s %12s  %s\n' target seconds execs exec/s cov ft corpus result
for t in "${targets[@]}"; do
  log="$logs/$t.log"
  # libFuzzer's last status line: "#N DONE cov: C ft: F corp: K/S exec/s: E ..."
  line=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$line")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$line")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<<"$line")
  result=ok
  if [ "${status[$t]}" != 0 ]; then
    result="FAILED (exit ${status[$t]})"
    failed=1
  fi
  printf '%-28s %8s %10s %8s %7s %8s %12s  %s\n' "$t" "$seconds" "${execs:--}" "${rate:--}" "${cov:--}" "${ft:--}" \
    "${corp:--}" "$result"
done
for t in "${targets[@]}"; do
  [ "${status[$t]}" = 0 ] && continue
  echo
  echo "== $t failed; the end of its log ($logs/$t.log):"
  tail -n 40 "$logs/$t.log"
  crash=$(ls -t "$artifacts/$t-"* 2>/dev/null | head -n 1 || true)
  if [ -n "$crash" ]; then
    echo "reproduce: ${binary[$t]} $crash"
    echo "then fix the bug and add the input to ${corpus[$t]}/ as crash-<what>"
  fi
done

if [ "$update" = 1 ]; then
  for t in "${targets[@]}"; do
    before=$(count_files "${corpus[$t]}")
    "${binary[$t]}" -merge=1 "${corpus[$t]}" "$dir/fuzz-corpus/$t" >"$logs/$t.merge.log" 2>&1
    echo "fuzz: $t's seed corpus ${corpus[$t]}: $before -> $(count_files "${corpus[$t]}") inputs"
  done
fi
exit "$failed"
