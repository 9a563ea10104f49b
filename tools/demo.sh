#!/usr/bin/env bash
# The demo of the README, the project's headline in about three minutes on one GPU:
#   1. a PyTorch training loop (tools/demo/train.py) with no shim and no budget: its step time and
#      its peak memory;
#   2. the same loop under gpumemshim's default policy with a device budget of peak / 1.5, which
#      it does not fit: step time, ratio, the shim's decisions (--stats);
#   3. the same loop at that budget under --policy off: out-of-memory, what a user gets without
#      the shim;
#   4. copies from pageable host memory (tests/gpu/copies/s2_torch.py) under the shim, beside the
#      driver's own and beside pinned memory;
#   5. a traced run of (2) and its report: text, a self-contained HTML page, a Perfetto timeline.
# Ends with a summary to paste (also in out/demo/summary.txt). Arguments go to train.py (e.g.
# --width 2048 for a smaller card).
#
# Needs an NVIDIA GPU with its driver, python3 with PyTorch built with CUDA, and the CUDA toolkit;
# where one is missing it says which, builds nothing and exits 1. It builds into build-demo/ only:
# build/, which tools/test.sh configures, is never touched.
# GPU safety: every run under the shim has a device budget and caps the shim's host-backed memory
# (16G); every loop is bounded in steps and seconds, and every run by a timeout.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
started=$SECONDS
OUT=out/demo
BUILD=build-demo
MANAGED_LIMIT=16G

# --- What the demo needs, before anything is built ------------------------------------------
missing=()
if ! command -v python3 >/dev/null; then
  missing+=("python3 with PyTorch built with CUDA (no python3 on PATH)")
else
  # The driver and a GPU, asked directly (no PyTorch needed for this).
  gpu=1
  if ! why=$(python3 - 2>&1 <<'PY'
import ctypes, sys
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError:
    sys.exit("no NVIDIA driver: libcuda.so.1 does not load")
rc = cuda.cuInit(0)
if rc == 100:
    sys.exit("the NVIDIA driver is installed but finds no GPU")
if rc != 0:
    sys.exit(f"the NVIDIA driver does not start (cuInit returned {rc})")
n = ctypes.c_int(0)
if cuda.cuDeviceGetCount(ctypes.byref(n)) != 0 or n.value == 0:
    sys.exit("the NVIDIA driver finds no GPU")
PY
  ); then
    missing+=("an NVIDIA GPU and its driver ($why)")
    gpu=0
  fi
  if ! why=$(python3 - "$gpu" 2>&1 <<'PY' | tail -1
import sys
import torch
if torch.version.cuda is None:
    sys.exit(f"PyTorch {torch.__version__} is built without CUDA")
if sys.argv[1] == "1" and not torch.cuda.is_available():
    sys.exit("PyTorch sees no GPU")
PY
  ); then
    missing+=("PyTorch built with CUDA for python3 ($why)")
  fi
fi
if [[ ! -f /usr/local/cuda/include/cuda.h ]] && ! command -v nvcc >/dev/null; then
  missing+=("the CUDA toolkit, 12.8 or newer (cuda.h and nvcc: none found)")
