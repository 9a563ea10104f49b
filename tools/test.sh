#!/usr/bin/env bash
# The test command of the README: installs what is missing, builds gpumemshim, and runs every test
# layer three times: as built for users, under AddressSanitizer and UBSan, and under
# ThreadSanitizer, with warnings as errors. GPU tests run when a GPU is present and report
# "skipped" otherwise. Every build's tests run even when another build or its tests fail; the run
# ends with one line, "N passed, N failed, N skipped", and a non-zero status if anything failed.
# Then the fuzz targets run for a bounded time (GMS_FUZZ_SECONDS each, default 30; 0 skips them),
# and the Release and Debug builds users make are built with warnings allowed (GMS_USER_BUILDS=0
# skips them; RelWithDebInfo is the first build above, which is stricter).
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"

tools/install-deps.sh --tests || exit 1
jobs=$(nproc)
failed_steps=()  # each a line for the summary; broken builds and fuzz findings also count as failures
broken=()        # the failed steps that no test report counts (builds, fuzzing)
junit=()

configure_and_build() {
  local dir=$1
  shift
  mkdir -p "$dir"
  if ! cmake -S . -B "$dir" -G Ninja "$@" >"$dir/configure.log" 2>&1; then
    cat "$dir/configure.log"
    return 1
  fi
  cmake --build "$dir" -j "$jobs"
}

# Builds one test build and runs its tests; a failure is counted and the next build goes on.
test_build() {
  local dir=$1 title=$2
  shift 2
  echo "== $title"
  rm -f "$dir/junit.xml"
  if ! configure_and_build "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGMS_WERROR=ON "$@"; then
    failed_steps+=("$title: the build failed")
    broken+=("$title")
    return
  fi
  if ! ctest --test-dir "$dir" --output-on-failure -j "$jobs" --output-junit "$PWD/$dir/junit.xml"; then
    failed_steps+=("$title: tests failed")
  fi
  [[ -f $dir/junit.xml ]] && junit+=("$dir/junit.xml")
}

test_build build-tsan "tests under ThreadSanitizer" -DGMS_SANITIZE=thread
test_build build-sanitize "tests under AddressSanitizer and UBSan" -DGMS_SANITIZE=address,undefined
test_build build "tests"

echo "== fuzz targets"
if ! tools/fuzz/run_fuzz.sh build-fuzz "${GMS_FUZZ_SECONDS:-30}"; then
  failed_steps+=("fuzz targets: a finding or a failed build (see above)")
  broken+=(fuzz)
fi

if [[ ${GMS_USER_BUILDS:-1} != 0 ]]; then
  for type in Release Debug; do
    echo "== $type build as users make it (warnings allowed, no tests)"
    dir=build-$(tr '[:upper:]' '[:lower:]' <<<"$type")
    if ! configure_and_build "$dir" -DCMAKE_BUILD_TYPE=$type -DGMS_BUILD_TESTS=OFF -DGMS_WERROR=OFF -DGMS_SANITIZE=; then
      failed_steps+=("$type build failed")
      broken+=("$type")
    fi
  done
fi

echo "== summary"
for step in "${failed_steps[@]}"; do echo "failed: $step"; done
python3 tools/test_summary.py --broken "${#broken[@]}" "${junit[@]}"
