#!/usr/bin/env python3
"""Offline: which evicted bytes of a recorded step are freed before their next use.

Allocation-level farthest next use (Belady) over a recorded step timeline (tests/data/timelines,
policy/timeline.h) unrolled over five steps, budget in MiB; prints GB a step (steps 3 to 5) brought
in, copied out, and copied out of memory freed before its next use (which the schedule's bound
drops and a shim that never loses data must copy), then the allocations behind the last, largest
first. Results: docs/design/schedule.md, "What a shim that never drops can reach".

  python3 docs/analysis/training-residency/dead_bytes.py tests/data/timelines/llama.tl 9536
"""
import sys, collections, heapq
fn, budget_mib = sys.argv[1], int(sys.argv[2])
B = budget_mib << 20
allocs = {}; kernels = []
for line in open(fn):
    if line.startswith('#') or not line.strip(): continue
    w = line.split()
    if w[0] == 'timeline': P = int(w[2])
    elif w[0] == 'alloc':
        born = -1 if w[3] == 'persistent' else int(w[3]); died = int(w[4]) if len(w) > 4 else None
        allocs[int(w[1])] = (int(w[2]), born, died)
    elif w[0] == 'kernel':
        kernels.append((int(w[2]), int(w[3]), [int(x) for x in w[4:]]))
STEPS = 5
# instances: (a, s) ; persistent (a,-9)
def inst_at(a, g):
    size, born, died = allocs[a]
    if born == -1: return (a, -9)
    s, p = divmod(g, P)
    if born <= p < died: return (a, s)
    if p < died - P: return (a, s - 1)
    return None
# events per global position: frees before kernel, makes before kernel
uses = collections.defaultdict(list)
seq = []
for s in range(STEPS):
    for p, (fnid, dur, al) in enumerate(kernels):
        g = s * P + p
        ins = set()
        for a in al:
            i = inst_at(a, g)
            if i: ins.add(i)
        seq.append(ins)
        for i in ins: uses[i].append(g)
def free_pos(i):
    a, s = i; size, born, died = allocs[a]
    return None if s == -9 else s * P + died
def born_pos(i):
    a, s = i; size, born, died = allocs[a]
    return -1 if s == -9 else s * P + born
import bisect
def next_use(i, g):
    u = uses[i]; k = bisect.bisect_right(u, g)
    return u[k] if k < len(u) else None
resident = {}  # inst -> size
alive = set()
stats = collections.Counter(); dead_ev = collections.Counter(); evlog = []
# births/deaths per position
births = collections.defaultdict(list); deaths = collections.defaultdict(list)
for a, (size, born, died) in allocs.items():
    if born == -1: continue
    for s in range(-1, STEPS):
        b, d = s * P + born, s * P + died
        if d <= 0 and s < 0: continue
        births[max(b, 0)].append((a, s)); deaths[d].append((a, s))
for a, (size, born, died) in allocs.items():
    if born == -1: resident[(a, -9)] = size
evicted = {}  # inst -> pos evicted
for g, ins in enumerate(seq):
    for i in deaths[g]:
        resident.pop(i, None)
        if i in evicted:
            if g // P >= 2: stats['dead_out'] += allocs[i[0]][0]; dead_ev[(allocs[i[0]][0], g - evicted[i])] += 1
            del evicted[i]
    for i in births[g]:
        pass  # made lazily at first use
    need = [i for i in ins if i not in resident]
    for i in need:
        if i in evicted:
            if g // P >= 2: stats['in'] += allocs[i[0]][0]
            del evicted[i]
        resident[i] = allocs[i[0]][0]
    tot = sum(resident.values())
    if tot > B:
        cands = sorted((i for i in resident if i not in ins), key=lambda i: -(next_use(i, g) if next_use(i, g) is not None else 10**12))
        for i in cands:
            if tot <= B: break
            nu = next_use(i, g); fp = free_pos(i)
            tot -= resident.pop(i); evicted[i] = g
            if g // P >= 2:
                stats['out'] += allocs[i[0]][0]
                if nu is None or (fp is not None and fp <= nu): stats['out_dies'] += allocs[i[0]][0]
                evlog.append((g, i, nu, fp))
n = STEPS - 2
print({k: round(v / n / 1e9, 2) for k, v in stats.items()}, 'GB a step')
# who are the dying evictions: by alloc id
by = collections.Counter()
for g, i, nu, fp in evlog:
    if nu is None or (fp is not None and fp <= nu):
        a = i[0]; size, born, died = allocs[a]
        by[(a, size, born, died, (g % P), len(uses[i]) and (uses[i][-1] % P))] += 1
tot = 0
for (a, size, born, died, gp, lastuse), c in sorted(by.items(), key=lambda kv: -kv[0][1] * kv[1])[:25]:
    print(f"alloc {a} {size/2**20:.1f} MiB born {born} died {died} evicted at {gp} last use {lastuse} x{c}")
