#!/usr/bin/env python3
"""Offline: one step of a trace (GPUMEMSHIM_TRACE) in time bins, and what paced it.

A step runs from one occurrence of a marker to the next: an NVTX range's name, or the start of a
kernel whose name starts with the marker (one seen once a step). Prints, for step STEP:
  bins   per bin of BIN ms: share of the bin with a kernel running, GB copied in and out (CUPTI's
         records of copies over 1 MiB, spread over their time), GB the shim decided to evict and
         to bring in, launches queued;
  waits  for each eviction decided, whether the GPU had yet to run its victim's last use (the
         kernel of the last launch the trace saw use the chunk, by correlation id), and how soon
         the program launched again;
  gaps   the host's gaps over 2 ms between the program's events, with the events around them.
Results: docs/design/schedule.md, "The step by phase (2026-11-28, ninth session)".

  python3 docs/analysis/training-residency/step_phases.py TRACE.jsonl[.gz] MARKER STEP [bins|waits|gaps] [BIN]
  e.g. ... llama-1.5.jsonl.gz cub::DeviceRadixSort 12 bins 10
"""
import bisect
import collections
import gzip
import json
import sys

CHUNK = 64 << 20


def load(path):
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rt') as f:
        return [json.loads(line) for line in f if line.strip()]


def step_bounds(ev, marker, step):
    marks = sorted([e['t'] for e in ev if e['type'] == 'range' and e.get('name') == marker] or
                   [e['t'] for e in ev if e['type'] == 'kernel' and e['name'].startswith(marker)])
    if step + 1 >= len(marks):
        sys.exit(f"step_phases: {len(marks)} markers '{marker}': no step {step}")
    return marks[step], marks[step + 1]


def bins(ev, t0, t1, width_ms):
    width = width_ms * 1e6
    rows = [collections.Counter() for _ in range(int((t1 - t0) / width) + 1)]

    def spread(a, b, key, per_ns):
        a, b = max(a, t0), min(b, t1)
        while a < b:
            i = int((a - t0) / width)
            e = min(b, t0 + (i + 1) * width)
            rows[i][key] += (e - a) * per_ns
            a = e

    for e in ev:
        if e['type'] == 'memcpy' and e['bytes'] > 1 << 20:
            spread(e['t'], e['end'], e['copy_kind'], e['bytes'] / max(e['end'] - e['t'], 1))
        elif e['type'] == 'kernel':
            spread(e['t'], e['end'], 'kernel', 1)
        elif t0 <= e.get('t', -1) < t1 and e['type'] in ('decision', 'launch'):
            r = rows[int((e['t'] - t0) / width)]
            if e['type'] == 'launch':
                r['launches'] += 0 if e.get('part') else 1
            elif e['what'] in ('evict', 'prefetch'):
                r[e['what']] += e['bytes']
    print('ms      kernels  in GB  out GB | decided: evict GB  bring in GB  launches')
    for i, r in enumerate(rows):
        print(f"{i * width_ms:5.0f}   {100 * r['kernel'] / width:5.0f}%  {r['htod'] / 1e9:5.2f}  {r['dtoh'] / 1e9:6.2f} |"
              f"          {r['evict'] / 1e9:5.2f}        {r['prefetch'] / 1e9:5.2f}  {r['launches']:8d}")


def waits(ev, t0, t1):
    kernel_end = {e['correlation']: e['end'] for e in ev if e['type'] == 'kernel'}
    last_use, launches, decided = {}, [], collections.OrderedDict()
    for e in ev:
        if e['type'] == 'launch':
            launches.append(e['t'])
            for r in e.get('regions', []):
                last_use[int(r, 16) // CHUNK] = e['seq']
        elif e['type'] == 'decision' and e['what'] == 'evict' and t0 <= e['t'] < t1:
            end = kernel_end.get(last_use.get(int(e['ptr'], 16) // CHUNK))
            decided.setdefault(round((e['t'] - t0) / 1e6), []).append((e['t'], end))
    launches.sort()
    for ms, group in decided.items():
        t = group[-1][0]
        later = [(end - t) / 1e6 for _, end in group if end and end > t]
        i = bisect.bisect_right(launches, t)
        again = (launches[i] - t) / 1e6 if i < len(launches) else float('nan')
        print(f"{ms:5d} ms: {len(group):3d} evictions, {len(later)} with the victim's last use still to run"
              f" (up to {max(later, default=0):.1f} ms later); next launch {again:.1f} ms after")


def gaps(ev, t0, t1):
    kinds = ('launch', 'alloc', 'free', 'decision', 'copy', 'register')
    host = [e for e in ev if e['type'] in kinds and t0 <= e['t'] < t1 and not e.get('part')]
    for a, b in zip(host, host[1:]):
        if b['t'] - a['t'] > 2e6:
            print(f"{(a['t'] - t0) / 1e6:7.1f} to {(b['t'] - t0) / 1e6:7.1f} ms ({(b['t'] - a['t']) / 1e6:.1f}): after "
                  f"{a['type']} {a.get('what', '')} {a.get('bytes', '')}, before {b['type']} {b.get('what', '')}")


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    ev = load(sys.argv[1])
    t0, t1 = step_bounds(ev, sys.argv[2], int(sys.argv[3]))
    what = sys.argv[4] if len(sys.argv) > 4 else 'bins'
    print(f"step {sys.argv[3]}: {(t1 - t0) / 1e6:.1f} ms")
    if what == 'bins':
        bins(ev, t0, t1, float(sys.argv[5]) if len(sys.argv) > 5 else 10)
    elif what == 'waits':
        waits(ev, t0, t1)
    elif what == 'gaps':
        gaps(ev, t0, t1)
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main()
