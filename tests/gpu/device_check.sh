#!/usr/bin/env bash
# The one command for the GPU test machine (one H100, CUDA 13, PyTorch, CuPy, numba, pytest):
#   tests/gpu/device_check.sh
# 1. configures and builds the project into build-gpu/ (Ninja, GMS_BUILD_TESTS=ON, warnings not
#    fatal); when the main project's tests cannot be configured there (no GoogleTest), it builds the
#    shim with GMS_BUILD_TESTS=OFF and tests/gpu as a project of its own in build-gpu/tests/gpu;
# 2. runs the GPU pytest suite (tests/gpu/test_gpu.py) with -v;
# 3. runs the benchmarks (tests/gpu/bench/run_bench.sh): shim against no shim, side by side;
# 4. prints a short summary.
# Everything is logged under $OUT (default ./out): env.txt, configure.log, build.log, pytest.log,
# pytest.xml, pytest-tmp/ (the shim's statistics files of every run), bench.log, bench.md,
# summary.txt. The whole run stays within about 8 minutes: each step gets what is left of that.
# Environment: OUT, GMS_GPU_BUILD (build directory, default <repo>/build-gpu), GMS_FW_ITERS.
# Exit status: 0 when everything built, every test passed or skipped, and the benchmarks ran.
set -u -o pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
OUT=${OUT:-./out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export OUT
build=${GMS_GPU_BUILD:-$root/build-gpu}
start=$(date +%s)
deadline=$((start + 470))
status=0
summary=()

note() { printf '%s\n' "$*"; summary+=("$*"); }
elapsed() { echo $(($(date +%s) - start)); }
# seconds for a step: at most $1, leaving $2 for the steps after it, and never under 20
budget() {
  local left=$((deadline - $(date +%s) - $2))
  local want=$1
  ((left < want)) && want=$left
  ((want < 20)) && want=20
  echo "$want"
}

echo "device check: repo $root, build $build, logs $OUT"

# --- 0. what this machine is ---------------------------------------------------------------
{
  echo "date: $(date -u)"
  uname -a
  nvidia-smi -L 2>&1 || echo "nvidia-smi -L failed"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
  nvcc=$(command -v nvcc || true)
  if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc; fi
  echo "nvcc: ${nvcc:-none}"; [ -n "$nvcc" ] && "$nvcc" --version | tail -2
  cmake --version | head -1; ninja --version; gcc --version | head -1
  command -v valgrind >/dev/null && valgrind --version || echo "valgrind: none"
  python3 - <<'EOF'
import importlib, sys
print("python", sys.version.split()[0])
for m in ("pytest", "numpy", "torch", "cupy", "numba", "numba_cuda"):
    try:
        print(m, getattr(importlib.import_module(m), "__version__", "?"))
    except Exception as e:
        print(m, "unavailable:", type(e).__name__, str(e)[:120])
EOF
  python3 "$here/gpu_env.py"
} > "$OUT/env.txt" 2>&1
nvcc=$(command -v nvcc || true)
if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc; fi
cuda_args=()
[ -n "$nvcc" ] && cuda_args=(-DCMAKE_CUDA_COMPILER="$nvcc")
gpu_line=$(python3 "$here/gpu_env.py" 2>&1)
note "GPU: $gpu_line; nvcc: ${nvcc:-none}"

# --- 1. configure and build -----------------------------------------------------------------
standalone=0
if timeout "$(budget 120 330)" cmake -G Ninja -S "$root" -B "$build" -DGMS_BUILD_TESTS=ON -DGMS_WERROR=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo ${cuda_args[@]+"${cuda_args[@]}"} > "$OUT/configure.log" 2>&1; then
  note "configure: ok (GMS_BUILD_TESTS=ON)"
else
  echo "---- configure with GMS_BUILD_TESTS=ON failed; shim alone, then tests/gpu stand-alone ----" >> "$OUT/configure.log"
  standalone=1
  rm -rf "$build/tests/gpu"
  if timeout "$(budget 90 330)" cmake -G Ninja -S "$root" -B "$build" -DGMS_BUILD_TESTS=OFF -DGMS_WERROR=OFF \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >> "$OUT/configure.log" 2>&1 &&
     timeout "$(budget 90 330)" cmake -G Ninja -S "$here" -B "$build/tests/gpu" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      ${cuda_args[@]+"${cuda_args[@]}"} >> "$OUT/configure.log" 2>&1; then
    note "configure: main project tests OFF (see configure.log), tests/gpu stand-alone: ok"
  else
    note "configure: FAILED (see $OUT/configure.log)"
    status=1
  fi
fi
grep -E "GPU tests:" "$OUT/configure.log" | sed 's/^-- /  /' || true

gpu_targets=(gms_counts_static gms_counts_shared gms_bench_cuda gms_bench_malloc)
if ((standalone)); then
  timeout "$(budget 240 250)" cmake --build "$build" --target gpumemshim > "$OUT/build.log" 2>&1 &&
    timeout "$(budget 120 250)" cmake --build "$build/tests/gpu" >> "$OUT/build.log" 2>&1
  build_rc=$?
  build_note="build: shim and tests/gpu ok"
else
  timeout "$(budget 240 250)" cmake --build "$build" > "$OUT/build.log" 2>&1
  build_rc=$?
  build_note="build: ok"
  if ((build_rc != 0)); then
    # Something outside the GPU tests may not build here; the GPU tests need only these.
    echo "---- full build failed; building what the GPU tests need ----" >> "$OUT/build.log"
    timeout "$(budget 120 250)" cmake --build "$build" --target gpumemshim "${gpu_targets[@]}" >> "$OUT/build.log" 2>&1
    build_rc=$?
    build_note="build: full build FAILED (see build.log); the shim and the GPU programs built"
    status=1
  fi
fi
if ((build_rc == 0)); then
  note "$build_note"
else
  note "build: FAILED (see $OUT/build.log; last lines below)"
  tail -15 "$OUT/build.log"
  status=1
fi
for f in shim/libgpumemshim.so tests/gpu/gms_counts_static tests/gpu/gms_counts_shared \
         tests/gpu/bench/gms_bench_cuda tests/gpu/bench/gms_bench_malloc; do
  [ -e "$build/$f" ] || note "  missing: $build/$f"
done
export GMS_SHIM="$build/shim/libgpumemshim.so" GMS_BUILD_DIR="$build"

# --- 2. GPU tests ---------------------------------------------------------------------------
if ! python3 -c 'import pytest' > /dev/null 2>&1; then
  note "pytest: NOT INSTALLED for $(command -v python3): GPU tests not run"
  status=1
else
  echo "running the GPU tests (log: $OUT/pytest.log)"
  (cd "$root" && timeout "$(budget 240 100)" python3 -m pytest -v -rs -p no:cacheprovider tests/gpu \
      --basetemp="$OUT/pytest-tmp" --junitxml="$OUT/pytest.xml") > "$OUT/pytest.log" 2>&1
  rc=$?
  line=$(grep -E "^=+ .*(passed|failed|skipped|error).* =+$" "$OUT/pytest.log" | tail -1)
  note "pytest (exit $rc): ${line:-no summary line, see pytest.log}"
  grep -E "(PASSED|FAILED|SKIPPED|ERROR)" "$OUT/pytest.log" | grep "::" | sed 's/^/  /' | head -40
  ((rc == 124)) && note "  pytest ran out of time"
  ((rc == 5)) && note "  pytest ran no test (the module skips itself without a GPU: see pytest.log)"
  ((rc != 0)) && status=1
fi

# --- 3. benchmarks --------------------------------------------------------------------------
echo "running the benchmarks (log: $OUT/bench.log)"
rm -f "$OUT/bench.md"
timeout "$(budget 150 5)" "$here/bench/run_bench.sh" > "$OUT/bench.log" 2>&1
rc=$?
note "benchmarks (exit $rc):"
if [ -s "$OUT/bench.md" ]; then
  while IFS= read -r l; do note "$l"; done < "$OUT/bench.md"
else
  note "  no table (see bench.log)"; tail -5 "$OUT/bench.log"
fi
((rc != 0)) && status=1

# --- 4. summary -----------------------------------------------------------------------------
note "total: $(elapsed) s; logs in $OUT"
{
  echo "==== device check summary ===="
  printf '%s\n' "${summary[@]}"
} | tee "$OUT/summary.txt"
exit $status