fi
if ((${#missing[@]})); then
  {
    echo "tools/demo.sh runs a training loop on a GPU, so it needs on this machine:"
    printf '  - %s\n' "${missing[@]}"
    echo "Nothing was built or run. The tests need no GPU: tools/test.sh builds and runs them here."
  } >&2
  exit 1
fi

# A card with less room than the default model's 14 GiB peak gets a smaller model.
free_gib=$(python3 -c 'import torch; print(torch.cuda.mem_get_info()[0] // 2**30)')
shape=()
if ((free_gib < 8)); then
  echo "tools/demo.sh needs 8 GiB of free GPU memory for its training loop; GPU 0 has $free_gib GiB free." >&2
  exit 1
elif ((free_gib < 20)); then
  shape=(--width 2048 --batch 16)
fi

# --- Build: the command and the library, in build-demo/ -------------------------------------
# Build tools from Debian's packages only where one is missing (the optional ones, libunwind for
# call sites, are not worth an apt-get on a machine that may have no network).
if ! command -v cmake >/dev/null || ! command -v ninja >/dev/null || ! command -v g++ >/dev/null; then
  tools/install-deps.sh
fi
mkdir -p "$BUILD" "$OUT"
echo "== building gpumemshim into $BUILD/ (log: $BUILD/build.log)"
build_start=$SECONDS
# Warnings stay warnings (a newer compiler must not stop the demo); no tests are built.
if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGMS_WERROR=OFF -DGMS_BUILD_TESTS=OFF &&
       cmake --build "$BUILD" -j "$(nproc)" --target gpumemshim_cli; } >"$BUILD/build.log" 2>&1; then
  tail -30 "$BUILD/build.log" >&2
  echo "the build failed; the whole log is $BUILD/build.log" >&2
  exit 1
fi
build_seconds=$((SECONDS - build_start))
gms=$BUILD/tools/gpumemshim
# The runs below show the shim's defaults: settings of the caller's are not passed on.
for v in $(compgen -e); do
  if [[ $v == GPUMEMSHIM_* ]]; then unset "$v"; fi
done
# (awk reads to the end: an early exit could kill the writer with SIGPIPE)
policy=$("$gms" options | awk '$0 == "GPUMEMSHIM_POLICY" && !seen { getline; print $2; seen = 1 }')
echo
"$gms" doctor

# run_step NAME SECONDS CMD...: shows CMD, runs it with a timeout; its stdout is shown and kept in
# $OUT/NAME.out, its stderr (the shim's statistics among it) kept in $OUT/NAME.err. Sets rc.
run_step() {
  local name=$1 seconds=$2
  shift 2
  printf '+ %s\n' "$*"
  set +e
  timeout -k 10 "$seconds" "$@" 2>"$OUT/$name.err" | tee "$OUT/$name.out"
  rc=${PIPESTATUS[0]}
  set -e
  if ((rc == 124 || rc == 137)); then
    echo "(stopped after $seconds s)"
  elif ((rc != 0)); then
    echo "(exit status $rc; the end of its stderr, all of it in $OUT/$name.err:)"
    tail -4 "$OUT/$name.err" | sed 's/^/    /'
  fi
}
# decisions FILE: the "placement and residency decisions" rows of the shim's statistics in FILE.
decisions() {
  awk '$0 == "  placement and residency decisions" { on = 1; print; next }
       on && /^  [a-z_]+ +[0-9]+ / { print; next }
       on { exit }
       END { if (!on) print "  (no placement or residency decisions)" }' "$1"
}
# report_section TITLE: one section of the report, from its title to the next blank line.
report_section() {
  awk -v t="$1" 'index($0, t) == 1 { on = 1 } on && $0 == "" { exit } on { print }' "$OUT/report.txt"
}
unexpected=()
train=(python3 tools/demo/train.py "${shape[@]}" "$@")

# --- 1. The training loop with no shim and no budget ------------------------------------------
echo
echo "== 1. the training loop as it is: no shim, no budget (its peak sets the budget below)"
rm -f "$OUT"/*.json
run_step free 150 "${train[@]}" --json "$OUT/free.json"
budget_mib=
if ((rc == 0)); then
  budget_mib=$(python3 -c 'import json, sys; print(int(json.load(open(sys.argv[1]))["peak_bytes"] / 1.5 / 2**20))' "$OUT/free.json")
else
  unexpected+=("the training loop failed with no shim (exit status $rc; $OUT/free.err)")
fi

if [[ -n $budget_mib ]]; then
  shim=("$gms" run --device-limit "${budget_mib}M" --managed-limit "$MANAGED_LIMIT")
  # --- 2. Under the default policy, with a budget it does not fit ---------------------------
  echo
  echo "== 2. the same loop under gpumemshim's default policy ($policy), device budget ${budget_mib} MiB (peak / 1.5)"
  run_step default 240 "${shim[@]}" --stats -- "${train[@]}" --json "$OUT/default.json"
  if ((rc != 0)); then
    unexpected+=("the training loop failed under the default policy (exit status $rc; $OUT/default.err)")
  fi
  echo "-- the shim's decisions (its statistics at exit; all of them: $OUT/default.err)"
  decisions "$OUT/default.err"

  # --- 3. Under policy off at the same budget: what the user gets without the shim ----------
  echo
  echo "== 3. the same loop at that budget under --policy off (the shim only enforces the budget): out of memory"
  run_step off 150 "${shim[@]}" --policy off -- "${train[@]}" --json "$OUT/off.json"
  if ((rc != 3)); then
    unexpected+=("under --policy off at the budget the loop did not die of out-of-memory (exit status $rc)")
  fi
fi

# --- 4. Copies from pageable host memory ------------------------------------------------------
echo
echo "== 4. copies from pageable memory: a 40 MB tensor .to('cuda') and .cpu() 100 times each (GB/s)"
s2=(python3 tests/gpu/copies/s2_torch.py)
echo "-- the driver alone"
run_step copies-driver 120 "${s2[@]}" plain
((rc == 0)) || unexpected+=("the copies failed with no shim (exit status $rc)")
echo "-- under gpumemshim (registration and staging of pageable memory, recycled host blocks)"
run_step copies-shim 120 "$gms" run --device-limit 4G --managed-limit "$MANAGED_LIMIT" --stats -- "${s2[@]}" plain
((rc == 0)) || unexpected+=("the copies failed under the shim (exit status $rc)")
decisions "$OUT/copies-shim.err"
echo "-- pinned memory (tensor.pin_memory(): a code change; the link's speed)"
run_step copies-pinned 120 "${s2[@]}" pinned
((rc == 0)) || unexpected+=("the copies from pinned memory failed (exit status $rc)")

# --- 5. A trace of the constrained run, and its report ----------------------------------------
if [[ -n $budget_mib ]]; then
  echo
  echo "== 5. the loop of (2) traced (fewer steps), then gpumemshim report"
  rm -f "$OUT/trace.jsonl"
  run_step traced 150 "${shim[@]}" --trace "$OUT/trace.jsonl" -- "${train[@]}" --steps 8 --max-seconds 20 --json "$OUT/traced.json"
  if [[ -s $OUT/trace.jsonl ]] &&
     "$gms" report --html "$OUT/report.html" --perfetto "$OUT/timeline.json" "$OUT/trace.jsonl" >"$OUT/report.txt" 2>"$OUT/report.err"; then
    echo "-- from the report ($OUT/report.txt):"
    awk 'NR > 1 && $0 == "" { exit } { print }' "$OUT/report.txt"
    for title in "Repeating step" "Placement decisions" "Per NVTX range" "Top offenders"; do
      echo
      report_section "$title"
    done
  else
    unexpected+=("no report of the traced run ($OUT/report.err, $OUT/traced.err)")
  fi
fi

# --- Summary ---------------------------------------------------------------------------------
echo
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
python3 tools/demo/summary.py --out "$OUT" --policy "$policy" --budget-mib "${budget_mib:-0}" --commit "$commit" \
  --build-seconds "$build_seconds" --total-seconds $((SECONDS - started)) | tee "$OUT/summary.txt" ||
  unexpected+=("no summary")
if ((${#unexpected[@]})); then
  echo >&2
  printf 'unexpected: %s\n' "${unexpected[@]}" >&2
  exit 1
fi
