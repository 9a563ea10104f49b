#!/usr/bin/env bash
# Records the training zoo's step timelines on the GPU machine: for each model, the step with no
# limit (its peak and time), then traced under `swap` with no budget to speak of (the unconstrained
# step: its kernels, their durations, each allocation's life and the allocations each launch uses)
# and under a budget of peak / 1.5 (what the planner does today). Traces go to $OUT/traces.tar (gzip
# inside); the table is printed last. GPU safety: every run under the shim caps managed memory and
# sets a device limit. MODELS (default: all four) and STEPS may be set.
. "$(dirname "$0")/prelude.sh"
mkdir -p "$OUT/traces"
build_gpu cli
MODELS=${MODELS:-resnet50 llama vit gpt}
STEPS=${STEPS:-8}
LOG="$OUT/record.log"
: >"$LOG"
Z=tests/gpu/zoo/zoo.py
shim() { env LD_PRELOAD="$SHIM" GPUMEMSHIM_MANAGED_LIMIT=16G "$@"; }
last_json() { grep '^{' | tail -1; }
field() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(d.get('$2', ''))" "$1" 2>/dev/null; }
printf '%-9s %-34s %s\n' model run result | tee "$OUT/record_table.txt"
for m in $MODELS; do
  free=$(timeout 200 python3 $Z "$m" --steps "$STEPS" 2>>"$LOG" | last_json)
  printf '%-9s %-34s %s\n' "$m" "no shim, no limit" "$free" | tee -a "$OUT/record_table.txt"
  peak=$(field "$free" peak_gib)
  [ -n "$peak" ] || continue
  limit=$(python3 -c "print(int($peak * 1024 / 1.5))")M
  r=$(GPUMEMSHIM_TRACE="$OUT/traces/$m-free.jsonl" shim GPUMEMSHIM_POLICY=swap GPUMEMSHIM_DEVICE_LIMIT=60G \
        timeout 200 python3 $Z "$m" --steps 6 2>>"$LOG" | last_json)
  printf '%-9s %-34s %s\n' "$m" "swap traced, limit 60G" "$r" | tee -a "$OUT/record_table.txt"
  r=$(GPUMEMSHIM_TRACE="$OUT/traces/$m-budget.jsonl" shim GPUMEMSHIM_POLICY=swap GPUMEMSHIM_SWAP_ORDER=scan \
        GPUMEMSHIM_SWAP_PARK=on GPUMEMSHIM_DEVICE_LIMIT="$limit" timeout 200 python3 $Z "$m" --steps 6 2>>"$LOG" | last_json)
  printf '%-9s %-34s %s\n' "$m" "swap scan+park traced, $limit" "$r" | tee -a "$OUT/record_table.txt"
done
(cd "$OUT/traces" && gzip -f *.jsonl 2>/dev/null; tar cf ../traces.tar .) && rm -rf "$OUT/traces"
cat "$OUT/record_table.txt"
