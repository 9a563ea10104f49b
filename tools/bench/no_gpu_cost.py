#!/usr/bin/env python3
"""What the preloaded shim costs a process that does no GPU work (issue 28), CPU only.

Two measurements, each variant run in turn in every round (alternating, so that a machine getting
busier or quieter affects all alike), reported as medians:
- exec: a shell loop starting /bin/true 300 times, under LD_PRELOAD as `gpumemshim run -- bash
  train.sh` gives every child; the cost per exec;
- churn: gms_bench_malloc_churn, 8 threads replacing large blocks (16 B to 4 MiB, every byte
  written); wall time and peak resident memory.
Variants: no shim; the shim (host pool at its default); the shim with GPUMEMSHIM_HOST_POOL=off; and
with --before PATH another build of the shim (the one before a change), side by side.

    python3 tools/bench/no_gpu_cost.py --shim build/shim/libgpumemshim.so \\
        --churn build/tools/bench/gms_bench_malloc_churn [--before OTHER.so] [--rounds 7]
Prints a Markdown table (docs/benchmarks.md).
"""
import argparse
import json
import os
import statistics
import subprocess
import time

EXECS = 300
LOOP = f"i=0; while [ $i -lt {EXECS} ]; do /bin/true; i=$((i+1)); done"


def env_for(preload, pool_off=False):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEMSHIM_") and k != "LD_PRELOAD"}
    if preload:
        env["LD_PRELOAD"] = preload
    if pool_off:
        env["GPUMEMSHIM_HOST_POOL"] = "off"
    return env


def exec_ms(env):
    t0 = time.perf_counter()
    subprocess.run(["sh", "-c", LOOP], env=env, check=True)
    return (time.perf_counter() - t0) * 1000 / EXECS


def churn(env, program, threads, ops):
    out = subprocess.run([program, str(threads), str(ops)], env=env, check=True, capture_output=True, text=True)
    doc = json.loads(out.stdout)
    return doc["seconds"], doc["max_rss_kib"] / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--churn", required=True, help="gms_bench_malloc_churn")
    ap.add_argument("--before", help="another build of the shim, measured alongside")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--ops", type=int, default=1500)
    args = ap.parse_args()
    variants = [("no shim", env_for(None)), ("shim, host pool on (default)", env_for(args.shim)),
                ("shim, host pool off", env_for(args.shim, pool_off=True))]
    if args.before:
        variants += [("before: shim, host pool on", env_for(args.before)),
                     ("before: shim, host pool off", env_for(args.before, pool_off=True))]
    execs = {name: [] for name, _ in variants}
    times = {name: [] for name, _ in variants}
    rss = {name: [] for name, _ in variants}
    for _ in range(args.rounds):
        for name, env in variants:
            execs[name].append(exec_ms(env))
            s, r = churn(env, args.churn, args.threads, args.ops)
            times[name].append(s)
            rss[name].append(r)
    med = {name: (statistics.median(execs[name]), statistics.median(times[name]), statistics.median(rss[name]))
           for name, _ in variants}
    base = med["no shim"]
    print(f"| variant | per exec | added per exec | churn time | vs no shim | churn peak RSS | vs no shim |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, _ in variants:
        e, t, r = med[name]
        print(f"| {name} | {e:.3f} ms | {e - base[0]:+.3f} ms | {t:.2f} s | {t / base[1]:.2f}x | {r:.0f} MiB | "
              f"{r / base[2]:.2f}x |")
    print(f"\nmedians of {args.rounds} alternating rounds; exec: {EXECS} x /bin/true from sh; churn: "
          f"{args.threads} threads x {args.ops} replacements")


if __name__ == "__main__":
    main()
