#!/usr/bin/env bash
# Tracing overhead, side by side in one run on the GPU machine: the S2 copies (PyTorch), S3 at a
# size that fits (numba), and a training loop (tools/demo/train.py), each under the shim without a
# trace, with a trace (counters, copies, kernels), and with fault records too. Three runs of each,
# alternating; the median time of each is compared. Logs and traces under $OUT.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT/traces"
B=${GMS_BUILD_DIR:-build}
SHIM=$(readlink -f "${GMS_SHIM:-$B/shim/libgpumemshim.so}")
LOG="$OUT/trace_overhead.log"
: >"$LOG"

# seconds of wall time of one run; extra environment as NAME=VALUE arguments before the command
timed() {
  local t0 t1
  t0=$(date +%s.%N)
  env LD_PRELOAD="$SHIM" GPUMEMSHIM_MANAGED_LIMIT=16G "$@" >>"$LOG" 2>&1 || echo "FAILED: $*" >>"$LOG"
  t1=$(date +%s.%N)
  python3 -c "print($t1 - $t0)"
}
REPS=${REPS:-3}
median() { printf '%s\n' "$@" | sort -g | sed -n "$(( ($# + 1) / 2 ))p"; }

printf '| workload | no trace (s) | trace (s) | ratio | trace + faults (s) | ratio |\n|---|---:|---:|---:|---:|---:|\n' | tee "$OUT/trace_overhead.md"
while IFS='|' read -r name cmd; do
  a=() b=() c=()
  for ((i = 0; i < REPS; ++i)); do
    # Rotate the order so that drift (caches, clocks) falls on every mode alike.
    case $((i % 3)) in
      0) a+=("$(timed $cmd)"); b+=("$(timed GPUMEMSHIM_TRACE="$OUT/traces/$name-%p.jsonl" $cmd)")
         c+=("$(timed GPUMEMSHIM_TRACE="$OUT/traces/$name-faults-%p.jsonl" GPUMEMSHIM_TRACE_FAULTS=1 $cmd)") ;;
      1) b+=("$(timed GPUMEMSHIM_TRACE="$OUT/traces/$name-%p.jsonl" $cmd)")
         c+=("$(timed GPUMEMSHIM_TRACE="$OUT/traces/$name-faults-%p.jsonl" GPUMEMSHIM_TRACE_FAULTS=1 $cmd)")
         a+=("$(timed $cmd)") ;;
      2) c+=("$(timed GPUMEMSHIM_TRACE="$OUT/traces/$name-faults-%p.jsonl" GPUMEMSHIM_TRACE_FAULTS=1 $cmd)")
         a+=("$(timed $cmd)"); b+=("$(timed GPUMEMSHIM_TRACE="$OUT/traces/$name-%p.jsonl" $cmd)") ;;
    esac
    rm -f "$OUT"/traces/*.jsonl  # keep the disk and the returned files small
  done
  ma=$(median "${a[@]}") mb=$(median "${b[@]}") mc=$(median "${c[@]}")
  python3 -c "print('| $name | %.2f | %.2f | %.3f | %.2f | %.3f |' % ($ma, $mb, $mb / $ma, $mc, $mc / $ma))" |
    tee -a "$OUT/trace_overhead.md"
done <<'EOF2'
s2-torch|python3 tests/gpu/copies/s2_torch.py plain
s3-numba|GPUMEMSHIM_POLICY=spill GPUMEMSHIM_DEVICE_LIMIT=8G python3 tests/gpu/placement/s3_numba.py plain 200000
train-gpt|python3 tools/demo/train.py --steps 40
EOF2
ls -la "$OUT/traces" | tail -3 >>"$LOG"
