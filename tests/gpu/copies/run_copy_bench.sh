#!/usr/bin/env bash
# Issue 5's benchmarks, shim against no shim side by side in one run on the GPU machine; plus the
# integrity check under the shim. Logs under $OUT (default ./out); a table at the end.
set -u
cd "$(dirname "$0")/../../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
B=${GMS_BUILD_DIR:-build}
SHIM=$(readlink -f "${GMS_SHIM:-$B/shim/libgpumemshim.so}")
P=tests/gpu/copies
LOG="$OUT/copies.log"
: >"$LOG"
nvcc -O2 -arch=sm_90 $P/copy_bench.cu -o "$B/copy_bench" >>"$LOG" 2>&1 || { echo "nvcc failed"; exit 1; }
# GMS_COPY_SECTIONS: which parts to run (default all): integrity oneshot s2 frameworks
want() { [[ " ${GMS_COPY_SECTIONS:-integrity oneshot s2 frameworks} " == *" $1 "* ]]; }
# GPU safety: the default policy (spill) may create managed memory if the card fills; capped.
shim() { env LD_PRELOAD="$SHIM" GPUMEMSHIM_MANAGED_LIMIT=16G GPUMEMSHIM_STATS="$OUT/copies-stats-%p.json" "$@"; }
if want integrity; then
echo "== integrity under the shim"
shim "$B/copy_bench" check 2>&1 | tee -a "$LOG" | tail -2
# Lines: driver = no shim; shim = the shim's defaults (host pool on); nopool / "shim rN" = the
# shim with GPUMEMSHIM_HOST_POOL=off (one-shot buffers really are new); staged = registration off.
fi
if want oneshot; then
echo "== one-shot copies"
# pageable: three alternating rounds of the driver and the shim (small copies are noisy: compare
# medians of runs made side by side)
for round in 1 2 3; do
  "$B/copy_bench" pageable 2>>"$LOG" | sed "s/^/driver r$round /" | tee -a "$LOG"
  shim env GPUMEMSHIM_HOST_POOL=off "$B/copy_bench" pageable 2>>"$LOG" | sed "s/^/shim   r$round /" | tee -a "$LOG"
done
for m in pinned reuse; do "$B/copy_bench" $m 2>>"$LOG" | sed "s/^/driver /" | tee -a "$LOG"; done
shim env GPUMEMSHIM_HOST_POOL=off "$B/copy_bench" reuse 2>>"$LOG" | sed "s/^/shim   /" | tee -a "$LOG"
# The defaults (the host pool on): a new buffer per copy is a recycled block
shim "$B/copy_bench" pageable 2>>"$LOG" | sed "s/^/pool   /" | tee -a "$LOG"
shim env GPUMEMSHIM_REGISTER=off GPUMEMSHIM_HOST_POOL=off "$B/copy_bench" pageable 2>>"$LOG" | sed "s/^/staged /" | tee -a "$LOG"
fi
if want s2; then
echo "== S2: PyTorch 40 MB tensors x100, five alternating rounds"
for round in 1 2 3 4 5; do
  python3 $P/s2_torch.py plain 2>>"$LOG" | sed "s/^/driver r$round /" | tee -a "$LOG"
  shim env GPUMEMSHIM_HOST_POOL=off python3 $P/s2_torch.py plain 2>>"$LOG" | sed "s/^/nopool r$round /" | tee -a "$LOG"
  shim python3 $P/s2_torch.py plain 2>>"$LOG" | sed "s/^/shim   r$round /" | tee -a "$LOG"
  python3 $P/s2_torch.py pinned 2>>"$LOG" | sed "s/^/pinned r$round /" | tee -a "$LOG"
done
# Medians over the rounds, and the ratios the issue's targets are stated in.
python3 - "$LOG" <<'PY'
import json, re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"(driver|nopool|shim|pinned)\s+r\d+ (\{.*\})$", line.strip())
    if m:
        d = json.loads(m.group(2))
        runs.setdefault((d["what"], m.group(1)), []).append(d["gbps"])
for what in sorted({w for w, _ in runs}):
    med = {k: statistics.median(v) for (w, k), v in runs.items() if w == what}
    if "driver" in med and "shim" in med and "pinned" in med:
        print(f"S2 {what}: medians GB/s {json.dumps({k: round(v, 1) for k, v in sorted(med.items())})}; "
              f"shim/driver {med['shim'] / med['driver']:.2f}x, shim/pinned {med['shim'] / med['pinned']:.2f}x")
PY
fi
if want frameworks; then
echo "== numpy through CuPy and numba, 1 GiB"
for fw in cupy numba; do
  python3 $P/fw_copies.py $fw 2>>"$LOG" | sed "s/^/driver /" | tee -a "$LOG"
  shim env GPUMEMSHIM_HOST_POOL=off python3 $P/fw_copies.py $fw 2>>"$LOG" | sed "s/^/nopool /" | tee -a "$LOG"
  shim python3 $P/fw_copies.py $fw 2>>"$LOG" | sed "s/^/shim   /" | tee -a "$LOG"
done
fi
