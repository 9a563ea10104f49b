#!/usr/bin/env bash
# The demo command of the README: builds gpumemshim, then trains a small GPT-style model with
# PyTorch under the shim and prints what the shim saw (allocations, copies by direction and by
# host memory kind, launches). Needs an NVIDIA GPU with its driver and PyTorch with CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"

tools/install-deps.sh
# Warnings stay warnings here: a newer compiler than the project's g++ 12 must not stop the demo
# (tools/test.sh, which CI runs, builds with -Werror).
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGMS_WERROR=OFF >build.configure.log 2>&1 ||
  { cat build.configure.log; exit 1; }
cmake --build build -j "$(nproc)"

gms=build/tools/gpumemshim
"$gms" doctor
if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  cat >&2 <<'MSG'

This demo needs a machine with an NVIDIA GPU (its driver installed, so that libcuda.so.1 loads) and
PyTorch built with CUDA; here `import torch` failed or PyTorch sees no GPU, so nothing was run.
The tests need neither: tools/test.sh builds and runs them on this machine.
MSG
  exit 1
fi

echo
# The default policy, spill, turns an allocation the card cannot take into managed memory; this
# model fits, so none is made, and the cap keeps it so on a shared machine.
export GPUMEMSHIM_MANAGED_LIMIT=${GPUMEMSHIM_MANAGED_LIMIT:-16G}
echo "== training a small GPT-style model under gpumemshim (placement policy spill, the default: memory"
echo "   stays on the device while it fits; copies from pageable memory take the shim's fast paths;"
echo "   counts at exit)"
"$gms" run --stats -- python3 tools/demo/train.py "$@"

echo
echo "== the same training traced (GPUMEMSHIM_TRACE through gpumemshim run --trace), then the report"
mkdir -p out
"$gms" run --trace out/demo-trace.jsonl -- python3 tools/demo/train.py --steps 20 "$@"
"$gms" report --html out/demo-report.html out/demo-trace.jsonl > out/demo-report.txt
head -80 out/demo-report.txt
echo "..."
echo "the whole report: out/demo-report.txt; plots: out/demo-report.html (one self-contained file, no network needed)"
