#!/usr/bin/env bash
# Two variants of the shim side by side in one run, on the zoo's programs: a change measured against
# what it changes, on the same machine, runs interleaved.
#   tests/gpu/zoo/ab.sh
# A is the shim built from the source tree in A_SRC (default: this tree), B from this tree; A_ENV
# and B_ENV are settings each run of that side gets (space-separated NAME=VALUE), so one build with
# two settings is an A/B too. A_SRC=none: side A runs without the shim and without a budget (the
# program with no limit, against the shim past one). To measure a change against the commit
# before it, on this machine:
#   mkdir -p scratch/base && git archive HEAD~1 | tar -x -C scratch/base
# and carry scratch to the GPU machine (scratch/ is git-ignored: add it to .git/info/exclude).
# ROWS: space-separated KIND:MODEL:BUDGET, KIND decode (zoo/decode.py, greedy decoding, 24 tokens),
# zoo (zoo/zoo.py, training, 14 steps) or jax (zoo/jax_train.py, MODEL ignored: an MLP trained
# with optax, 10 steps), BUDGET the device limit (GPUMEMSHIM_DEVICE_LIMIT).
# GMS_STEP_SYNC=window times the training rows as a loop that never synchronises the whole device
# (tests/gpu/placement/train_steps.py): work the shim leaves queued at a step's end then overlaps
# the next step instead of being waited for.
# REPEAT: runs of each side a row (alternating A B, B A, ...). LIMIT: seconds; rows not started by
# then are left out, and the table says so. Policy auto, managed limit 24G (decode) or 16G (zoo).
# Writes $OUT/ab.md (every run, the medians, B/A, the tokens' digest or the loss, and the shim's
# time moving memory and waiting for the GPU, from its statistics) and $OUT/ab-runs.tgz (each run's
# stderr and statistics). Example (the zoo at peak / 1.5, two 8b decodes):
#   ROWS="decode:8b:7658M decode:8b:3829M zoo:gpt:9448M zoo:llama:9536M zoo:resnet50:7250M zoo:vit:5256M"
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/prelude.sh"
OUT=$(cd "$OUT" && pwd)
ROWS=${ROWS:-"decode:8b:7658M zoo:resnet50:7250M"}
REPEAT=${REPEAT:-2}
LIMIT=${LIMIT:-540}
T0=$(date +%s)
RUNS="$OUT/ab-runs"
rm -rf "$RUNS"
mkdir -p "$RUNS"

build_gpu
SHIM_B=$SHIM
SHIM_A=$SHIM
if [ "${A_SRC:-}" = none ]; then
  SHIM_A=none
elif [ -n "${A_SRC:-}" ]; then
  [ -f "$A_SRC/CMakeLists.txt" ] || { echo "ab.sh: A_SRC=$A_SRC is not a source tree (no CMakeLists.txt)" >&2; exit 2; }
  SHIM_A=$(cd "$A_SRC" && GMS_BUILD_DIR=build-gpu OUT="$OUT/a-build" bash -c 'source tests/gpu/zoo/prelude.sh && build_gpu && echo "$SHIM"' | tail -1)
  [ -f "$SHIM_A" ] || { echo "ab.sh: the build of A_SRC failed (logs: $OUT/a-build)" >&2; exit 1; }
fi
echo "ab.sh: A $SHIM_A ${A_ENV:-}; B $SHIM_B ${B_ENV:-}; built in $(($(date +%s) - T0)) s"

# run SIDE KIND MODEL BUDGET N: one run; its JSON line (or nothing) goes to $RUNS/SIDE-KIND-MODEL-BUDGET-N.out
run() {
  local side=$1 kind=$2 model=$3 budget=$4 n=$5 so envs managed argv
  local tag="$side-$kind-$model-$budget-$n"
  if [ "$side" = A ]; then so=$SHIM_A envs=${A_ENV:-}; else so=$SHIM_B envs=${B_ENV:-}; fi
  case $kind in
    decode) managed=24G argv=(python3 tests/gpu/zoo/decode.py "$model" --tokens 24) ;;
    zoo) managed=16G argv=(python3 tests/gpu/zoo/zoo.py "$model" --steps 14) ;;
    jax) managed=16G argv=(python3 tests/gpu/zoo/jax_train.py --steps 10) ;;
    *) echo "ab.sh: unknown kind $kind (decode, zoo or jax)" >&2; return ;;
  esac
  if [ "$so" = none ]; then
    # shellcheck disable=SC2086
    timeout 200 env $envs "${argv[@]}" 2> "$RUNS/$tag.err" | grep '^{' | tail -1 > "$RUNS/$tag.out"
    echo "$tag (no shim): $(cut -c1-160 "$RUNS/$tag.out") [$(($(date +%s) - T0)) s]"
    return
  fi
  # shellcheck disable=SC2086
  timeout 200 env $envs LD_PRELOAD="$so" GPUMEMSHIM_POLICY=auto GPUMEMSHIM_MANAGED_LIMIT=$managed \
    GPUMEMSHIM_DEVICE_LIMIT="$budget" GPUMEMSHIM_STATS="$RUNS/$tag.stats.json" "${argv[@]}" \
    2> "$RUNS/$tag.err" | grep '^{' | tail -1 > "$RUNS/$tag.out"
  echo "$tag: $(cut -c1-160 "$RUNS/$tag.out") [$(($(date +%s) - T0)) s]"
}

for row in $ROWS; do
  IFS=: read -r kind model budget <<< "$row"
  for ((n = 0; n < REPEAT; n++)); do
    order="A B"
    ((n % 2 == 1)) && order="B A"
    for side in $order; do
      if (($(date +%s) - T0 >= LIMIT)); then
        echo "ab.sh: out of time before $row ($side, run $n)"
        echo "$row $side $n" >> "$RUNS/left-out"
        continue
      fi
      run "$side" "$kind" "$model" "$budget" "$n"
    done
  done
done

python3 "$here/ab_table.py" "$RUNS" "$ROWS" | tee "$OUT/ab.md"
tar -czf "$OUT/ab-runs.tgz" -C "$OUT" ab-runs && rm -rf "$RUNS"
