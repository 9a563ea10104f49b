#!/usr/bin/env bash
# Runs every benchmark this machine can run, shim against no shim, and prints a Markdown table
# (benchmark | no shim | shim | ratio | ...). CPU-only ones run without a GPU too.
#   GMS_SHIM       the shim (default build/shim/libgpumemshim.so)
#   GMS_BUILD_DIR  the project's build directory (default build/); binaries in tests/gpu/bench there
#   OUT            when set, the table is also written to $OUT/bench.md
# Extra arguments go to bench.py (--reps N, --quick, --markdown FILE).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
args=()
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  args+=(--markdown "$OUT/bench.md")
fi
exec python3 "$here/bench.py" ${args[@]+"${args[@]}"} "$@"
