"""Shared by the framework scripts (fw_torch.py, fw_cupy.py, fw_numba.py).

Each script runs N identical iterations and prints one JSON line on stdout:
  {"framework": ..., "iterations": N, "checksum": <sha256 of every result>,
   "per_iteration": {<stats key>: <count each iteration adds>}}
The line is deterministic, so stdout under the shim must equal stdout without it. The keys of
"per_iteration" are flattened paths into the shim's JSON statistics (see flatten_stats in
test_gpu.py): test_gpu.py runs a script with N and 2N iterations under the shim and checks that
the difference of the two runs' statistics is exactly N times these counts; start-up work (imports,
context creation, JIT compilation, module loading) is the same in both runs and cancels out.
"""
import json
import sys


def iterations_from_argv(default=10):
    if len(sys.argv) > 2:
        sys.exit(f"usage: {sys.argv[0]} [iterations]")
    n = int(sys.argv[1]) if len(sys.argv) == 2 else default
    if not 1 <= n <= 10000:  # bounded: these run on a shared GPU
        sys.exit("iterations must be within 1..10000")
    return n


def per_iteration(*, allocs, frees, htod, dtoh, launches, buffer_bytes):
    """What one iteration adds to the shim's statistics, when every device buffer has the same size
    and every copy moves one whole buffer between the device and pageable host memory."""
    copies = htod + dtoh
    return {
        "families.mem_alloc.calls": allocs,
        "families.mem_alloc.bytes": allocs * buffer_bytes,
        "families.mem_alloc.errors": 0,
        "families.mem_free.calls": frees,
        "families.mem_free.bytes": frees * buffer_bytes,
        "families.mem_free.errors": 0,
        "families.host_alloc.calls": 0,
        "families.host_free.calls": 0,
        "families.host_register.calls": 0,
        "families.mem_alloc_managed.calls": 0,
        "families.memcpy.calls": copies,
        "families.memcpy.bytes": copies * buffer_bytes,
        "families.memcpy.errors": 0,
        "families.memset.calls": 0,
        "families.launch.calls": launches,
        "families.launch.errors": 0,
        "launches_total": launches,
        "copies_by_direction.htod.calls": htod,
        "copies_by_direction.htod.bytes": htod * buffer_bytes,
        "copies_by_direction.dtoh.calls": dtoh,
        "copies_by_direction.dtoh.bytes": dtoh * buffer_bytes,
        "copies_by_direction.dtod.calls": 0,
        "copies_by_direction.htoh.calls": 0,
        "copies_by_host_kind.pageable.calls": copies,
        "copies_by_host_kind.pageable.bytes": copies * buffer_bytes,
        "copies_by_host_kind.pinned.calls": 0,
        "copies_by_host_kind.managed.calls": 0,
        "anomalies.unknown_frees": 0,
        "anomalies.stale_regions": 0,
    }


def emit(framework, iterations, digest, expected):
    print(json.dumps({"framework": framework, "iterations": iterations, "checksum": digest.hexdigest(),
                      "per_iteration": expected}, sort_keys=True), flush=True)
