"""Replays the launches of a recorded resnet50 training run (refs.txt.gz, batch 128, 6 steps under
GPUMEMSHIM_POLICY=managed) against a device budget, with whole allocator segments as the unit, and
prints the bytes moved to and from the device in each step under LRU eviction and under Belady's
optimum (evict what is used again farthest in the future: no planner can move less).

  python3 simulate.py [BUDGET_GIB]     (default 6.9: a 7 GB limit less the small allocations)

refs.txt.gz lines: "A <base hex> <bytes>" a managed region appeared; "L <function> <stream>
<base hex>..." a launch and the regions its arguments point into. Recorded with dump_refs.patch
applied to shim/act/residency.cc (GMS_DEV_REFS=path).
"""
import collections
import gzip
import os
import sys

STEP = 756  # launches per training step (the period of the kernel sequence)


def load(path):
    size, launches = {}, []
    with gzip.open(path, "rt") as f:
        for line in f:
            p = line.split()
            if p[0] == "A":
                size[int(p[1], 16)] = int(p[2])
            elif p[0] == "L":
                launches.append([int(x, 16) for x in p[3:]])
    return size, launches


def simulate(size, launches, budget, policy):
    n = len(launches)
    # next use of each region after each launch, for Belady
    after, nxt = {}, [None] * n
    for i in range(n - 1, -1, -1):
        nxt[i] = {r: after.get(r, 1 << 62) for r in launches[i]}
        for r in launches[i]:
            after[r] = i
    resident, used, next_use = collections.OrderedDict(), 0, {}
    steps = n // STEP + 1
    moved_in, moved_out = [0] * steps, [0] * steps
    for i, refs in enumerate(launches):
        step = max(0, (i - n % STEP) // STEP + 1) if i >= n % STEP else 0
        for r in refs:
            next_use[r] = nxt[i][r]
        for r in refs:
            if r in resident:
                resident.move_to_end(r)
                continue
            while used + size[r] > budget:
                victims = [x for x in resident if x not in refs]
                if not victims:
                    break
                v = victims[0] if policy == "lru" else max(victims, key=lambda x: next_use.get(x, 1 << 62))
                used -= size[v]
                del resident[v]
                moved_out[step] += size[v]
            if used + size[r] <= budget:
                resident[r] = True
                used += size[r]
                moved_in[step] += size[r]
    return moved_in, moved_out


def main():
    budget = float(sys.argv[1]) if len(sys.argv) > 1 else 6.9
    size, launches = load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "refs.txt.gz"))
    print(f"{len(launches)} launches, {len(size)} regions, {sum(size.values()) / 2**30:.1f} GiB, budget {budget} GiB")
    for policy in ("lru", "belady"):
        moved_in, moved_out = simulate(size, launches, int(budget * 2**30), policy)
        steps = ", ".join(f"{a / 2**30:.1f}/{b / 2**30:.1f}" for a, b in zip(moved_in, moved_out) if a or b)
        print(f"{policy:6s} GiB to/from the device per step: {steps}")


if __name__ == "__main__":
    main()
