#!/usr/bin/env bash
# The ctest entry `gpu`: runs the GPU pytest suite, or reports "skipped" (exit 77) where it cannot.
# CTest passes GMS_SHIM and GMS_BUILD_DIR (see CMakeLists.txt); extra arguments go to pytest.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

if ! command -v python3 >/dev/null 2>&1; then
  echo "SKIPPED: python3 not found (the GPU tests are a pytest suite)"
  exit 77
fi
if ! reason=$(python3 "$here/gpu_env.py"); then
  echo "SKIPPED: no GPU on this machine (GPU tests run on the H100 test machine: see README)"
  echo "  why: $reason"
  exit 77
fi
if ! python3 -c 'import pytest' >/dev/null 2>&1; then
  echo "SKIPPED: pytest is not installed for $(command -v python3) (pip install pytest)"
  exit 77
fi
cd "$root" || exit 1
exec python3 -m pytest -q -p no:cacheprovider -rs tests/gpu "$@"
