#!/usr/bin/env bash
# The zoo's resnet50 under DistributedDataParallel on two GPUs (tests/gpu/zoo/ddp.py, torchrun
# --nproc_per_node 2, batch 64 a rank), side by side in one run: no limit, then policy auto with
# nothing set but a budget of each rank's peak / 1.5, traced (a trace a rank, %r), and the report
# of the two traces merged. Prints both JSON lines (step time of the slowest rank, loss, a digest
# of the parameters: the same under the shim as without it) and the report's repeating-step table.
# LIMIT (e.g. 3891M) skips the run with no limit and sets the budget a rank.
# GPU safety: the run under the shim caps managed memory and sets a device limit.
. "$(dirname "$0")/prelude.sh"
build_gpu cli
STEPS=${STEPS:-8}
run() { timeout 300 "$@" 2>>"$OUT/ddp.log" | grep '^{' | tail -1; }
limit=${LIMIT:-}
: >"$OUT/ddp.txt"
if [ -z "$limit" ]; then
  free=$(run torchrun --nproc_per_node 2 tests/gpu/zoo/ddp.py --steps "$STEPS")
  echo "no limit: $free" | tee -a "$OUT/ddp.txt"
  peak=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["peak_gib"])' "$free" 2>/dev/null) || exit 1
  limit=$(python3 -c "print(int($peak * 1024 / 1.5))")M
fi
rm -f "$OUT"/ddp-trace-*.jsonl
auto=$(run env LD_PRELOAD="$SHIM" GPUMEMSHIM_MANAGED_LIMIT=16G GPUMEMSHIM_DEVICE_LIMIT="$limit" \
  GPUMEMSHIM_TRACE="$OUT/ddp-trace-%r.jsonl" torchrun --nproc_per_node 2 tests/gpu/zoo/ddp.py --steps "$STEPS")
echo "auto, $limit a rank: $auto" | tee -a "$OUT/ddp.txt"
"$TOOL" report "$OUT"/ddp-trace-*.jsonl >"$OUT/ddp_report.txt" 2>&1
grep -A6 "^Repeating step" "$OUT/ddp_report.txt" | tee -a "$OUT/ddp.txt"
head -4 "$OUT/ddp_report.txt" | tee -a "$OUT/ddp.txt"
gzip -f "$OUT"/ddp-trace-*.jsonl 2>/dev/null  # the report above read them; kept for a closer look
