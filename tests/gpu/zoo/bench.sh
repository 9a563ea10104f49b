#!/usr/bin/env bash
# The training zoo's benchmark (issue: training past the budget at the link's bound): for each model,
# measured side by side in one run on the GPU machine, at budgets of peak / 1.2 and peak / 1.5:
# no limit; the floor and the schedule of its step at that budget (gpumemshim report --budget on a
# traced run with no budget to speak of); policy auto with nothing else set but the budget, and with
# no budget (what it costs a step that fits); PyTorch's save_on_cpu under
# set_per_process_memory_fraction; at peak / 1.5 also policy spill (the default before auto) and
# off (out of memory); policy auto traced, for where its step's time goes (the report's busy and
# idle time, and the bytes it moved); with CONTEXT=1, policy auto in context order. Rows go to
# $OUT/zoo.jsonl, the table (tests/gpu/zoo/table.py) to $OUT/zoo.md and the terminal. Step times are
# the median of steps 9 to 20 (WARMUP=8 left out of 20 STEPS): the step learner finds the step and
# records it in the first four to six steps, and the first steps also make the host memory moves
# need (seconds, once), so a median over earlier steps mixes those in (2026-11-27, every step's time
# of a run: zoo.jsonl's steps_ms). That is a training run's steady state. TRACED=0 leaves out the
# traced runs of auto (where its step's time goes) to save time.
# With GPUS above 1 the rows of auto past a budget run alone on the host (the other lanes wait):
# lanes running at once disturbed each other's copies. ZOO=SCRIPT stands in for zoo.py (the locks'
# test runs one that only sleeps: tests/tools/test_zoo_lanes.py).
# GMS_STEP_SYNC=window: steps timed with no synchronisation of the device between them (see
# tests/gpu/placement/train_steps.py).
# GPU safety: every run under the shim caps managed memory and sets a device limit. MODELS, STEPS,
# BUDGETS (divisors), CONTEXT, GPUS (lanes, one GPU each), WARMUP and TRACED may be set.
. "$(dirname "$0")/prelude.sh"
build_gpu cli
MODELS=${MODELS:-resnet50 llama vit gpt}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-8}
TRACED=${TRACED:-1}
BUDGETS=${BUDGETS:-1.2 1.5}
LOG="$OUT/zoo.log"
ROWS="$OUT/zoo.jsonl"
Z=${ZOO:-tests/gpu/zoo/zoo.py}
TMP=$(mktemp -d)
last_json() { grep '^{' | tail -1; }
# row MODEL BUDGET_DIV CONFIG JSON: one line of zoo.jsonl
row() { python3 -c 'import json,sys; d=json.loads(sys.argv[4] or "{}"); d.update(model=sys.argv[1], div=sys.argv[2], config=sys.argv[3]); print(json.dumps(d))' "$@" | tee -a "${LANE_ROWS:-$ROWS}"; }
SHIMENV=(env LD_PRELOAD="$SHIM" GPUMEMSHIM_MANAGED_LIMIT=16G)
# Lanes share the host's memory and PCIe root: runs past a budget copy at up to the link's rate
# both ways, and four lanes at once made some steps 2x to 7x longer (docs/benchmarks.md, "At the
# head"). So the rows of policy auto, the ones the table compares, run alone: they hold the host's
# lock that every other run shares, and a turnstile keeps a waiting auto row from being passed by
# the other lanes' runs. One lane: no waits.
alone() { (flock -x 8 && flock -x 9 && "$@" 8>&- 9>&-) 8>"$TMP/turnstile" 9>"$TMP/host"; }
beside() { (flock -x 8 && flock -s 9 && flock -u 8 && "$@" 8>&- 9>&-) 8>"$TMP/turnstile" 9>"$TMP/host"; }
run() { beside timeout 240 "$@" 2>>"$LOG" | last_json; }
run_alone() { alone timeout 240 "$@" 2>>"$LOG" | last_json; }
bench_model() {
  local m=$1 free peak div mib limit bound
  echo "== $m" | tee -a "$LOG"
  free=$(run python3 $Z "$m" --steps "$STEPS" --warmup "$WARMUP")
  row "$m" 1 "no limit" "$free"
  peak=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("peak_gib", ""))' "$free" 2>/dev/null)
  [ -n "$peak" ] || return
  # Policy auto when the step fits the card: what it costs a program it need not help.
  row "$m" 1 "auto, fits" "$(run "${SHIMENV[@]}" GPUMEMSHIM_POLICY=auto python3 $Z "$m" --steps "$STEPS" --warmup "$WARMUP")"
  # The step with no budget to speak of, traced: its kernels, lives and uses. Policy swap counts
  # all its movable memory against the managed limit, so that limit is the most the GPU machine
  # allows: a step past 16 GiB was refused under 16G (docs/benchmarks.md, "The class check").
  beside timeout 240 "${SHIMENV[@]}" GPUMEMSHIM_MANAGED_LIMIT=32G GPUMEMSHIM_TRACE="$TMP/$m.jsonl" GPUMEMSHIM_POLICY=swap GPUMEMSHIM_DEVICE_LIMIT=60G \
    python3 $Z "$m" --steps 6 >/dev/null 2>>"$LOG"
  for div in $BUDGETS; do
    mib=$(python3 -c "print(int($peak * 1024 / $div))")
    limit=${mib}M
    bound=$("$TOOL" report "$TMP/$m.jsonl" --json --budget "$limit" 2>>"$LOG" |
      python3 -c 'import json,sys; s=json.load(sys.stdin)["steps"][0]; print(json.dumps({k: s.get(k) for k in ("floor_ns","bound_ns","kernel_ns","plan_in","plan_out","plan_dropped","bound_copied_ns","floor_copied_ns","plan_copied_out","missing")}))')
    row "$m" "$div" "bound" "$bound"
    # Policy auto with nothing else set but the budget.
    row "$m" "$div" "auto" "$(run_alone "${SHIMENV[@]}" GPUMEMSHIM_POLICY=auto GPUMEMSHIM_DEVICE_LIMIT="$limit" python3 $Z "$m" --steps "$STEPS" --warmup "$WARMUP")"
    row "$m" "$div" "save_on_cpu" "$(run python3 $Z "$m" --steps "$STEPS" --warmup "$WARMUP" --save-on-cpu $((mib * 1048576)))"
    # Where auto's step time goes: the same run traced (tracing costs it some time), the report's
    # view of its repeating step.
    if [ "$TRACED" = 1 ]; then
      beside timeout 240 "${SHIMENV[@]}" GPUMEMSHIM_TRACE="$TMP/$m-$div.jsonl" GPUMEMSHIM_POLICY=auto GPUMEMSHIM_DEVICE_LIMIT="$limit" \
        python3 $Z "$m" --steps "$STEPS" >/dev/null 2>>"$LOG"
      row "$m" "$div" "auto, traced" "$("$TOOL" report "$TMP/$m-$div.jsonl" --json 2>>"$LOG" |
        python3 -c 'import json,sys; s=json.load(sys.stdin)["steps"][0]; print(json.dumps({k: s.get(k) for k in ("measured_ns","busy_ns","idle_ns","idle_copying_ns","copy_in_ns","copy_out_ns","copy_both_ns","copied_in","copied_out","missing")}))')"
      # KEEP_TRACES=DIR keeps auto's traces (gzipped) for study away from the GPU.
      if [ -n "${KEEP_TRACES:-}" ]; then mkdir -p "$KEEP_TRACES" && gzip -c "$TMP/$m-$div.jsonl" > "$KEEP_TRACES/$m-$div.jsonl.gz"; fi
      rm -f "$TMP/$m-$div.jsonl"
    fi
    if [ "${CONTEXT:-0}" = 1 ]; then
      # The order for kernels that reach memory by pointers no hook sees: what its safety costs.
      row "$m" "$div" "auto, context order" "$(run "${SHIMENV[@]}" GPUMEMSHIM_POLICY=auto GPUMEMSHIM_SWAP_ORDER=context GPUMEMSHIM_DEVICE_LIMIT="$limit" python3 $Z "$m" --steps "$STEPS" --warmup "$WARMUP")"
    fi
    if [ "$div" = 1.5 ]; then
      # Policy spill (the default before auto) at the budget, and off: out of memory.
      row "$m" "$div" "spill" "$(run "${SHIMENV[@]}" GPUMEMSHIM_POLICY=spill GPUMEMSHIM_DEVICE_LIMIT="$limit" python3 $Z "$m" --steps 4)"
      row "$m" "$div" "off" "$(run "${SHIMENV[@]}" GPUMEMSHIM_POLICY=off GPUMEMSHIM_DEVICE_LIMIT="$limit" python3 $Z "$m" --steps 3)"
    fi
  done
}
# GPUS=N: the models split over N lanes, one GPU each (CUDA_VISIBLE_DEVICES), run at once; each
# model's rows are still measured side by side on its own GPU.
GPUS=${GPUS:-1}
if [ "$GPUS" -gt 1 ]; then
  lanes=()
  for ((g = 0; g < GPUS; g++)); do lanes+=(""); done
  k=0
  for m in $MODELS; do lanes[$((k % GPUS))]+=" $m"; k=$((k + 1)); done
  for ((g = 0; g < GPUS; g++)); do
    # Each lane writes rows of its own (appends from several processes could interleave).
    (export CUDA_VISIBLE_DEVICES=$g LANE_ROWS="$TMP/rows.$g"; for m in ${lanes[$g]}; do bench_model "$m"; done) &
  done
  wait
  for ((g = 0; g < GPUS; g++)); do cat "$TMP/rows.$g" >> "$ROWS" 2>/dev/null; done
else
  for m in $MODELS; do bench_model "$m"; done
fi
rm -rf "$TMP"
python3 tests/gpu/zoo/table.py "$ROWS" | tee "$OUT/zoo.md"
