#!/usr/bin/env bash
# Decoding with weights bigger than the budget (issue: decode at the link's bound), measured side by
# side in one run on the GPU machine: for each model shape and batch, ms per token with no limit,
# then at budgets of a half and a quarter of the weights' size: policy auto with nothing else set
# but the budget, Hugging Face accelerate's big-model dispatch with that much GPU memory, and policy
# auto traced (where its token's time goes: tests/gpu/zoo/token_time.py). The bound per
# token is the larger of the token with no limit and the weights that do not fit the budget
# crossing the link once at LINK_GBS (55 GB/s on the H100; a floor: the budget also holds the
# key/value cache and the activations). Rows go to $OUT/decode.jsonl, the table to $OUT/decode.md
# and the terminal; digests equal to the no-limit run's mean the same tokens (batch 8 varies run to
# run without the shim too). GPU safety: every run under the shim caps managed memory and sets a
# device limit. SHAPES, BATCHES, TOKENS, LINK_GBS and GPUS (lanes, one GPU each: each shape and
# batch is measured side by side on its own GPU) may be set.
. "$(dirname "$0")/prelude.sh"
build_gpu
SHAPES=${SHAPES:-3b 8b}
BATCHES=${BATCHES:-1 8}
TOKENS=${TOKENS:-32}
LINK_GBS=${LINK_GBS:-55}
ROWS="$OUT/decode.jsonl"
LOG="$OUT/decode.log"
D=tests/gpu/zoo/decode.py
TMP=$(mktemp -d)
row() { python3 -c 'import json,sys; d=json.loads(sys.argv[4] or "{}"); d.update(shape=sys.argv[1], div=sys.argv[2], config=sys.argv[3]); print(json.dumps(d))' "$@" | tee -a "${LANE_ROWS:-$ROWS}"; }
run() { timeout 300 "$@" 2>>"$LOG" | grep '^{' | tail -1; }
bench_pair() {
  local shape=$1 batch=$2 free weights div bytes mib tr step
  echo "== $shape batch $batch" | tee -a "$LOG"
  free=$(run python3 $D "$shape" --batch "$batch" --tokens "$TOKENS")
  row "$shape" 1 "no limit" "$free"
  weights=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("weights_bytes", ""))' "$free" 2>/dev/null)
  [ -n "$weights" ] || return
  for div in 2 4; do
    bytes=$((weights / div))
    mib=$((bytes / 1048576))
    row "$shape" "$div" "auto" "$(run env LD_PRELOAD="$SHIM" GPUMEMSHIM_MANAGED_LIMIT=24G GPUMEMSHIM_POLICY=auto \
      GPUMEMSHIM_DEVICE_LIMIT=${mib}M python3 $D "$shape" --batch "$batch" --tokens "$TOKENS")"
    row "$shape" "$div" "accelerate" "$(run python3 $D "$shape" --batch "$batch" --tokens "$TOKENS" --accelerate "$bytes")"
    # Where auto's token goes: the same run traced, each token's GPU time split (token_time.py).
    tr="$TMP/$shape-$batch-$div.jsonl"
    step=$(run env LD_PRELOAD="$SHIM" GPUMEMSHIM_MANAGED_LIMIT=24G GPUMEMSHIM_POLICY=auto GPUMEMSHIM_TRACE="$tr" \
      GPUMEMSHIM_DEVICE_LIMIT=${mib}M python3 $D "$shape" --batch "$batch" --tokens "$TOKENS")
    row "$shape" "$div" "auto, traced" "$(python3 tests/gpu/zoo/token_time.py "$tr" 2>>"$LOG" | python3 -c '
import json, sys
print(json.dumps({**json.loads(sys.stdin.read() or "{}"), "token_ms": json.loads(sys.argv[1] or "{}").get("token_ms"), "batch": int(sys.argv[2])}))' "$step" "$batch")"
    rm -f "$tr"
  done
}
GPUS=${GPUS:-1}
pairs=()
for shape in $SHAPES; do
  for batch in $BATCHES; do pairs+=("$shape:$batch"); done
done
if [ "$GPUS" -gt 1 ]; then
  lanes=()
  for ((g = 0; g < GPUS; g++)); do lanes+=(""); done
  k=0
  for p in "${pairs[@]}"; do lanes[$((k % GPUS))]+=" $p"; k=$((k + 1)); done
  for ((g = 0; g < GPUS; g++)); do
    # Each lane writes rows of its own (appends from several processes could interleave).
    (export CUDA_VISIBLE_DEVICES=$g LANE_ROWS="$TMP/rows.$g"; for p in ${lanes[$g]}; do bench_pair "${p%%:*}" "${p##*:}"; done) &
  done
  wait
  for ((g = 0; g < GPUS; g++)); do cat "$TMP/rows.$g" >> "$ROWS" 2>/dev/null; done
else
  for p in "${pairs[@]}"; do bench_pair "${p%%:*}" "${p##*:}"; done
fi
rm -rf "$TMP"
python3 - "$ROWS" "$LINK_GBS" <<'PY' | tee "$OUT/decode.md"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
link = float(sys.argv[2]) * 1e9
by = {}
for r in rows:
    by.setdefault((r["shape"], r.get("batch"), r["div"]), {})[r["config"]] = r
print("| shape | batch | budget | no limit | bound | auto | auto / bound | accelerate | accelerate / auto | same tokens |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---|")
for (shape, batch, div), c in sorted(by.items(), key=lambda k: (k[0][0], k[0][1] or 0, k[0][2])):
    if div == "1":
        continue
    free = by.get((shape, batch, "1"), {}).get("no limit", {})
    base, weights = free.get("token_ms"), free.get("weights_bytes")
    auto, acc = c.get("auto", {}), c.get("accelerate", {})
    a, x = auto.get("token_ms"), acc.get("token_ms")
    bound = max(base, 1000 * weights * (1 - 1 / float(div)) / link) if base and weights else None
    f = lambda v: "" if v is None else f"{v:.1f}"  # noqa: E731
    r = lambda p, q: f"{p / q:.2f}x" if p and q else ""  # noqa: E731
    same = "yes" if auto.get("digest") and auto.get("digest") == free.get("digest") else ("no" if auto.get("digest") else "")
    err = auto.get("error") or ""
    print(f"| {shape} | {batch} | weights/{div} | {f(base)} | {f(bound)} | {f(a) or err} | {r(a, bound)} | {f(x)} | {r(x, a)} | {same} |")
print()
print("Where auto's token went (its traced run, medians over the tokens after the first quarter; tracing slows it a little):")
print()
print("| shape | batch | budget | token (traced) | kernels running | idle, copies running | idle, nothing on the GPU | GB in / out a token |")
print("|---|---:|---|---:|---:|---:|---:|---:|")
for (shape, batch, div), c in sorted(by.items(), key=lambda k: (k[0][0], k[0][1] or 0, k[0][2])):
    t = c.get("auto, traced")
    if div == "1" or not t or not t.get("token_ns"):
        continue
    ms = lambda k: (t.get(k) or 0) / 1e6  # noqa: E731
    print(f"| {shape} | {batch} | weights/{div} | {ms('token_ns'):.1f} | {ms('busy_ns'):.1f} | {ms('idle_copying_ns'):.1f} | "
          f"{ms('idle_ns') - ms('idle_copying_ns'):.1f} | {(t.get('copied_in') or 0) / 1e9:.2f} / {(t.get('copied_out') or 0) / 1e9:.2f} |")
PY
