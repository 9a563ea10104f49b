#!/usr/bin/env bash
# Installs what building and testing gpumemshim needs, from Debian's packages, if it is missing.
# The CUDA toolkit (nvcc, cuda.h, CUPTI) is expected to be installed already: it is not a Debian
# package here. Safe to run again: it installs only what is absent.
set -euo pipefail

need=()
have_pkg() { dpkg -s "$1" >/dev/null 2>&1; }
for pkg in cmake ninja-build g++ pkg-config libgtest-dev libunwind-dev python3 valgrind; do
  have_pkg "$pkg" || need+=("$pkg")
done

if ((${#need[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "gpumemshim: missing packages: ${need[*]}; run: sudo apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  echo "gpumemshim: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  echo "gpumemshim: nvcc is at /usr/local/cuda/bin but not on PATH; the build scripts add it" >&2
fi
if [[ ! -f /usr/local/cuda/include/cuda.h ]] && ! command -v nvcc >/dev/null 2>&1; then
  echo "gpumemshim: the CUDA toolkit (cuda.h, nvcc) is required: install CUDA 12.8 or newer" >&2
  exit 1
fi
