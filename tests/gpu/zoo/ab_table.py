"""The table of tests/gpu/zoo/ab.sh from its runs' files: for each row, every run of A and of B (ms a
token or a step), their medians and B/A, what must not change (the tokens' digest, the loss), and
the shim's time moving movable memory (of which getting memory for the moves, and remapping),
waiting for the GPU, and its work at launches while it tracks memory (moves included) over the whole
run (medians, seconds, from its statistics; the last only from builds that count it). Usage: python3 ab_table.py RUNS_DIR "ROWS"
"""
import json
import os
import statistics
import sys

METRIC = {"decode": ("token_ms", "digest"), "zoo": ("step_ms", "loss"), "jax": ("step_ms", "loss")}


def load(path):
    try:
        with open(path) as f:
            text = f.read().strip()
        return json.loads(text) if text else None
    except (OSError, ValueError):
        return None


def runs(d, side, row):
    kind, model, budget = row
    out = []
    n = 0
    while True:
        tag = f"{side}-{kind}-{model}-{budget}-{n}"
        if not os.path.exists(os.path.join(d, tag + ".out")):
            return out
        out.append((load(os.path.join(d, tag + ".out")), load(os.path.join(d, tag + ".stats.json"))))
        n += 1


def seconds(stats, key):
    ns = (stats or {}).get("timings_ns", {}).get(key)
    return None if ns is None else ns / 1e9  # None: a build that does not count it


def median(xs):
    return statistics.median(xs) if xs else None


def main():
    d, rows = sys.argv[1], [tuple(r.split(":")) for r in sys.argv[2].split()]
    print("| row | A (ms) | B (ms) | A median | B median | B / A | same result | A: moving (memory for it, remaps), waiting; launches (s) | B: the same |")
    print("|---|---|---|---:|---:|---:|---|---:|---:|")
    for row in rows:
        if len(row) != 3 or row[0] not in METRIC:
            print(f"| {':'.join(row)} | not a row (KIND:MODEL:BUDGET, KIND decode, zoo or jax) |")
            continue
        metric, check = METRIC[row[0]]
        cells, meds, results, timing = [], [], [], []
        for side in "AB":
            got = runs(d, side, row)
            vals = [r[metric] for r, _ in got if r and metric in r]
            failed = sum(1 for r, _ in got if not r or metric not in r)
            cells.append(", ".join(f"{v:.1f}" for v in vals) + (f" ({failed} failed)" if failed else ""))
            meds.append(median(vals))
            results.extend(str(r.get(check)) for r, _ in got if r)
            t = {k: median([v for v in (seconds(s, k) for _, s in got if s) if v is not None])
                 for k in ("swap_move_ns", "swap_backing_ns", "swap_remap_ns", "swap_wait_ns", "launch_scan_ns")}
            timing.append(("" if t["swap_move_ns"] is None else
                           f"{t['swap_move_ns']:.2f} ({t['swap_backing_ns']:.2f}, {t['swap_remap_ns']:.2f}), {t['swap_wait_ns']:.2f}") +
                          ("" if t["launch_scan_ns"] is None else f"; launches {t['launch_scan_ns']:.2f}"))
        a, b = meds
        ratio = f"{b / a:.3f}" if a and b else ""
        same = "yes" if results and len(set(results)) == 1 else ("; ".join(sorted(set(results))) or "no runs")
        fmt = lambda v: "" if v is None else f"{v:.1f}"  # noqa: E731
        print(f"| {':'.join(row)} | {cells[0]} | {cells[1]} | {fmt(a)} | {fmt(b)} | {ratio} | {same} | {timing[0]} | {timing[1]} |")
    left = os.path.join(d, "left-out")
    if os.path.exists(left):
        with open(left) as f:
            print(f"\nLeft out for lack of time: {', '.join(line.strip() for line in f if line.strip())}")


if __name__ == "__main__":
    main()
