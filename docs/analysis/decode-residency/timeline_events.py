"""A recorded training step (tests/data/timelines/*.tl, policy/timeline.h) unrolled into the event
list replay_planner.cc reads (see trace_events.py): its persistent allocations made first, then
STEPS steps, each an `r` line, then per kernel position the frees and allocations at it and the
launch with the instances it uses. Addresses are fresh for every instance (2 MiB aligned), so
chunks hold what the allocator packed together only by size. Prints the step's peak (MiB) on
stderr: budgets of peak / 1.5 are what the zoo runs at.
Usage: python3 timeline_events.py gpt.tl [STEPS=14] > events
"""
import sys

ALIGN = 2 << 20


def main():
    allocs, kernels, period = [], [], 0
    for line in open(sys.argv[1]):
        t = line.split()
        if not t or t[0].startswith("#"):
            continue
        if t[0] == "timeline":
            period = int(t[2])
        elif t[0] == "alloc":
            born = -1 if t[3] == "persistent" else int(t[3])
            allocs.append((int(t[2]), born, int(t[4]) if len(t) > 4 else 0))
        elif t[0] == "kernel":
            kernels.append((int(t[2]), [int(x) for x in t[4:]]))
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 14
    peak = max(sum(b for b, born, died in allocs if born < 0 or born <= p < died or p < died - period)
               for p in range(period))
    print(f"peak {peak >> 20} MiB", file=sys.stderr)
    top = [1 << 40]

    def new(b):
        p = top[0]
        top[0] += (b + ALIGN - 1) // ALIGN * ALIGN
        return p

    out, inst = [], {}  # (alloc, step) -> address; step -1: persistent
    for i, (b, born, _) in enumerate(allocs):
        if born < 0:
            inst[(i, -1)] = new(b)
            out.append(f"m {inst[(i, -1)]} {b}")
    for s in range(steps):
        out.append("r")
        for p in range(period):
            for i, (b, born, died) in enumerate(allocs):
                for back in (0, 1):  # freed at this position of its own step or of the next
                    if born >= 0 and died == p + back * period and (i, s - back) in inst:
                        out.append(f"f {inst.pop((i, s - back))}")
            for i, (b, born, _) in enumerate(allocs):
                if born == p:
                    inst[(i, s)] = new(b)
                    out.append(f"m {inst[(i, s)]} {b}")
            fn, uses = kernels[p]
            ptrs = []
            for a in uses:
                born = allocs[a][1]
                key = (a, -1) if born < 0 else (a, s) if born <= p else (a, s - 1)
                if key in inst:
                    ptrs.append(inst[key])
            out.append(f"l {fn + 1000} {len(ptrs)} " + " ".join(map(str, ptrs)))
    print("\n".join(out))


if __name__ == "__main__":
    main()
