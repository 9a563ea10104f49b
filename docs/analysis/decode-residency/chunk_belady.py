"""Farthest next use (Belady) over 64 MiB chunks, from a trace's allocations, frees and launches:
the least a chunk-level planner could bring in, to set beside what the shim moved. A chunk is
resident from its first allocation's making; each launch brings its missing chunks in and evicts,
while more than BUDGET_CHUNKS are resident, the one used again farthest ahead. Counted over the
launches from 60% to 90% of the trace (past warm-up, before the end).

  python3 chunk_belady.py trace.jsonl[.gz] BUDGET_CHUNKS
"""
import bisect
import collections
import gzip
import json
import sys

C = 64 << 20


def main():
    path, budget = sys.argv[1], int(sys.argv[2])
    opener = gzip.open if path.endswith(".gz") else open
    events = sorted((e for e in map(json.loads, opener(path, "rt")) if e["type"] in ("alloc", "free", "launch")),
                    key=lambda e: e["t"])
    regions = collections.defaultdict(list)
    for e in events:
        if e["type"] == "launch":
            regions[e["seq"]] += e.get("regions", [])
    live, timeline = {}, []
    for e in events:
        if e["type"] == "alloc" and e.get("placement") == "swap":
            p = int(e["ptr"], 16)
            live[p] = e["bytes"]
            timeline.append(("alloc", range(p // C, (p + e["bytes"] - 1) // C + 1)))
        elif e["type"] == "free" and int(e["ptr"], 16) in live:
            p = int(e["ptr"], 16)
            timeline.append(("free", range(p // C, (p + live.pop(p) - 1) // C + 1)))
        elif e["type"] == "launch" and not e.get("part"):
            chunks = set()
            for r in regions[e["seq"]]:
                p = int(r, 16)
                if p in live:
                    chunks.update(range(p // C, (p + live[p] - 1) // C + 1))
            timeline.append(("launch", sorted(chunks)))
    uses = collections.defaultdict(list)
    launch_at = [i for i, (k, _) in enumerate(timeline) if k == "launch"]
    for i in launch_at:
        for c in timeline[i][1]:
            uses[c].append(i)
    lo, hi = launch_at[int(len(launch_at) * 0.6)], launch_at[int(len(launch_at) * 0.9)]

    def next_use(c, i):
        a = uses[c]
        j = bisect.bisect_right(a, i)
        return a[j] if j < len(a) else float("inf")

    count, resident, away = collections.Counter(), set(), set()
    moved = 0
    for i, (kind, chunks) in enumerate(timeline):
        counted = lo <= i < hi
        if kind == "alloc":
            for c in chunks:
                count[c] += 1
                if c not in away:
                    resident.add(c)
        elif kind == "free":
            for c in chunks:
                count[c] -= 1
                if count[c] == 0:
                    resident.discard(c)
                    away.discard(c)
        else:
            for c in chunks:
                if c in away:
                    away.discard(c)
                    resident.add(c)
                    moved += counted
            while len(resident) > budget:
                candidates = [c for c in resident if c not in chunks]
                if not candidates:
                    break
                v = max(candidates, key=lambda c: next_use(c, i))
                resident.discard(v)
                away.add(v)
    print(f"{hi and sum(1 for k, _ in timeline[lo:hi] if k == 'launch')} launches: {moved} chunks brought in, "
          f"{moved * C / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
