#!/usr/bin/env bash
# The test command of the README: installs what is missing, builds gpumemshim, and runs every test
# layer three times: as built for users, under AddressSanitizer and UBSan, and under
# ThreadSanitizer. GPU tests run when a GPU is present and report "skipped" otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"

tools/install-deps.sh --tests
jobs=$(nproc)

configure_and_build() {
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; exit 1; }
  cmake --build "$dir" -j "$jobs"
}

mkdir -p build build-sanitize build-tsan
configure_and_build build
configure_and_build build-sanitize -DGMS_SANITIZE=address,undefined
configure_and_build build-tsan -DGMS_SANITIZE=thread

echo "== tests under ThreadSanitizer"
ctest --test-dir build-tsan --output-on-failure -j "$jobs"
echo "== tests under AddressSanitizer and UBSan"
ctest --test-dir build-sanitize --output-on-failure -j "$jobs"
echo "== tests"
ctest --test-dir build --output-on-failure -j "$jobs"
