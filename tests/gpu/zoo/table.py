"""The zoo's table (tests/gpu/zoo/bench.sh): one row per model and budget, each configuration's step
time with its ratio to the same model's step with no limit, the bound (the floor no schedule beats
at that budget on this link: policy/step_floor.h), the planner's schedule of its step, and that
schedule with every eviction copied out (memory freed before its next use too, which the bound drops
and a shim that never loses data cannot), and the ratios that matter: policy auto to the bound and
to the schedule with every eviction copied, and save_on_cpu against auto; then, from auto's traced
run, where its step's time went: kernels running, the GPU idle while copies ran (copies not
overlapped), the GPU idle with nothing to run (the host's waits), and the bytes moved each way.

  table.py zoo.jsonl
"""
import json
import sys
from collections import defaultdict

CONFIGS = ["auto", "auto, context order", "save_on_cpu", "spill", "off"]


def main(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    by = defaultdict(dict)
    for r in rows:
        by[(r["model"], r["div"])][r["config"]] = r
    seen = [k for k in CONFIGS if any(k in c for c in by.values())]
    out = ["| model | budget | no limit | auto, fits | bound | schedule | schedule, every eviction copied | " + " | ".join(seen) +
           " | auto / bound | auto / schedule copied | save_on_cpu / auto | loss (no limit; auto) |",
           "|---|---|" + "---:|" * (len(seen) + 9)]
    for (model, div), c in sorted(by.items()):
        if div == "1":
            continue
        free = by[(model, "1")].get("no limit", {})
        base = free.get("step_ms")
        b = c.get("bound", {})
        floor = (b.get("floor_ns") or 0) / 1e6
        sched = (b.get("bound_ns") or 0) / 1e6
        copied = (b.get("bound_copied_ns") or 0) / 1e6

        def cell(r):
            if not r:
                return ""
            if "error" in r:
                return "OOM" if "OutOfMemory" in r.get("error", "") else r["error"]
            ms = r.get("step_ms")
            return f"{ms:.0f} ({ms / base:.2f}x)" if ms and base else ""

        learn = c.get("auto", {}).get("step_ms")
        soc = c.get("save_on_cpu", {}).get("step_ms")
        out.append(f"| {model} | peak/{div} | {base} | {cell(by[(model, '1')].get('auto, fits'))} | " + (f"{floor:.0f} ({floor / base:.2f}x)" if floor and base else "") +
                   " | " + (f"{sched:.0f}" if sched else "") + " | " + (f"{copied:.0f}" if copied else "") + " | " +
                   " | ".join(cell(c.get(k)) for k in seen) +
                   " | " + (f"{learn / floor:.2f}x" if learn and floor else "") + " | " +
                   (f"{learn / copied:.2f}x" if learn and copied else "") + " | " +
                   (f"{soc / learn:.2f}x" if learn and soc else "") + " | " +
                   f"{free.get('loss')}; {c.get('auto', {}).get('loss')} |")
    out += ["", "Where auto's step went (its traced run; tracing slows it a little):", "",
            "| model | budget | step (traced) | kernels running | idle, copies running | idle, nothing on the GPU | GB in / out a step |",
            "|---|---|---:|---:|---:|---:|---:|"]
    for (model, div), c in sorted(by.items()):
        t = c.get("auto, traced")
        if div == "1" or not t or not t.get("measured_ns"):
            continue
        ms = lambda k: (t.get(k) or 0) / 1e6
        out.append(f"| {model} | peak/{div} | {ms('measured_ns'):.0f} | {ms('busy_ns'):.0f} | {ms('idle_copying_ns'):.0f} | "
                   f"{ms('idle_ns') - ms('idle_copying_ns'):.0f} | {(t.get('copied_in') or 0) / 1e9:.1f} / {(t.get('copied_out') or 0) / 1e9:.1f} |")
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1])
