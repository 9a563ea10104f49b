"""The timing loop shared by the training benchmarks (torch_train.py, torch_gpt.py): runs `step`
(one training step, returning its loss) `steps` times, each between two synchronisations, and
prints one JSON line: `info`, the median step time after `warmup` steps (3 unless told), every step's time
(`steps_ms`: a median hides steps that are slow in turns), the peak memory PyTorch saw and the
last loss; or the out-of-memory error the program died of. GMS_STEP_MARKS=1 writes a line to
stderr as each step starts, to place the shim's log lines (GPUMEMSHIM_LOG=info) among the steps.
GMS_STEP_SYNC=window synchronises only before step `warmup` and after the last: `step_ms` is then
the mean step from `warmup` on (`steps_ms` the host's time per step), as a training loop runs that
never waits for the whole device: work a step leaves queued (the shim's own copies too) overlaps
the next one instead of being waited for at its end."""
import json
import math
import os
import statistics
import sys
import time

import torch


def run(step, steps, info, warmup=3):
    times = []
    window = os.environ.get("GMS_STEP_SYNC") == "window"
    first = min(warmup, steps - 1)
    try:
        marks = os.environ.get("GMS_STEP_MARKS") == "1"
        for n in range(steps):
            if not window or n == first:
                torch.cuda.synchronize()
            if n == first:
                start = time.time()
            if marks:
                print(f"train_steps: step {n}", file=sys.stderr, flush=True)
            t0 = time.time()
            loss = step()
            if not window:
                torch.cuda.synchronize()
            times.append(time.time() - t0)
        torch.cuda.synchronize()
        mean = (time.time() - start) / (steps - first)
    except torch.OutOfMemoryError as e:
        print(json.dumps({**info, "error": "OutOfMemoryError", "message": str(e).splitlines()[0][:160]}))
        return 3
    median = statistics.median(times[first:])
    print(json.dumps({**info, "step_ms": round(1000 * (mean if window else median), 1), "mean_ms": round(1000 * mean, 1),
                      "steps_ms": [round(1000 * t, 1) for t in times],
                      "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2), "loss": round(loss.item(), 4)}))
    return 0 if math.isfinite(loss.item()) else 4
