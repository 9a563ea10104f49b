#!/usr/bin/env bash
# Installs what building (and, with --tests, testing) gpumemshim needs from Debian's packages, when
# it is missing and we are root. Checks what is usable (commands on PATH, headers), not package
# names, so toolchains installed any other way count. Optional pieces (libunwind for call sites,
# valgrind for instruction counts) are installed when possible and skipped with a note when not.
# With --tests also clang and its libFuzzer runtime, for the fuzz targets tools/test.sh runs.
# The CUDA toolkit (cuda.h, nvcc) must already be installed: it is not a Debian package here.
set -uo pipefail

want_tests=0
[[ ${1:-} == --tests ]] && want_tests=1

required=() optional=()
command -v cmake >/dev/null || required+=(cmake)
command -v ninja >/dev/null || required+=(ninja-build)
command -v g++ >/dev/null || required+=(g++)
command -v pkg-config >/dev/null || optional+=(pkg-config)
pkg-config --exists libunwind 2>/dev/null || optional+=(libunwind-dev)
if ((want_tests)); then
  command -v python3 >/dev/null || required+=(python3)
  [[ -f /usr/include/gtest/gtest.h ]] || required+=(libgtest-dev)
  command -v valgrind >/dev/null || optional+=(valgrind)
  command -v chromium >/dev/null || optional+=(chromium)  # the HTML report's browser test
  # The fuzz targets (tools/fuzz): clang and its libFuzzer runtime.
  command -v clang++ >/dev/null || required+=(clang)
  fuzzer_lib=$(clang++ -print-runtime-dir 2>/dev/null)/libclang_rt.fuzzer-$(uname -m).a
  [[ -f $fuzzer_lib ]] || required+=(libclang-rt-dev)
fi

install() {
  [[ $(id -u) -eq 0 ]] || return 1
  export DEBIAN_FRONTEND=noninteractive
  if [[ -z ${apt_updated:-} ]]; then
    apt-get update -qq >/dev/null 2>&1 || return 1
    apt_updated=1
  fi
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1
}

if ((${#required[@]})); then
  echo "gpumemshim: installing ${required[*]}" >&2
  if ! install "${required[@]}"; then
    echo "gpumemshim: missing ${required[*]} and could not install them; run as root: apt-get install -y ${required[*]}" >&2
    exit 1
  fi
fi
if ((${#optional[@]})); then
  install "${optional[@]}" ||
    echo "gpumemshim: optional ${optional[*]} not installed (call sites / instruction counts are off without them)" >&2
fi

if [[ ! -f /usr/local/cuda/include/cuda.h ]] && ! command -v nvcc >/dev/null 2>&1; then
  echo "gpumemshim: the CUDA toolkit (cuda.h, nvcc) is required: install CUDA 12.8 or newer" >&2
  exit 1
fi
exit 0
