#!/usr/bin/env python3
"""Side-by-side benchmarks of the shim: each benchmark binary is run with and without
LD_PRELOAD=libgpumemshim.so in one session, alternating (no shim first on even repetitions, shim
first on odd ones, so drift hits both sides alike); the medians and their ratio are reported.

  empty kernel launches      gms_bench_cuda launch   (needs a GPU)   target: under 3% added
  cudaMalloc+cudaFree 1 MiB  gms_bench_cuda alloc    (needs a GPU)   reported only
  malloc+free of 64 bytes    gms_bench_malloc        (CPU only)      target: under 10 ns added per pair
  the same, instructions     valgrind --tool=callgrind, only the loop counted (when valgrind exists)

Prints a Markdown table at the end (and writes it to --markdown). Exit status: 0 when every
benchmark that could run ran (targets missed are reported, not failures), 1 when one failed.
Environment: GMS_SHIM, GMS_BUILD_DIR (see ../gpu_env.py).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import gpu_env  # noqa: E402


class BenchError(Exception):
    pass


def env_for(shim):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEMSHIM_") and k != "LD_PRELOAD"}
    env["GPUMEMSHIM_LOG"] = "warn"
    # The cost of observing: no placement (the default, spill, adds a budget check per allocation).
    env["GPUMEMSHIM_POLICY"] = "off"
    if shim:
        env["LD_PRELOAD"] = shim
    return env


def run_json(argv, shim, timeout, wrapper=()):
    """Runs argv (under wrapper, e.g. valgrind) and returns (last JSON line of stdout, stderr)."""
    cmd = list(wrapper) + list(argv)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env_for(shim), timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BenchError(f"`{' '.join(cmd)}` ran past {timeout} s")
    if r.returncode != 0:
        raise BenchError(f"`{' '.join(cmd)}` {'with' if shim else 'without'} the shim exited with "
                         f"{r.returncode}: {r.stderr.strip()[-600:]}")
    for line in reversed(r.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line), r.stderr
    raise BenchError(f"`{' '.join(cmd)}` printed no result line")


def side_by_side(argv, shim, reps, timeout, log):
    """Median of `value` without and with the shim, over reps alternating runs of each."""
    values = {False: [], True: []}
    for rep in range(reps):
        for with_shim in ((False, True) if rep % 2 == 0 else (True, False)):
            result, _ = run_json(argv, shim if with_shim else None, timeout)
            values[with_shim].append(float(result["value"]))
            log(f"  rep {rep + 1}/{reps} {'shim   ' if with_shim else 'no shim'}: {result['value']} {result['unit']}"
                f"  rounds {result.get('rounds')}")
    return statistics.median(values[False]), statistics.median(values[True])


def callgrind_per_pair(binary, shim, pairs, timeout, log):
    """Instructions per malloc+free pair inside the benchmark loop only, under callgrind."""
    valgrind = shutil.which("valgrind")
    has_macros = subprocess.run([binary, "--has-callgrind-macros"], capture_output=True, text=True,
                                timeout=30).stdout.strip() == "1"
    with tempfile.TemporaryDirectory(prefix="gms-callgrind-") as tmp:
        opts = [valgrind, "--tool=callgrind", f"--callgrind-out-file={tmp}/callgrind.out.%p"]
        # With the client macros only the timed loop is instrumented; without them, collect only
        # inside the loop function (which then also counts its warm-up call).
        opts += ["--instr-atstart=no"] if has_macros else ["--toggle-collect=gms_bench_malloc_loop"]
        result, err = run_json([binary, "--callgrind", str(pairs)], shim, timeout, wrapper=opts)
    m = re.search(r"Collected\s*:\s*([\d,]+)", err) or re.search(r"I\s+refs:\s*([\d,]+)", err)
    if not m:
        raise BenchError(f"callgrind printed no instruction count: {err.strip()[-400:]}")
    total = int(m.group(1).replace(",", ""))
    counted = result["pairs"] if has_macros else result["toggle_pairs"]
    log(f"  callgrind {'shim   ' if shim else 'no shim'}: {total} instructions for {counted} pairs "
        f"({'CALLGRIND_START/STOP' if has_macros else '--toggle-collect'})")
    return total / counted


def fmt(v, digits=1):
    return "-" if v is None else f"{v:,.{digits}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5, help="runs of each side per benchmark (default 5)")
    ap.add_argument("--markdown", help="also write the final table to this file")
    ap.add_argument("--quick", action="store_true", help="fewer launches, pairs and repetitions (smoke test)")
    args = ap.parse_args()
    reps = max(1, min(args.reps, 21))

    shim = os.path.abspath(gpu_env.shim_path())
    bench_dir = os.path.join(gpu_env.gpu_bin_dir(), "bench")
    cuda_bin = os.path.join(bench_dir, "gms_bench_cuda")
    malloc_bin = os.path.join(bench_dir, "gms_bench_malloc")
    no_gpu = gpu_env.gpu_unavailable_reason()

    def log(msg):
        print(msg, flush=True)

    rows, failed = [], False
    log(f"shim: {shim}\nbenchmarks: {bench_dir}\nGPU: {no_gpu or 'available'}\nrepetitions per side: {reps}")
    if not os.path.isfile(shim):
        log(f"the shim is not built ({shim}): nothing to compare")
        return 1

    def row(name, unit, no, yes, target, met, added=None, added_unit=None, note=""):
        ratio = yes / no if no and yes is not None else None
        rows.append({"name": name, "unit": unit, "no": no, "shim": yes, "ratio": ratio, "added": added,
                     "added_unit": added_unit, "target": target, "met": met, "note": note})

    def skipped(name, why):
        rows.append({"name": name, "skipped": why})

    launches, pairs, cuda_pairs = (20000, 1000000, 1000) if args.quick else (200000, 10000000, 5000)

    # (a) empty kernel launches
    name = f"empty kernel launch, {launches // 1000}k per round (ns/launch)"
    if no_gpu:
        skipped(name, f"no GPU ({no_gpu})")
    elif not os.path.isfile(cuda_bin):
        skipped(name, f"{cuda_bin} not built (no CUDA compiler at configure time?)")
    else:
        log(f"\n== {name}")
        try:
            no, yes = side_by_side([cuda_bin, "launch", str(launches), "3"], shim, reps, 120, log)
            ratio = yes / no
            row(name, "ns", no, yes, "< 3% added (ratio < 1.03)", ratio < 1.03,
                added=(ratio - 1) * 100, added_unit="%")
        except BenchError as e:
            failed = True
            skipped(name, f"FAILED: {e}")

    # (b) cudaMalloc + cudaFree of 1 MiB
    name = "cudaMalloc+cudaFree 1 MiB (ns/pair)"
    if no_gpu:
        skipped(name, f"no GPU ({no_gpu})")
    elif not os.path.isfile(cuda_bin):
        skipped(name, f"{cuda_bin} not built")
    else:
        log(f"\n== {name}")
        try:
            no, yes = side_by_side([cuda_bin, "alloc", str(cuda_pairs), "3"], shim, reps, 120, log)
            row(name, "ns", no, yes, "reported only", None, added=yes - no, added_unit="ns")
        except BenchError as e:
            failed = True
            skipped(name, f"FAILED: {e}")

    # (c) 64-byte malloc + free: time, then instructions under callgrind
    name = "malloc+free 64 B (ns/pair)"
    if not os.path.isfile(malloc_bin):
        skipped(name, f"{malloc_bin} not built")
    else:
        log(f"\n== {name}")
        try:
            no, yes = side_by_side([malloc_bin, str(pairs), "5"], shim, reps, 120, log)
            row(name, "ns", no, yes, "< 10 ns added", (yes - no) < 10, added=yes - no, added_unit="ns")
        except BenchError as e:
            failed = True
            skipped(name, f"FAILED: {e}")
        name = "malloc+free 64 B (instructions/pair, callgrind)"
        if not shutil.which("valgrind"):
            skipped(name, "valgrind not found")
        else:
            log(f"\n== {name}")
            try:
                cg_pairs = 20000 if args.quick else 100000
                no = callgrind_per_pair(malloc_bin, None, cg_pairs, 300, log)
                yes = callgrind_per_pair(malloc_bin, shim, cg_pairs, 300, log)
                row(name, "instr", no, yes, "reported only", None, added=yes - no, added_unit="instr")
            except BenchError as e:
                failed = True
                skipped(name, f"FAILED: {e}")

    lines = ["| benchmark | no shim | shim | ratio | added | target | met |",
             "| --- | ---: | ---: | ---: | ---: | --- | --- |"]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['name']} | - | - | - | - | {r['skipped']} | - |")
            continue
        met = "-" if r["met"] is None else ("yes" if r["met"] else "NO")
        added = "-" if r["added"] is None else f"{r['added']:+,.2f} {r['added_unit']}"
        lines.append(f"| {r['name']} | {fmt(r['no'], 2)} | {fmt(r['shim'], 2)} | {fmt(r['ratio'], 3)} | {added} "
                     f"| {r['target']} | {met} |")
    table = "\n".join(lines)
    print("\n" + table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
