#!/usr/bin/env bash
# Builds the fuzz targets with clang (libFuzzer, AddressSanitizer and UBSan) in BUILD_DIR and runs
# each for SECONDS over its checked-in corpus (tools/fuzz/corpus/TARGET). Inputs that reach new code
# are kept in BUILD_DIR/corpus/TARGET, not in the tree (add one to the corpus by hand when it is worth
# keeping). A finding (a crash, a sanitizer report, a broken promise of the target) leaves its input
# in BUILD_DIR/findings and makes the exit status 1; replay it with BUILD_DIR/tools/fuzz/TARGET FILE.
#   tools/fuzz/run_fuzz.sh [BUILD_DIR [SECONDS]]      (defaults: build-fuzz 30; 0 seconds: skip)
set -uo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build-fuzz}
seconds=${2:-30}
if [[ $seconds == 0 ]]; then
  echo "fuzz targets: skipped (0 seconds)"
  exit 0
fi
mkdir -p "$dir"
if ! cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DGMS_FUZZ=ON -DGMS_BUILD_TESTS=OFF -DGMS_WERROR=OFF \
    -DGMS_SANITIZE=address,undefined >"$dir/configure.log" 2>&1; then
  cat "$dir/configure.log"
  exit 1
fi
cmake --build "$dir" -j "$(nproc)" --target fuzz_trace_reader fuzz_options || exit 1

status=0
for target in fuzz_trace_reader fuzz_options; do
  mkdir -p "$dir/corpus/$target" "$dir/findings"
  echo "-- $target: ${seconds}s"
  # -max_len: room for several trace lines; -rss_limit_mb: the reader's memory is bounded.
  if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      "$dir/tools/fuzz/$target" -max_total_time="$seconds" -max_len=16384 -rss_limit_mb=2048 \
      -timeout=20 -print_final_stats=1 -artifact_prefix="$dir/findings/$target-" \
      "$dir/corpus/$target" "tools/fuzz/corpus/$target" >"$dir/$target.log" 2>&1; then
    tail -40 "$dir/$target.log"
    echo "$target: a finding, kept in $dir/findings/" >&2
    status=1
  else
    grep -E '^stat::number_of_executed_runs|^Done' "$dir/$target.log" | tr '\n' ' '
    echo
  fi
done
exit $status
