"""Where the GPU's time goes in each training step of a gpumemshim trace (GPUMEMSHIM_TRACE, with
CUPTI): kernels, copies to the host, copies to the device, how much of each overlaps the others,
and a strip of 5 ms bins (each digit: tenths of the bin that kind kept busy, 0 to 9).

  python3 overlap.py TRACE.jsonl[.gz] [MIN_KERNELS]

A step is a stretch of GPU work between two idle gaps of over 3 ms (the training loops here
synchronise at each step's start); stretches with fewer than MIN_KERNELS kernels (default 500) are
skipped: warm-up, start-up. The copy kinds are CUPTI's, so the shim's own moves count here too.
"""
import gzip
import json
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        events = [json.loads(line) for line in f]
    return sorted((e for e in events if e.get("type") in ("kernel", "memcpy", "memset")), key=lambda e: e["t"])


def merge(spans):
    out = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def total(spans):
    return sum(e - s for s, e in spans)


def overlap(a, b):
    i = j = t = 0
    while i < len(a) and j < len(b):
        t += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return t


def steps(work, gap_ns=3e6):
    busy = merge([(e["t"], e["end"]) for e in work])
    cuts = [busy[0][0]] + [busy[k + 1][0] for k in range(len(busy) - 1) if busy[k + 1][0] - busy[k][1] > gap_ns]
    cuts.append(busy[-1][1] + 1)
    return list(zip(cuts, cuts[1:]))


def main():
    path = sys.argv[1]
    min_kernels = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    work = load(path)
    if not work:
        sys.exit(f"{path}: no kernel or copy records (was CUPTI on? see the header's 'cupti')")
    ms = 1e6
    for a, b in steps(work):
        w = [e for e in work if a <= e["t"] < b]
        kernels = merge([(e["t"], e["end"]) for e in w if e["type"] == "kernel"])
        if sum(1 for e in w if e["type"] == "kernel") < min_kernels:
            continue
        out = [e for e in w if e["type"] == "memcpy" and e.get("copy_kind") == "dtoh"]
        inn = [e for e in w if e["type"] == "memcpy" and e.get("copy_kind") == "htod"]
        o, i = merge([(e["t"], e["end"]) for e in out]), merge([(e["t"], e["end"]) for e in inn])
        gib = lambda es: sum(e.get("bytes", 0) for e in es) / 2**30
        print(f"step at {(a - work[0]['t']) / ms:.0f} ms: {(b - a) / ms:.1f} ms, GPU busy {total(merge([(e['t'], e['end']) for e in w])) / ms:.1f}; "
              f"kernels {total(kernels) / ms:.1f}; to host {total(o) / ms:.1f} ({gib(out):.2f} GiB); to device {total(i) / ms:.1f} ({gib(inn):.2f} GiB); "
              f"overlaps: kernels and to host {overlap(kernels, o) / ms:.1f}, kernels and to device {overlap(kernels, i) / ms:.1f}, "
              f"the two directions {overlap(o, i) / ms:.1f}")
        strip = []
        for t in range(int(a), int(b), int(5 * ms)):
            bin_ = [[t, t + 5 * ms]]
            strip.append("".join(str(min(9, int(10 * overlap(x, bin_) / (5 * ms)))) for x in (kernels, o, i)))
        print("  5 ms bins (kernels, to host, to device):", " ".join(strip))


if __name__ == "__main__":
    main()
