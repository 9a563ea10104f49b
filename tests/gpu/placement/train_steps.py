"""The timing loop shared by the training benchmarks (torch_train.py, torch_gpt.py): runs `step`
(one training step, returning its loss) `steps` times, each between two synchronisations, and
prints one JSON line: `info`, the median step time after three warm-up steps, the peak memory
PyTorch saw and the last loss; or the out-of-memory error the program died of."""
import json
import math
import statistics
import time

import torch


def run(step, steps, info):
    times = []
    try:
        for _ in range(steps):
            torch.cuda.synchronize()
            t0 = time.time()
            loss = step()
            torch.cuda.synchronize()
            times.append(time.time() - t0)
    except torch.OutOfMemoryError as e:
        print(json.dumps({**info, "error": "OutOfMemoryError", "message": str(e).splitlines()[0][:160]}))
        return 3
    print(json.dumps({**info, "step_ms": round(1000 * statistics.median(times[3:]), 1),
                      "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2), "loss": round(loss.item(), 4)}))
    return 0 if math.isfinite(loss.item()) else 4
