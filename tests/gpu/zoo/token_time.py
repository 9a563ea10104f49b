"""Where a decoding token's time goes, from a trace of tests/gpu/zoo/decode.py under the shim
(GPUMEMSHIM_TRACE): each token is an NVTX range "token" that starts and ends with a
synchronisation, so everything the GPU did for it lies inside. For the tokens after the first
quarter (the step learner's warm-up), the medians of: the token, the GPU running kernels, the GPU
idle while the shim's copies ran (copies not overlapped by a kernel), the GPU idle with nothing to
run, and the bytes the shim's copies moved in and out. Prints one JSON line.

  token_time.py TRACE
"""
import json
import statistics
import sys


def union(intervals, lo, hi):
    out = []
    for a, b in sorted(intervals):
        a, b = max(a, lo), min(b, hi)
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def total(u):
    return sum(b - a for a, b in u)


def main(path):
    tokens, kernels, copies = [], [], []
    for line in open(path):
        try:
            e = json.loads(line)
        except ValueError:
            continue
        t = e.get("type")
        if t == "range" and e.get("name") == "token":
            tokens.append((e["t"], e["end"]))
        elif t == "kernel":
            kernels.append((e["t"], e["end"]))
        elif t == "memcpy" and e.get("bytes", 0) >= 1 << 20 and e.get("copy_kind") in ("htod", "dtoh"):
            copies.append((e["t"], e["end"], e["copy_kind"], e["bytes"]))
    tokens.sort()
    rows = []
    for lo, hi in tokens[max(1, len(tokens) // 4):]:
        k = union(kernels, lo, hi)
        c = union([(a, b) for a, b, _, _ in copies], lo, hi)
        both = union(k + c, lo, hi)
        moved = lambda kind: sum(n for a, b, d, n in copies if d == kind and lo <= a < hi)  # noqa: E731
        rows.append({"token_ns": hi - lo, "busy_ns": total(k), "idle_copying_ns": total(both) - total(k),
                     "idle_ns": (hi - lo) - total(k), "copied_in": moved("htod"), "copied_out": moved("dtoh")})
    if not rows:
        print(json.dumps({"error": "no token ranges in the trace"}))
        return 1
    print(json.dumps({key: statistics.median(r[key] for r in rows) for key in rows[0]} | {"tokens": len(rows)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
