"""Stands in for tests/gpu/zoo/zoo.py in test_zoo_lanes.py: no GPU, no torch. Sleeps a little as a
run would, appends `MODEL CONFIG START END` to $FAKE_LOG, and prints the JSON line zoo.py prints."""
import json
import os
import random
import sys
import time

model = sys.argv[1]
config = os.environ.get("GPUMEMSHIM_POLICY", "none") + ":" + os.environ.get("GPUMEMSHIM_DEVICE_LIMIT", "-")
if "--save-on-cpu" in sys.argv:
    config += ":save_on_cpu"
if "GPUMEMSHIM_TRACE" in os.environ:
    config += ":traced"
start = time.time()
time.sleep(random.uniform(0.15, 0.4))
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(f"{model} {config} {start:.4f} {time.time():.4f}\n")
print(json.dumps({"model": model, "step_ms": 10.0, "steps_ms": [10.0] * 4, "peak_gib": 8.0, "loss": 1.0}))
