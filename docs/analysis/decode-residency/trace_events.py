"""A decoding trace (GPUMEMSHIM_TRACE, shim/trace/FORMAT.md) as the event list replay_planner.cc
reads, one event a line, in the program's order (host time):

  m BASE BYTES      a movable allocation made (placement swap: what the step learner sees)
  f BASE            a free
  r                 an NVTX range began (decode.py pushes "token" per token)
  l KEY N BASES...  a launch: its kernel's name hashed (the shim keys the learner by name, since
                    cuDNN hands out a new handle for the same kernel every token) and the
                    allocations it uses

The k-th launch on the program's stream is the k-th CUPTI kernel record on it (FORMAT.md), which
gives each launch its name. Usage: python3 trace_events.py trace.jsonl[.gz] STREAM > events
(STREAM: the CUPTI stream id of the program's launches; the tool prints the candidates if wrong).
"""
import collections
import gzip
import json
import sys
import zlib


def main():
    path = sys.argv[1]
    opener = gzip.open if path.endswith(".gz") else open
    ev = [json.loads(line) for line in opener(path, "rt")]
    launches = {}
    for e in ev:
        if e["type"] != "launch":
            continue
        if e.get("part"):
            launches[e["seq"]]["regions"] += e.get("regions", [])
        else:
            launches[e["seq"]] = dict(e, regions=list(e.get("regions", [])))
    launches = [launches[k] for k in sorted(launches)]
    per_stream = collections.Counter(e["stream"] for e in ev if e["type"] == "kernel")
    stream = int(sys.argv[2]) if len(sys.argv) > 2 else per_stream.most_common(1)[0][0]
    kernels = sorted((e for e in ev if e["type"] == "kernel" and e["stream"] == stream), key=lambda e: e["t"])
    if len(kernels) != len(launches):
        sys.exit(f"{len(launches)} launches, {len(kernels)} kernels on stream {stream}; kernels by stream: {dict(per_stream)}")
    out = []
    for e in ev:
        if e["type"] == "alloc" and e.get("placement") == "swap":
            out.append((e["t"], 0, f"m {int(e['ptr'], 16)} {e['bytes']}"))
        elif e["type"] == "free":
            out.append((e["t"], 0, f"f {int(e['ptr'], 16)}"))
        elif e["type"] == "range":
            out.append((e["t"], 0, "r"))
    for launch, kernel in zip(launches, kernels):
        bases = " ".join(str(int(r, 16)) for r in launch["regions"])
        out.append((launch["t"], 1, f"l {zlib.crc32(kernel['name'].encode())} {len(launch['regions'])} {bases}"))
    out.sort(key=lambda x: (x[0], x[1]))
    for _, _, line in out:
        print(line)


if __name__ == "__main__":
    main()
