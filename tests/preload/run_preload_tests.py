#!/usr/bin/env python3
"""Preload tests: the real libgpumemshim.so preloaded over a stand-in libcuda.so.1 (no GPU).

Each test runs one of the programs in progs/ with
    LD_PRELOAD=<sanitizer runtime, if any>:<libgpumemshim.so>
    LD_LIBRARY_PATH=<directory of the stand-in libcuda.so.1>
    GPUMEMSHIM_STATS=<temporary directory>/stats-%p.json
and compares the statistics the shim wrote with what the program is known to have done, exactly:
every family's calls/bytes/errors, copies by direction and by host memory kind, launches, peak and
exit live bytes per memory kind, anomalies. Sections this runner does not know (added to the shim
later) must be all zero for these programs, which run with the default policy (spill) and no
device budget: nothing is placed, so no decision is counted.

The programs check their own data and that each call reached the stand-in driver's implementation
exactly once; they exit non-zero otherwise. The expected statistics are built below by replaying
what each program does (Expect); keep both sides in step when a program changes.

Usage (CTest passes these): run_preload_tests.py --shim PATH --fake-dir DIR --bin-dir DIR
    [--sanitize address,undefined] [--sanitizer-runtime PATH] [unittest arguments...]
GMS_SANITIZE in the environment is used when --sanitize is not given. With AddressSanitizer the
runtime is preloaded first and its allocator shadows the shim's malloc hooks, so only the
host-block statistics are not asserted in that mode. (ThreadSanitizer is handled the same way here,
but a -DGMS_SANITIZE=thread shim does not start yet: see the README.)
"""
import argparse
import collections
import json
import os
import resource
import signal
import shutil
import subprocess
import sys
import tempfile
import unittest

KiB = 1024
MiB = 1024 * 1024

FAMILIES = ["mem_alloc", "mem_alloc_managed", "mem_free", "host_alloc", "host_free", "host_register",
            "host_unregister", "mem_get_info", "vmm", "memcpy", "memset", "prefetch", "advise", "launch",
            "host_block_alloc", "host_block_free"]
DIRECTIONS = ["htod", "dtoh", "dtod", "peer", "htoh"]
HOST_KINDS = ["pageable", "pinned", "managed"]
LAUNCH_KINDS = ["kernel", "kernel_ex", "cooperative", "graph"]
MEM_KINDS = ["device", "managed", "pinned_host", "registered_host", "vmm", "host_block"]
ANOMALIES = ["stale_regions", "unknown_frees", "unrouted_entry_points"]


class Config:
    shim = None
    fake_dir = None
    old_fake_dir = None
    bin_dir = None
    sanitize = ""
    sanitizer_runtime = None

    @classmethod
    def shadowed_malloc(cls):
        """A sanitizer runtime preloaded before the shim owns malloc: host blocks are not seen."""
        return "address" in cls.sanitize or "thread" in cls.sanitize


# ---- what the shim must have counted -------------------------------------------------------------------

class Expect:
    """The statistics a program must produce, built by replaying what it does."""

    def __init__(self):
        self.families = {f: {"calls": 0, "bytes": 0, "errors": 0} for f in FAMILIES}
        self.directions = {d: {"calls": 0, "bytes": 0} for d in DIRECTIONS}
        self.host_kinds = {k: {"calls": 0, "bytes": 0} for k in HOST_KINDS}
        self.launches = {k: 0 for k in LAUNCH_KINDS}
        self.live = {k: 0 for k in MEM_KINDS}
        self.peak = {k: 0 for k in MEM_KINDS}
        self.anomalies = {a: 0 for a in ANOMALIES}
        # Regions made and gone, (kind, bytes) in program order: the trace's alloc and free events.
        self.regions_made = []
        self.regions_gone = []

    # primitives
    def call(self, family, nbytes=0, ok=True):
        f = self.families[family]
        f["calls"] += 1
        if ok:
            f["bytes"] += nbytes
        else:
            f["errors"] += 1

    def fail(self, family, times=1):
        for _ in range(times):
            self.call(family, 0, ok=False)

    def live_add(self, kind, n):
        self.live[kind] += n
        self.peak[kind] = max(self.peak[kind], self.live[kind])

    def live_sub(self, kind, n):
        self.live[kind] = max(0, self.live[kind] - n)

    def alloc(self, family, kind, n):
        self.call(family, n)
        self.live_add(kind, n)
        if kind != "host_block":
            self.regions_made.append((kind, n))

    def free(self, family, kind, n):
        self.call(family, n)
        self.live_sub(kind, n)
        if kind != "host_block":
            self.regions_gone.append((kind, n))

    def _move(self, n, direction, host_kind):
        self.directions[direction]["calls"] += 1
        self.directions[direction]["bytes"] += n
        if direction not in ("dtod", "peer"):
            self.host_kinds[host_kind]["calls"] += 1
            self.host_kinds[host_kind]["bytes"] += n

    def copy(self, n, direction, host_kind=None):
        """One copy call moving n bytes."""
        self.call("memcpy", n)
        self._move(n, direction, host_kind)

    def batch(self, parts):
        """One batch call: parts = [(bytes, direction, host kind)]."""
        self.call("memcpy", sum(p[0] for p in parts))
        for n, direction, kind in parts:
            self._move(n, direction, kind)

    def memset(self, n):
        self.call("memset", n)

    def launch(self, kind):
        self.call("launch", 0)
        self.launches[kind] += 1

    def block_alloc(self, n):
        self.alloc("host_block_alloc", "host_block", n)

    def block_free(self, n):
        self.free("host_block_free", "host_block", n)

    # what the programs do
    def workload(self, n):
        """progs/common.h run_workload(api, n)."""
        self.call("mem_get_info")
        for _ in range(3):
            self.alloc("mem_alloc", "device", n)
        self.alloc("host_alloc", "pinned_host", n)
        self.copy(n, "htod", "pageable")
        self.copy(n, "htod", "pinned")
        self.memset(n)
        self.launch("kernel")
        self.copy(n, "dtod")
        self.copy(n, "dtoh", "pageable")
        self.memset(n)
        self.copy(n, "dtoh", "pinned")
        self.copy(n, "dtoh", "pageable")  # cuMemcpy: the driver says the host end is pageable
        self.launch("kernel_ex")
        self.copy(n, "dtoh", "pinned")    # cuMemcpy into cuMemAllocHost memory
        for _ in range(3):
            self.free("mem_free", "device", n)
        self.free("host_free", "pinned_host", n)
        return self

    def every_hook(self):
        """progs/procaddr.cc every_hook(): each of the 161 hooked implementations once."""
        S, vmm, pitched = 4096, 2 * MiB, 512 * 16
        self.alloc("mem_alloc", "device", S)                  # cuMemAlloc_v2
        self.alloc("mem_alloc", "device", pitched)            # cuMemAllocPitch_v2: 256 x 16, pitch 512
        self.alloc("mem_alloc_managed", "managed", S)
        for _ in range(4):                                    # AllocAsync, _ptsz, FromPoolAsync, _ptsz
            self.alloc("mem_alloc", "device", S)
        for _ in range(2):                                    # cuMemHostAlloc, cuMemAllocHost_v2
            self.alloc("host_alloc", "pinned_host", S)
        for _ in range(2):                                    # cuMemHostRegister, _v2
            self.alloc("host_register", "registered_host", S)
        self.call("mem_get_info")
        self.call("vmm", vmm)                                 # cuMemCreate
        self.alloc("vmm", "vmm", vmm)                         # cuMemMap
        for n in (256 * 4, 8 * 8 * 8 * 4, 8 * 8 * 8 * 4 + 4 * 4 * 4 * 4):  # arrays: 1D float, 3D uchar4, 2 mip levels
            self.call("mem_alloc", n)
        for _ in range(3):                                    # cuArrayDestroy (twice), cuMipmappedArrayDestroy
            self.call("mem_free", 0)
        for _ in range(2):                                    # cuGraphAddMemAllocNode, cuGraphAddNode (memory nodes)
            self.alloc("mem_alloc", "device", S)
        for _ in range(2):                                    # their free nodes: cuGraphAddMemFreeNode, cuGraphAddNode_v2
            self.free("mem_free", "device", S)
        for direction, kind in [
                ("htod", "pageable"), ("htod", "pageable"),   # HtoD, _ptds
                ("dtoh", "pageable"), ("dtoh", "pageable"),   # DtoH, _ptds
                ("dtod", None), ("dtod", None),               # DtoD, _ptds
                ("dtod", None),                               # cuMemcpy device -> device
                ("dtoh", "pageable"),                         # cuMemcpy_ptds device -> malloc'd
                ("dtoh", "managed"),                          # cuMemcpyAsync device -> managed
                ("htod", "pinned"),                           # cuMemcpyAsync_ptsz registered -> device
                ("htod", "pinned"), ("htod", "pinned"),       # HtoDAsync, _ptsz
                ("dtoh", "pinned"),                           # DtoHAsync -> registered
                ("dtoh", "managed"),                          # DtoHAsync_ptsz -> managed
                ("dtod", None), ("dtod", None),               # DtoDAsync, _ptsz
                ("peer", None), ("peer", None), ("peer", None), ("peer", None),
                ("htod", "pageable"),                         # 2D host -> device
                ("dtoh", "pageable"),                         # 2D_ptds device -> host
                ("dtod", None),                               # 2DUnaligned
                ("htod", "pageable"),                         # 2DUnaligned_ptds unified(malloc'd) -> device
                ("htod", "pinned"),                           # 2DAsync pinned -> device
                ("dtoh", "pinned"),                           # 2DAsync_ptsz device -> registered
                ("htod", "pageable"),                         # 3D
                ("dtod", None),                               # 3D_ptds
                ("dtoh", "pinned"),                           # 3DAsync device -> pinned
                ("htod", "managed"),                          # 3DAsync_ptsz unified(managed) -> device
                ("peer", None), ("peer", None), ("peer", None), ("peer", None)]:  # 3DPeer x4
            self.copy(S, direction, kind)
        self.fail("memcpy", 14)                               # CUDA arrays: not supported
        self.batch([(S, "dtod", None), (S, "dtoh", "pageable")])       # BatchAsync (12.8)
        self.batch([(S, "htod", "pinned"), (S, "htod", "managed")])    # BatchAsync_ptsz
        self.batch([(S, "dtod", None)])                                 # BatchAsync_v2
        self.batch([(S, "htoh", "pinned")])                             # BatchAsync_v2_ptsz: pinned -> malloc'd
        self.batch([(S, "dtod", None)])                                 # 3DBatchAsync
        self.batch([(S, "dtoh", "pageable")])                           # 3DBatchAsync_ptsz
        self.batch([(S, "htod", "pageable")])                           # 3DBatchAsync_v2
        self.batch([(S, "htod", "pinned")])                             # 3DBatchAsync_v2_ptsz
        for _ in range(24):
            self.memset(S)
        for _ in range(4):
            self.call("prefetch", S)
        for _ in range(2):
            self.call("advise", S)
        for kind in LAUNCH_KINDS:
            self.launch(kind)
            self.launch(kind)
        self.free("vmm", "vmm", vmm)                          # cuMemUnmap
        self.call("vmm", 0)                                   # cuMemRelease
        for _ in range(2):
            self.free("host_unregister", "registered_host", S)
        for _ in range(2):
            self.free("host_free", "pinned_host", S)
        for n, kind in [(S, "device"), (S, "device"),         # FreeAsync, _ptsz
                        (S, "device"), (pitched, "device"), (S, "managed"), (S, "device"), (S, "device")]:
            self.free("mem_free", kind, n)
        return self

    def to_json_shape(self):
        return {
            "families": self.families,
            "copies_by_direction": self.directions,
            "copies_by_host_kind": self.host_kinds,
            "launches": self.launches,
            "peak_live_bytes": self.peak,
            "live_bytes_at_exit": self.live,
            "anomalies": self.anomalies,
        }


def flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        path = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.update(flatten(v, path))
        else:
            out[path] = v
    return out


# ---- running the programs ---------------------------------------------------------------------------------

class Run:
    def __init__(self, proc, stats, tmp):
        self.proc = proc
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.stats = stats  # pid -> parsed statistics
        self.tmp = tmp

    def value(self, key):
        """A "key=value" line the program printed."""
        for line in self.stdout.splitlines():
            if line.startswith(key + "="):
                return line.split("=", 1)[1]
        raise AssertionError(f"the program printed no {key}=...:\n{self.stdout}")


class PreloadCase(unittest.TestCase):
    maxDiff = None

    def program(self, name):
        path = os.path.join(Config.bin_dir, "preload_" + name)
        if not os.path.exists(path):
            self.fail(f"{path} is not built")
        return path

    def base_env(self, fake_dir=None):
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEMSHIM_") and k != "LD_PRELOAD"}
        old = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = (fake_dir or Config.fake_dir) + (":" + old if old else "")
        # The stand-in driver never frees its bookkeeping, and some programs keep memory to the end.
        env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=0:" + env.get("ASAN_OPTIONS", "")
        env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1:" + env.get("UBSAN_OPTIONS", "")
        # The trace writer restarts its thread in a fork child, by design; ThreadSanitizer refuses
        # new threads after a multi-threaded fork unless told it may.
        env["TSAN_OPTIONS"] = "die_after_fork=0:halt_on_error=1:" + env.get("TSAN_OPTIONS", "")
        # The exact host-block statistics below are glibc's blocks; the pool (on by default) has
        # its own group (PreloadPool), which also runs these programs with it on.
        env["GPUMEMSHIM_HOST_POOL"] = "off"
        return env

    def preload_list(self):
        libs = []
        if Config.sanitizer_runtime:
            libs.append(Config.sanitizer_runtime)
        libs.append(Config.shim)
        return ":".join(libs)

    def run_program(self, name, *args, env=None, shim=True, expect_rc=0, timeout=180, fake_dir=None, preexec=None):
        tmp = tempfile.mkdtemp(prefix="gms-preload-")
        self.addCleanup(shutil.rmtree, tmp, True)
        e = self.base_env(fake_dir or (Config.old_fake_dir if name == "old_driver" else None))
        cmd = [self.program(name)]
        if shim:
            e["LD_PRELOAD"] = self.preload_list()
            e["GPUMEMSHIM_STATS"] = os.path.join(tmp, "stats-%p.json")
            cmd.append("--shim")
        if Config.shadowed_malloc():
            cmd.append("--sanitizer-malloc")
        cmd.extend(args)
        if env:
            for k, v in env.items():
                if v is None:
                    e.pop(k, None)
                else:
                    e[k] = v
        try:
            proc = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout, preexec_fn=preexec)
        except subprocess.TimeoutExpired as exc:
            self.fail(f"{' '.join(cmd)} did not finish in {timeout}s (deadlock?)\n{exc.stdout}\n{exc.stderr}")
        if expect_rc is not None and proc.returncode != expect_rc:  # None: any status, the caller looks
            self.fail(f"{' '.join(cmd)} exited with {proc.returncode}, expected {expect_rc}\n"
                      f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
        stats = {}
        for f in sorted(os.listdir(tmp)):
            if f.startswith("stats-") and f.endswith(".json"):
                with open(os.path.join(tmp, f)) as fh:
                    text = fh.read()
                try:
                    doc = json.loads(text)
                except ValueError as exc:
                    self.fail(f"{f} is not JSON ({exc}):\n{text}")
                self.assertEqual(doc.get("format"), "gpumemshim-stats")
                self.assertEqual(f, f"stats-{doc['pid']}.json", "%p must expand to the writer's pid")
                stats[doc["pid"]] = doc
        return Run(proc, stats, tmp)

    def only_stats(self, run):
        self.assertEqual(len(run.stats), 1, f"expected one statistics file, got pids {sorted(run.stats)}")
        return next(iter(run.stats.values()))

    def assert_stats(self, actual, expect, what=""):
        """Every number the shim reported equals the expected one; unknown numbers are zero."""
        want = flatten(expect.to_json_shape())
        got = flatten({k: v for k, v in actual.items() if k not in ("format", "version", "pid")})
        skip_host = Config.shadowed_malloc()
        wrong = []
        for path in sorted(set(want) | set(got)):
            if skip_host and "host_block" in path:
                continue
            if path == "timings_ns.launch_scan_ns" and path not in want:
                continue  # time, not a count: any launch while the shim tracks memory (the program's managed memory too)
            w = want.get(path, 0)
            if path not in got:
                wrong.append(f"  {path}: missing from the statistics (expected {w})")
            elif got[path] != w:
                wrong.append(f"  {path}: {got[path]}, expected {w}")
        if wrong:
            self.fail(f"statistics {what} differ from what the program did:\n" + "\n".join(wrong)
                      + "\n--- statistics\n" + json.dumps(actual, indent=1))

    def assert_quiet(self, run):
        """No warning from the shim on a clean run."""
        lines = [l for l in run.stderr.splitlines() if "gpumemshim" in l]
        self.assertEqual(lines, [], f"unexpected messages from the shim:\n{run.stderr}")


# ---- the tests --------------------------------------------------------------------------------------------

ALL_PROGRAMS = ["direct", "direct_ptds", "dlopen", "procaddr", "rtld_next", "old_dlsym", "threads", "fork",
                "host", "bad_input", "old_driver", "trace"]


class PreloadBaseline(PreloadCase):
    """Each program and the stand-in driver work on their own, and nothing writes statistics."""

    def test_without_shim(self):
        for name in ALL_PROGRAMS:
            with self.subTest(program=name):
                run = self.run_program(name, shim=False)
                self.assertEqual(run.stats, {})

    def test_no_cuda_no_statistics(self):
        # A process that never calls CUDA writes no statistics, even with GPUMEMSHIM_STATS set.
        tmp = tempfile.mkdtemp(prefix="gms-preload-")
        self.addCleanup(shutil.rmtree, tmp, True)
        env = self.base_env()
        env["LD_PRELOAD"] = self.preload_list()
        env["GPUMEMSHIM_STATS"] = os.path.join(tmp, "stats-%p.json")
        for cmd in (["true"], [sys.executable, "-c", "import json; json.dumps([1] * 1000000)"]):
            with self.subTest(cmd=cmd[0]):
                proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(os.listdir(tmp), [])


class PreloadDirect(PreloadCase):
    """(a) Linked with -lcuda: calls by name, default and per-thread default stream."""

    def test_direct(self):
        run = self.run_program("direct")
        self.assert_stats(self.only_stats(run), Expect().workload(64 * KiB))
        self.assert_quiet(run)

    def test_direct_per_thread(self):
        run = self.run_program("direct_ptds")
        self.assert_stats(self.only_stats(run), Expect().workload(64 * KiB))


class PreloadDlopen(PreloadCase):
    """(b) dlopen("libcuda.so.1") and dlsym of each implementation."""

    def test_dlopen_dlsym(self):
        run = self.run_program("dlopen")
        self.assert_stats(self.only_stats(run), Expect().workload(64 * KiB))
        self.assert_quiet(run)


class PreloadProcAddress(PreloadCase):
    """(c) cuGetProcAddress_v2 / cuGetProcAddress: version sweep, workload, every hook once."""

    def test_proc_address(self):
        run = self.run_program("procaddr")
        self.assertIn("161 hooked implementations called", run.stdout)
        e = Expect().workload(64 * KiB)   # flags 0
        e.workload(64 * KiB)              # flags 2
        e.every_hook()
        self.assert_stats(self.only_stats(run), e)
        self.assert_quiet(run)


class PreloadRtldNext(PreloadCase):
    """(d) dlsym(RTLD_NEXT, ...) from the program and from a library in between."""

    def test_rtld_next(self):
        run = self.run_program("rtld_next")
        e = Expect().workload(64 * KiB)
        e.workload(64 * KiB)
        # From the program, RTLD_NEXT "malloc" and friends are the shim's: tracked.
        e.block_alloc(2 * MiB)                 # malloc 2 MiB
        e.block_free(2 * MiB)                  # realloc to 4 MiB: the old block goes,
        e.block_alloc(4 * MiB)                 # the new one comes
        e.block_alloc(3 * MiB)                 # calloc(3, 1 MiB)
        e.block_free(4 * MiB)
        e.block_free(3 * MiB)
        # From the library, RTLD_NEXT "malloc" is libc's: its 5 MiB block is not seen.
        self.assert_stats(self.only_stats(run), e)


class PreloadOldDlsym(PreloadCase):
    """(e) dlsym@GLIBC_2.2.5 and dlsym@GLIBC_2.34 both land in the shim."""

    def test_old_and_new_dlsym(self):
        run = self.run_program("old_dlsym")
        self.assert_stats(self.only_stats(run), Expect().workload(64 * KiB))


class PreloadThreads(PreloadCase):
    """(f) 16 threads allocating, copying and freeing at once."""

    THREADS, ITERS, T, P = 16, 50, 64 * KiB, 256 * KiB
    LOOP_BLOCK, HELD_BLOCK = 3 * MiB // 2, 2 * MiB

    def expected(self):
        e = Expect()
        # Threads interleave, but the totals do not depend on the order; the peaks are reached at
        # the barrier where every thread holds P of device memory, its pinned buffer and a 2 MiB block.
        for _ in range(self.THREADS):
            e.call("host_alloc", self.T)
            for _ in range(self.ITERS):
                e.call("mem_alloc", self.T)
                e.copy(self.T, "htod", "pageable")
                e.copy(self.T, "dtoh", "pageable")
                e.copy(self.T, "htod", "pinned")
                e.copy(self.T, "dtoh", "pinned")
                e.call("mem_free", self.T)
                e.call("host_block_alloc", self.LOOP_BLOCK)
                e.call("host_block_free", self.LOOP_BLOCK)
            e.call("mem_alloc", self.P)
            e.call("host_block_alloc", self.HELD_BLOCK)
            e.memset(self.P)
            e.copy(4096, "dtoh", "pageable")
            e.call("mem_free", self.P)
            e.call("host_block_free", self.HELD_BLOCK)
            e.call("host_free", self.T)
        e.peak.update(device=self.THREADS * self.P, pinned_host=self.THREADS * self.T,
                      host_block=self.THREADS * self.HELD_BLOCK)
        return e

    def test_threads(self):
        run = self.run_program("threads")
        self.assert_stats(self.only_stats(run), self.expected())
        self.assert_quiet(run)


class PreloadFork(PreloadCase):
    """(g) fork without exec (children use only malloc/free), fork + exec (the child uses CUDA)."""

    def test_fork_and_exec(self):
        run = self.run_program("fork")
        child = int(run.value("exec_child_pid"))
        forked = [int(p) for p in run.value("fork_child_pids").split(",")]
        bg_iters = int(run.value("bg_iters"))
        self.assertGreaterEqual(bg_iters, 100)
        self.assertIn(child, run.stats, "the exec'd child must write its own statistics (%p)")
        for pid in forked:
            self.assertNotIn(pid, run.stats, "a child that made no CUDA call must not write statistics")
        self.assertEqual(len(run.stats), 2, f"statistics files of pids {sorted(run.stats)}")
        parent = next(pid for pid in run.stats if pid != child)

        e = Expect().workload(64 * KiB)
        for _ in range(bg_iters):
            e.block_alloc(2 * MiB)
            e.block_free(2 * MiB)
        self.assert_stats(run.stats[parent], e, "of the parent")
        # The exec'd child reports only its own work.
        self.assert_stats(run.stats[child], Expect().workload(128 * KiB), "of the exec'd child")


class PreloadHost(PreloadCase):
    """(h) malloc inside dlsym, and the malloc-family and mmap-family hooks."""

    @staticmethod
    def expected(threshold):
        e = Expect()
        e.call("mem_get_info")

        def m(n):  # a malloc-family block of n bytes: tracked at or above the threshold
            if n >= threshold:
                e.block_alloc(n)
                return n
            return 0

        def f(tracked):
            if tracked:
                e.block_free(tracked)

        def mm(n):  # an mmap of n bytes (page-aligned sizes here)
            return m(n)

        f(m(2 * MiB))                     # 1. malloc/free
        f(m(3 * MiB))                     # 2. calloc
        r = m(512 * KiB)                  # 3. realloc chain: each step forgets the old block
        for n in (4 * MiB, 8 * MiB, 256 * KiB):
            f(r)
            r = m(n)
        f(r)
        aligned = [m(2 * MiB) for _ in range(3)]  # 4. posix_memalign, aligned_alloc, memalign
        for a in aligned:
            f(a)
        f(m(1 * MiB))                     # 5. at the default threshold
        f(m(1 * MiB - 1))                 #    one byte below
        f(m(2 * MiB))                     # 6. reallocarray(NULL, 2, 1 MiB)
        if mm(8 * MiB):                   # 7. mmap 8 MiB, unmap 2 MiB in the middle, then the rest
            e.block_free(2 * MiB)
            e.block_free(6 * MiB)         #    the two pieces left go in one call
        if mm(4 * MiB):                   # 8. mremap 4 -> 8 MiB: old range gone, new block
            e.block_free(4 * MiB)
            e.block_alloc(8 * MiB)
            e.block_free(8 * MiB)
        small = mm(64 * KiB)              # 9. mremap 64 KiB -> 2 MiB
        f(small)
        e.block_alloc(2 * MiB)
        e.block_free(2 * MiB)
        f(mm(2 * MiB))                    # 10. file mapping (memfd)
        if mm(4 * MiB):                   # 11. MAP_FIXED over the upper half
            e.block_free(2 * MiB)
            e.block_alloc(2 * MiB)
            e.block_free(4 * MiB)         #     both pieces unmapped in one call
        m(2 * MiB)                        # 12. live at exit
        return e

    def test_host_hooks(self):
        run = self.run_program("host")
        self.assert_stats(self.only_stats(run), self.expected(1 * MiB))
        self.assert_quiet(run)

    def test_host_hooks_low_threshold(self):
        run = self.run_program("host", env={"GPUMEMSHIM_HOST_THRESHOLD": "64K"})
        self.assert_stats(self.only_stats(run), self.expected(64 * KiB))


class PreloadCopies(PreloadCase):
    """(k) Fast copies: registration, the cache, every invalidation path, staging (progs/copies.cc
    checks the data and the stand-in's registration counters itself; this checks the statistics)."""

    def decisions(self, run):
        return self.only_stats(run)["decisions"]

    def test_every_invalidation_path(self):
        # REGISTER=always: the program checks the stand-in's register/unregister counts after each
        # step. 9 blocks in the main part (6 when the sanitizer owns malloc: steps 1 to 3 skipped),
        # and each thread's 4 blocks of 8 MiB.
        d = self.decisions(self.run_program("copies", env={"GPUMEMSHIM_REGISTER": "always"}))
        regs = (6 if Config.shadowed_malloc() else 9) + 64
        self.assertEqual(d["registered"]["calls"], regs)
        self.assertEqual(d["unregistered"]["calls"], regs, "every registration dropped before its memory went")
        self.assertEqual(d["invalidated"]["calls"], regs)
        self.assertEqual(d["copy_staged"]["calls"], 0)
        self.assertEqual(d["cache_evicted"]["calls"], 0)
        self.assertGreater(d["cache_hit"]["calls"], 0)

    def test_auto_stages_one_shot_copies_and_registers_reused_blocks(self):
        d = self.decisions(self.run_program("copies"))
        self.assertGreater(d["copy_staged"]["calls"], 0)
        self.assertGreater(d["registered"]["calls"], 0, "blocks copied again and again get registered")
        self.assertEqual(d["registered"]["calls"], d["unregistered"]["calls"], "none outlives its memory")

    def test_register_off_stages_large_copies(self):
        d = self.decisions(self.run_program("copies", env={"GPUMEMSHIM_REGISTER": "off"}))
        self.assertEqual(d["registered"]["calls"], 0)
        self.assertEqual(d["copy_registered"]["calls"], 0)
        self.assertGreater(d["copy_staged"]["calls"], 64)

    def test_a_small_limit_evicts_least_recently_used(self):
        d = self.decisions(self.run_program("copies", "--lru", env={"GPUMEMSHIM_REGISTER_LIMIT": "100M",
                                                                     "GPUMEMSHIM_REGISTER": "always"}))
        self.assertEqual(d["registered"]["calls"], 4)
        self.assertEqual(d["cache_evicted"]["calls"], 2)
        self.assertEqual(d["invalidated"]["calls"], 2)
        self.assertEqual(d["unregistered"]["calls"], 4)

    def test_async_copies_keep_the_pageable_contract(self):
        # The stand-in runs async copies of pinned memory late, as a copy engine would: the program
        # reuses its buffer right after an upload and reads it right after a download.
        for mode in ("auto", "always"):
            with self.subTest(mode=mode):
                d = self.decisions(self.run_program("copies", "--async-contract", env={"GPUMEMSHIM_REGISTER": mode}))
                self.assertGreater(d["copy_registered"]["calls"], 3)
                self.assertGreater(d["tail_staged"]["calls"], 0, "uploads return before the DMA of their last part")
        self.run_program("copies", "--async-contract", env={"GPUMEMSHIM_REGISTER": "off"})
        self.run_program("copies", "--async-contract", shim=False)

    def test_large_pinned_allocations_are_made_by_the_shim(self):
        d = self.decisions(self.run_program("copies", "--host-alloc"))
        self.assertEqual(d["host_alloc_fast"]["calls"], 2, "cuMemHostAlloc and cuMemAllocHost; not write-combined")
        d = self.decisions(self.run_program("copies", "--host-alloc", env={"GPUMEMSHIM_STAGE": "off"}))
        self.assertEqual(d["host_alloc_fast"]["calls"], 0)
        self.run_program("copies", "--host-alloc", shim=False)

    def test_large_copies_to_and_from_pinned_memory_use_the_copy_threads(self):
        d = self.decisions(self.run_program("copies", "--pinned-memcpy"))
        # A sanitizer's memcpy and memmove check their arguments and then may call the next ones
        # in the lookup order, the shim's: ThreadSanitizer's both do, AddressSanitizer's one of
        # the two. The program checks the data in every case.
        if Config.shadowed_malloc():
            self.assertLessEqual(d["memcpy_crew"]["calls"], 2)
        else:
            self.assertEqual(d["memcpy_crew"]["calls"], 2)
        d = self.decisions(self.run_program("copies", "--pinned-memcpy", env={"GPUMEMSHIM_STAGE": "off"}))
        self.assertEqual(d["memcpy_crew"]["calls"], 0)
        self.run_program("copies", "--pinned-memcpy", shim=False)

    def test_a_registration_racing_a_copy_the_driver_takes(self):
        # Another thread's copies make the shim register a block while the driver takes an async
        # download into it: the download must still return with its data in place.
        for mode in ("auto", "always"):
            with self.subTest(mode=mode):
                d = self.decisions(self.run_program("copies", "--racing-registration", env={"GPUMEMSHIM_REGISTER": mode}))
                self.assertGreater(d["registered"]["calls"], 0)
        self.run_program("copies", "--racing-registration", shim=False)

    def test_without_the_shim(self):
        self.run_program("copies", shim=False)

    def test_copies_with_memory_placed_on_the_host(self):
        for spill, stage in (("managed", "on"), ("pinned", "on"), ("pinned", "off")):
            with self.subTest(spill=spill, stage=stage):
                run = self.run_program("copies", "--spilled", env={
                    "GPUMEMSHIM_POLICY": "spill", "GPUMEMSHIM_SPILL": spill, "GPUMEMSHIM_DEVICE_LIMIT": "1M",
                    "GPUMEMSHIM_MANAGED_LIMIT": "1G", "GPUMEMSHIM_STAGE": stage})
                d = self.decisions(run)
                self.assertEqual(d["spilled_" + spill]["calls"], 3, "the 128 MiB scratch buffer, 8 MiB and 64 MiB")
                made = spill == "pinned" and stage == "on"
                self.assertEqual(d["host_alloc_fast"]["calls"], 2 if made else 0, "128 MiB and 64 MiB pinned")
                if stage == "on":  # the copy crew does copies to and from memory placed on the host
                    self.assertEqual(d["copy_on_host"]["calls"], 10, "every copy to or from a spilled buffer")
                    self.assertEqual(d["copy_on_host"]["bytes"], 6 * 8 * MiB + 2 * (8 * MiB - 8192) + 2 * 64 * MiB)


class PreloadPool(PreloadCase):
    """(m) Recycled host blocks: progs/pool.cc checks the data, glibc's behaviour and the stand-in's
    registration counts itself; this checks that the pool was used, and that it is off by default."""

    POOL = {"GPUMEMSHIM_HOST_POOL": "128M", "GPUMEMSHIM_REGISTER": "always"}

    def pool_decisions(self, run):
        d = self.only_stats(run)["decisions"]
        return {k: d[k]["calls"] for k in ("pool_new", "pool_reused", "pool_released")}

    def test_pool(self):
        run = self.run_program("pool", "--pool", env=self.POOL)
        self.assertIn("pool ok", run.stdout)
        self.assert_quiet(run)
        d = self.pool_decisions(run)
        if Config.shadowed_malloc():
            self.assertEqual(d, {"pool_new": 0, "pool_reused": 0, "pool_released": 0},
                             "the sanitizer's allocator serves every block")
            return
        self.assertGreaterEqual(d["pool_new"], 5)
        self.assertGreaterEqual(d["pool_reused"], 8)
        self.assertGreaterEqual(d["pool_released"], 3, "the bound gave blocks back (step 7)")

    def test_on_by_default(self):
        run = self.run_program("pool", env={"GPUMEMSHIM_HOST_POOL": None, "GPUMEMSHIM_REGISTER": "always"})
        d = self.pool_decisions(run)
        if not Config.shadowed_malloc():
            self.assertGreater(d["pool_reused"], 0, d)

    def test_off(self):
        run = self.run_program("pool", env={"GPUMEMSHIM_HOST_POOL": "off", "GPUMEMSHIM_REGISTER": "always"})
        self.assertEqual(self.pool_decisions(run), {"pool_new": 0, "pool_reused": 0, "pool_released": 0})

    def test_other_programs_with_the_pool_on(self):
        # Each checks its own data and exits non-zero otherwise; their exact statistics are glibc's
        # blocks and are checked in their own groups with the pool off.
        for name, args in (("host", ()), ("threads", ()), ("fork", ()), ("copies", ()), ("copies", ("--lru",)),
                           ("rtld_next", ()), ("trace", ())):
            with self.subTest(program=name, args=args):
                self.run_program(name, *args, env={"GPUMEMSHIM_HOST_POOL": "256M"})

    def test_percent_of_ram(self):
        run = self.run_program("pool", env={"GPUMEMSHIM_HOST_POOL": "1%"})
        if not Config.shadowed_malloc():
            self.assertGreater(self.pool_decisions(run)["pool_reused"], 0)

    def test_invalid_value_runs_without_the_pool(self):
        run = self.run_program("pool", env={"GPUMEMSHIM_HOST_POOL": "lots"})
        lines = [l for l in run.stderr.splitlines() if "GPUMEMSHIM_HOST_POOL" in l]
        self.assertEqual(len(lines), 1, run.stderr)
        self.assertEqual(self.pool_decisions(run), {"pool_new": 0, "pool_reused": 0, "pool_released": 0})

    def test_without_the_shim(self):
        self.run_program("pool", "--pool", shim=False)


class PreloadPlacement(PreloadCase):
    """(n) Placement plumbing: progs/placement.cc checks what reaches the stand-in driver (spill,
    prefetch before a launch, nothing of the shim's in a stream capture, stream-ordered frees of
    spilled memory); this checks the shim's statistics."""

    ENV = {"GPUMEMSHIM_POLICY": "spill", "GPUMEMSHIM_DEVICE_LIMIT": "8M", "GPUMEMSHIM_MANAGED_LIMIT": "64M"}

    def test_placement(self):
        run = self.run_program("placement", env=self.ENV)
        self.assertIn("placement ok", run.stdout)
        d = self.only_stats(run)["decisions"]
        self.assertEqual(d["spilled_managed"]["calls"], 3, "4 MiB twice, and 16 MiB in the capture")
        self.assertEqual(d["spilled_managed"]["bytes"], 24 * MiB)
        self.assertEqual(d["kept_on_device"]["calls"], 3, "6 MiB twice, and 2 MiB in the capture")
        self.assertEqual(d["refused"]["calls"], 0)
        self.assertEqual(d["prefetched"]["calls"], 1)
        self.assertEqual(d["prefetched"]["bytes"], 4 * MiB)

    def test_without_the_shim(self):
        # The program's own expectations hold only under the shim; without it, it must fail on its
        # first check (nothing spilled), not crash.
        run = self.run_program("placement", shim=False, expect_rc=1)
        self.assertIn("check failed", run.stderr)

    def test_auto_policy(self):
        # The default policy, nothing set but the budget: progs/auto_policy.cc checks the calls.
        env = {"GPUMEMSHIM_DEVICE_LIMIT": "16M", "GPUMEMSHIM_SWAP_CHUNK": "4M", "GPUMEMSHIM_MANAGED_LIMIT": "64M"}
        run = self.run_program("auto_policy", env=env)
        self.assertIn("auto ok", run.stdout)
        d = self.only_stats(run)["decisions"]
        self.assertEqual(d["converted_swap"]["calls"], 3, "4 MiB, a quarter of the budget, and 8 and 10 MiB made again: movable")
        self.assertEqual(d["spilled_managed"]["bytes"], 26 * MiB, "8 MiB over a quarter that did not fit, twice, and 10 MiB")
        self.assertEqual(d["kept_on_device"]["calls"], 2, "6 MiB, and 12 MiB in the capture")
        self.assertEqual(d["refused"]["calls"], 0)
        self.assertEqual(d["prefetched"]["calls"], 0)
        ipc = [l for l in run.stderr.splitlines() if "cuIpcGetMemHandle" in l]
        self.assertEqual(len(ipc), 1, run.stderr)
        self.assertIn("GPUMEMSHIM_POLICY=spill", ipc[0])

    def framework_settings(self, env, shown):
        """What a program started under the shim with `env` finds in its environment: the shell
        expansion `shown` (the variables the shim sets for frameworks at load)."""
        e = self.base_env(None)
        e.update(env)
        e["LD_PRELOAD"] = self.preload_list()
        out = subprocess.run(["sh", "-c", f'echo "{shown}"'], env=e, capture_output=True, text=True, timeout=60)
        return out.stdout.strip()

    def test_framework_allocators(self):
        # At load the shim asks JAX (every policy but off) and PyTorch (movable policies) for
        # allocators whose every buffer it sees, unless the program configures them itself.
        def seen(env):
            return self.framework_settings(env, "$XLA_PYTHON_CLIENT_ALLOCATOR|$PYTORCH_CUDA_ALLOC_CONF")
        self.assertEqual(seen({}), "cuda_async|backend:cudaMallocAsync")
        self.assertEqual(seen({"GPUMEMSHIM_POLICY": "spill"}), "cuda_async|")
        self.assertEqual(seen({"GPUMEMSHIM_POLICY": "off"}), "|")
        self.assertEqual(seen({"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}), "|backend:cudaMallocAsync")
        # Expandable segments (what PyTorch's out-of-memory message recommends) never move past the
        # budget: under the movable policies they give way to the async backend, other options kept.
        self.assertEqual(seen({"XLA_PYTHON_CLIENT_MEM_FRACTION": ".5", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
                         "|backend:cudaMallocAsync")
        self.assertEqual(seen({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64,expandable_segments:True"}),
                         "cuda_async|max_split_size_mb:64,backend:cudaMallocAsync")
        self.assertEqual(seen({"GPUMEMSHIM_POLICY": "spill", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
                         "cuda_async|expandable_segments:True")
        # Other options get the backend added; an empty value (a script's `export VAR=`) too; a
        # chosen backend is left alone.
        self.assertEqual(seen({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64"}),
                         "cuda_async|max_split_size_mb:64,backend:cudaMallocAsync")
        self.assertEqual(seen({"PYTORCH_CUDA_ALLOC_CONF": ""}), "cuda_async|backend:cudaMallocAsync")
        self.assertEqual(seen({"PYTORCH_CUDA_ALLOC_CONF": "backend:native"}), "cuda_async|backend:native")
        self.assertEqual(seen({"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}), "platform|backend:cudaMallocAsync")

    def test_xla_command_buffers(self):
        # Under the movable policies and a device limit XLA launches a jitted step's kernels one
        # by one (command buffers off), its other flags kept, unless the program chose command
        # buffers itself or XLA_FLAGS names a file of flags. Without a limit, command buffers stay
        # (small kernels run faster in them).
        def seen(env, limit="64M"):
            # XLA_FLAGS empty is nothing set (the machine's own would be kept as the program's).
            base = {"XLA_FLAGS": ""}
            if limit:
                base["GPUMEMSHIM_DEVICE_LIMIT"] = limit
            return self.framework_settings({**base, **env}, "[$XLA_FLAGS]")
        off = "--xla_gpu_enable_command_buffer="
        self.assertEqual(seen({}), f"[{off}]")
        self.assertEqual(seen({"GPUMEMSHIM_POLICY": "swap"}), f"[{off}]")
        self.assertEqual(seen({}, limit=None), "[]")
        self.assertEqual(seen({"XLA_FLAGS": "--a=1"}, limit=None), "[--a=1]")
        self.assertEqual(seen({"GPUMEMSHIM_POLICY": "spill"}), "[]")
        self.assertEqual(seen({"GPUMEMSHIM_POLICY": "off"}), "[]")
        self.assertEqual(seen({"XLA_FLAGS": "--xla_gpu_autotune_level=0"}), f"[--xla_gpu_autotune_level=0 {off}]")
        self.assertEqual(seen({"XLA_FLAGS": "--xla_gpu_enable_command_buffer=FUSION"}), "[--xla_gpu_enable_command_buffer=FUSION]")
        self.assertEqual(seen({"XLA_FLAGS": "/etc/xla.flags"}), "[/etc/xla.flags]")

    def test_pools_under_the_budget(self):
        # Stream-ordered allocations from the device's pool: the budget holds as for any allocation
        # (progs/pools.cc checks the calls): spilled past it, refused under off.
        for policy in ("auto", "spill", "off"):
            env = {"GPUMEMSHIM_POLICY": policy, "GPUMEMSHIM_DEVICE_LIMIT": "8M", "GPUMEMSHIM_MANAGED_LIMIT": "64M"}
            run = self.run_program("pools", policy, env=env)
            self.assertIn(f"pools ok ({policy})", run.stdout)
            d = self.only_stats(run)["decisions"]
            self.assertEqual(d["spilled_managed"]["bytes"], 0 if policy == "off" else 6 * MiB, policy)
            self.assertEqual(d["refused"]["calls"], 1 if policy == "off" else 0, policy)

    def test_vmm_under_the_budget(self):
        # The program's own cuMemCreate: counted from creation, host memory past the budget under
        # every policy but off, which refuses it (progs/vmm_budget.cc checks the calls and bytes).
        for policy in ("auto", "spill", "swap", "off"):
            env = {"GPUMEMSHIM_POLICY": policy, "GPUMEMSHIM_DEVICE_LIMIT": "16M", "GPUMEMSHIM_MANAGED_LIMIT": "64M"}
            run = self.run_program("vmm_budget", policy, env=env)
            self.assertIn(f"vmm ok ({policy})", run.stdout)
            d = self.only_stats(run)["decisions"]
            self.assertEqual(d["spilled_vmm"]["bytes"], 0 if policy == "off" else 16 * MiB, policy)
            self.assertEqual(d["refused"]["calls"], 2 if policy == "off" else 0, policy)

    def test_graph_memory_nodes_under_the_budget(self):
        # Memory nodes added to a graph by hand: counted from the node's making, past the budget
        # host memory made outside the graph with an empty node in its place under spill, device
        # memory under auto, refused under off (progs/graph_nodes.cc checks the nodes and bytes).
        for policy in ("auto", "spill", "off"):
            env = {"GPUMEMSHIM_POLICY": policy, "GPUMEMSHIM_DEVICE_LIMIT": "16M", "GPUMEMSHIM_MANAGED_LIMIT": "64M"}
            run = self.run_program("graph_nodes", policy, env=env)
            self.assertIn(f"graph nodes ok ({policy})", run.stdout)
            d = self.only_stats(run)["decisions"]
            self.assertEqual(d["spilled_managed"]["bytes"], 14 * MiB if policy == "spill" else 0, policy)
            self.assertEqual(d["refused"]["calls"], 2 if policy == "off" else 0, policy)
            self.assertEqual(self.only_stats(run)["live_bytes_at_exit"]["device"], 0, policy)

    def test_malloc_heap_under_the_budget(self):
        # The device-side malloc heap beyond its starting size counts against the budget; past it,
        # out-of-memory under every policy (it cannot be host memory; progs/heap_budget.cc checks
        # the sizes and cuMemGetInfo).
        for policy in ("auto", "spill", "off"):
            env = {"GPUMEMSHIM_POLICY": policy, "GPUMEMSHIM_DEVICE_LIMIT": "16M", "GPUMEMSHIM_MANAGED_LIMIT": "64M"}
            run = self.run_program("heap_budget", policy, env=env)
            self.assertIn(f"heap ok ({policy})", run.stdout)
            self.assertEqual(self.only_stats(run)["decisions"]["refused"]["calls"], 1, policy)

    def test_arrays_under_the_budget(self):
        # CUDA arrays: counted from creation to destroy, refused past the budget under every policy
        # (they cannot be host memory), room made by moving movable memory out under swap and auto
        # (progs/arrays_budget.cc checks the bytes and cuMemGetInfo).
        for policy in ("auto", "spill", "swap", "off"):
            env = {"GPUMEMSHIM_POLICY": policy, "GPUMEMSHIM_DEVICE_LIMIT": "16M", "GPUMEMSHIM_MANAGED_LIMIT": "64M",
                   "GPUMEMSHIM_SWAP_CHUNK": "2M"}
            run = self.run_program("arrays_budget", policy, env=env)
            self.assertIn(f"arrays ok ({policy})", run.stdout)
            d = self.only_stats(run)["decisions"]
            self.assertEqual(d["refused"]["calls"], 1, policy)
            self.assertEqual(d["evicted"]["bytes"] >= 4 * MiB, policy in ("auto", "swap"), policy)


class PreloadSwap(PreloadCase):
    """(n) Movable memory: progs/swap.cc checks the calls that reach the stand-in driver and every
    byte through the moves; this checks the shim's statistics."""

    # Context order unless a test says otherwise (the programs check its calls; scan order, the
    # default, is set where tested).
    ENV = {"GPUMEMSHIM_POLICY": "swap", "GPUMEMSHIM_DEVICE_LIMIT": "8M", "GPUMEMSHIM_MANAGED_LIMIT": "256M",
           "GPUMEMSHIM_SWAP_CHUNK": "4M", "GPUMEMSHIM_SWAP_ORDER": "context"}

    def test_swap(self):
        run = self.run_program("swap", env=self.ENV)
        self.assertIn("swap ok", run.stdout)
        s = self.only_stats(run)
        d = s["decisions"]
        self.assertEqual((d["converted_swap"]["calls"], d["converted_swap"]["bytes"]), (18, 202 * MiB),
                         "a, b, c, d, e (five times), f, x, y, z, w, the second x, y and z, big")
        # z and w get the space y had.
        self.assertEqual((d["swap_reused"]["calls"], d["swap_reused"]["bytes"]), (9, 34 * MiB), "d, e (five times), f, z, w")
        self.assertEqual((d["prefetched"]["calls"], d["prefetched"]["bytes"]), (2, 8 * MiB), "a, then b")
        self.assertEqual((d["evicted"]["calls"], d["evicted"]["bytes"]), (5, 20 * MiB),
                         "a, b, c, then x for y, then the second y for the second z")
        self.assertEqual(d["converted_managed"]["calls"], 0)
        self.assertEqual(s["live_bytes_at_exit"]["device"], 0)

    def test_scan_order(self):
        # Marks from the first launch on: the program counts them (quiet memory has none, test_quiet).
        run = self.run_program("swap_scan", env=dict(self.ENV, GPUMEMSHIM_SWAP_ORDER="scan", GPUMEMSHIM_SWAP_PARK="on",
                                                     GPUMEMSHIM_SWAP_QUIET="off"))
        self.assertIn("swap scan ok", run.stdout)
        d = self.only_stats(run)["decisions"]
        # In: b, a, b (for a copy), then what the last copies and the memset need; out: one more
        # (c, made over the budget). Then d, e, f: d out for f, and the checks of d, e and f bring
        # each back in, evicting the least recently used (e and f, used by the same launch, in
        # address order: e first). Then g, h, k on a full card: g out for k, and the checks of g,
        # h and k bring each back in, evicting the least recently used (h, k, g).
        self.assertEqual((d["prefetched"]["calls"], d["evicted"]["calls"]), (5 + 3 + 3, 6 + 4 + 4))
        self.assertEqual(self.only_stats(run)["live_bytes_at_exit"]["device"], 0)

    def test_unchanged_chunks_are_not_copied_out(self):
        env = dict(self.ENV, GPUMEMSHIM_SWAP_ORDER="scan", GPUMEMSHIM_SWAP_PARK="on", GPUMEMSHIM_SWAP_LEARN="off")
        run = self.run_program("swap_unchanged", env=env)
        self.assertIn("swap unchanged ok", run.stdout)
        d = self.only_stats(run)["decisions"]
        # Left as they came in: a, c and a in the steps, then c once b's tail changed, then a for the
        # checks' copies (which bring b in); b with its head unchanged. Copied out: a, b and c the
        # first time (never in), then b, changed, then b's tail.
        self.assertEqual(d["swap_unchanged"]["calls"], 6)
        self.assertEqual(d["swap_unchanged"]["bytes"], (5 * 4 + 2) * MiB)
        self.assertEqual(d["evicted"]["calls"], 6 + 4)
        self.assertEqual(self.only_stats(run)["live_bytes_at_exit"]["device"], 0)

    def test_chunks_come_back_piece_by_piece(self):
        env = dict(self.ENV, GPUMEMSHIM_SWAP_ORDER="scan", GPUMEMSHIM_SWAP_LEARN="off", GPUMEMSHIM_SWAP_EARLY="off",
                   GPUMEMSHIM_SWAP_QUIET="off")
        run = self.run_program("swap_lazy", "lazy", env=env)
        self.assertIn("swap lazy ok", run.stdout)
        d = self.only_stats(run)["decisions"]
        # a2's piece was left out when A came back for a1 (twice it left before a2's launch: once
        # uncopied, and at the end), and a1's and a2's pieces came in as their launches needed them.
        self.assertGreater(d["swap_filled"]["calls"], 0)
        self.assertGreaterEqual(d["swap_unfilled"]["bytes"], 2 * MiB)
        # The piece of a2, freed, left A uncopied (the program checks the bytes of that move).
        self.assertEqual(d["swap_dead_pieces"]["bytes"], 2 * MiB)
        self.assertEqual(self.only_stats(run)["live_bytes_at_exit"]["device"], 0)
        # Off: every chunk comes back whole (the program checks the bytes each launch copies).
        run = self.run_program("swap_lazy", "off", env=dict(env, GPUMEMSHIM_SWAP_LAZY="off"))
        self.assertIn("swap lazy ok", run.stdout)
        d = self.only_stats(run)["decisions"]
        self.assertEqual(d["swap_filled"]["calls"], 0)
        # Twice: A comes back whole for the checks of a1 and leaves again for x's.
        self.assertEqual(d["swap_dead_pieces"]["bytes"], 4 * MiB)

    def test_forecast_keeps_memory_freed_idle(self):
        evicted = {}
        for forecast in ("off", "on"):
            run = self.run_program("swap_forecast", env=dict(self.ENV, GPUMEMSHIM_DEVICE_LIMIT="12M",
                                                             GPUMEMSHIM_SWAP_FORECAST=forecast))
            self.assertIn("swap forecast ok", run.stdout)
            s = self.only_stats(run)
            evicted[forecast] = s["decisions"]["evicted"]["bytes"] // MiB
            self.assertEqual(s["live_bytes_at_exit"]["device"], 0)
        # Off: 12 MiB an iteration (the previous g for a, w for the new g, a chunk of a for w).
        # On: once two gs were freed idle, the previous g stays and dies on the device, w goes for a
        # and the new g takes the freed room: 8 MiB an iteration, in the last six.
        self.assertEqual(evicted, {"off": 116, "on": 116 - 6 * 4})

    def test_early_eviction(self):
        # Recency from the first launch on (quiet, m's first use would be unseen: test_quiet).
        env = dict(self.ENV, GPUMEMSHIM_DEVICE_LIMIT="12M", GPUMEMSHIM_SWAP_ORDER="scan", GPUMEMSHIM_SWAP_QUIET="off")
        got = {}
        for name, early, args in (("off", "off", []), ("on", "on", []), ("busy", "on", ["busy"]),
                                  ("unscanned", "on", ["unscanned"])):
            run = self.run_program("swap_early", *args, env=dict(env, GPUMEMSHIM_SWAP_EARLY=early))
            self.assertIn("swap early ok", run.stdout)
            s = self.only_stats(run)
            d = s["decisions"]
            got[name] = (d["evicted"]["bytes"] // MiB, d["evicted_early"]["bytes"] // MiB)
            self.assertEqual(s["live_bytes_at_exit"]["device"], 0)
        # m goes out once an iteration either way (4 MiB): for room in the first two iterations,
        # which teach the shim that it goes after one use, and early in the two after them; then
        # the step learner follows the loop, which forgets what recency taught: for room (now by
        # next use) in two more, and early in the last four; never early while the GPU may still
        # use it (busy), or while work no scan sees may (unscanned).
        self.assertEqual(got["off"], (40, 0))
        self.assertEqual(got["on"], (40, 24))
        self.assertEqual(got["busy"], (40, 0))
        self.assertEqual(got["unscanned"], (40, 0))

    def test_quiet(self):
        """GPUMEMSHIM_SWAP_QUIET: launches over movable memory that never moved are not marked; the
        first round waits for the context once; then launches are marked (progs/swap_quiet.cc)."""
        env = dict(self.ENV, GPUMEMSHIM_DEVICE_LIMIT="12M", GPUMEMSHIM_SWAP_ORDER="scan")
        for quiet, args in (("on", []), ("off", ["off"])):
            run = self.run_program("swap_quiet", *args, env=dict(env, GPUMEMSHIM_SWAP_QUIET=quiet))
            self.assertIn("swap quiet ok" if quiet == "on" else "swap quiet off ok", run.stdout)
            s = self.only_stats(run)
            d = s["decisions"]
            # Out: a for d, b for a, then the checks' copies take c, d and a out and bring b, c, d in.
            self.assertEqual((d["evicted"]["calls"], d["prefetched"]["calls"]), (5, 4))
            self.assertEqual(s["live_bytes_at_exit"]["device"], 0)

    def test_step_learner(self):
        """GPUMEMSHIM_SWAP_LEARN: four ranges used in turn, room for three. By recency every range
        comes back every time round; once the learner follows the loop, room comes from the range
        used farthest ahead. A launch off the loop starts the learning over; the data stays right. A
        kernel launched through a new handle each time round (same name) is the same step."""
        env = dict(self.ENV, GPUMEMSHIM_DEVICE_LIMIT="12M")
        moved = {}
        for learn, args in (("off", []), ("on", []), ("on", ["broken"]), ("on", ["renamed"])):
            run = self.run_program("swap_learn", *args, env=dict(env, GPUMEMSHIM_SWAP_LEARN=learn))
            self.assertIn("swap learn ok", run.stdout)
            s = self.only_stats(run)
            self.assertEqual(s["live_bytes_at_exit"]["device"], 0)
            moved[(learn, tuple(args))] = s["decisions"]["prefetched"]["bytes"] // MiB
        off, on, broken = moved[("off", ())], moved[("on", ())], moved[("on", ("broken",))]
        # 16 rounds of 4 ranges: by recency each comes back every round (the first round's too: the
        # fourth range's making evicted the first).
        self.assertEqual(off, 16 * 4 * 4)
        # The learner follows from the fifth round on (two rounds to find the step, two recorded):
        # then one range comes back per round and a third, not four.
        self.assertLess(on, off * 6 // 10)
        self.assertLess(on, broken, "starting over costs")
        self.assertEqual(moved[("on", ("renamed",))], on)

    def test_step_learner_brings_memory_back_ahead(self):
        """Scan order: the range the next iteration uses first comes back while the loop runs launches on
        other memory, ahead of its own launch, into the room the loop's frees left."""
        reasons = {}
        for learn in ("off", "on"):
            d = tempfile.mkdtemp(prefix="gms-learn-")
            self.addCleanup(shutil.rmtree, d, True)
            env = dict(self.ENV, GPUMEMSHIM_DEVICE_LIMIT="16M", GPUMEMSHIM_SWAP_ORDER="scan", GPUMEMSHIM_SWAP_LEARN=learn,
                       GPUMEMSHIM_SWAP_AHEAD="on",
                       GPUMEMSHIM_TRACE=os.path.join(d, "t.jsonl"))
            run = self.run_program("swap_learn", "ahead", env=env)
            self.assertIn("swap learn ok", run.stdout)
            self.assertEqual(self.only_stats(run)["live_bytes_at_exit"]["device"], 0)
            with open(os.path.join(d, "t.jsonl")) as f:
                lines = [json.loads(l) for l in f]
            reasons[learn] = collections.Counter(l["reason"] for l in lines if l["type"] == "decision")
        ahead = [r for r in reasons["on"] if "ahead" in r]
        self.assertTrue(ahead, reasons["on"])
        self.assertGreaterEqual(reasons["on"][ahead[0]], 10, "one each iteration once the step is learnt")
        self.assertFalse([r for r in reasons["off"] if "ahead" in r])
        self.assertTrue([r for r in reasons["on"] if "farthest ahead" in r], reasons["on"])

    def test_move_waits_for_work_being_queued(self):
        # Another thread's kernel, still being queued, uses the chunk a round of moves takes for
        # room: in either order the round waits until it is queued (and then for it: its mark, or
        # the context), so the kernel's writes reach the copy out. The program checks every word.
        for order in ("scan", "context"):
            for seen in ("unscanned", "scanned"):
                run = self.run_program("swap_race", seen, env=dict(self.ENV, GPUMEMSHIM_SWAP_ORDER=order))
                self.assertIn("swap race ok", run.stdout)
                s = self.only_stats(run)
                # m for y; in scan order the checks of m, x and y (copies, planned there) then
                # bring each back, evicting x, y, m.
                self.assertEqual(s["decisions"]["evicted"]["bytes"] // MiB, 4 + 3 * 4 if order == "scan" else 4,
                                 (order, seen))
                self.assertEqual(s["live_bytes_at_exit"]["device"], 0)

    def test_pointer_queries_at_parked_memory(self):
        # cuPointerGetAttribute(s) and cuMemGetAddressRange at parked chunks answer (the program
        # checks what); the chunks they asked about are mapped again, not moved.
        run = self.run_program("swap_query", env=dict(self.ENV, GPUMEMSHIM_SWAP_ORDER="scan", GPUMEMSHIM_SWAP_PARK="on"))
        self.assertIn("swap query ok", run.stdout)
        s = self.only_stats(run)
        self.assertGreaterEqual(s["decisions"]["evicted"]["calls"], 3, "a, b and c for c, d and e")
        self.assertEqual(s["live_bytes_at_exit"]["device"], 0)

    def test_textures_at_parked_memory(self):
        # Kernels reading parked chunks through texture objects (linear, pitched, a handle made
        # again after a destroy) find them mapped and on the device: the program checks every word,
        # and without the scan taking handles for memory its kernel faults.
        run = self.run_program("swap_tex", env=dict(self.ENV, GPUMEMSHIM_SWAP_ORDER="scan", GPUMEMSHIM_SWAP_PARK="on"))
        self.assertIn("swap tex ok", run.stdout)
        s = self.only_stats(run)
        self.assertGreaterEqual(s["decisions"]["prefetched"]["calls"], 3, "a, b and c brought in for the kernels")
        self.assertEqual(s["live_bytes_at_exit"]["device"], 0)

    def test_pointer_tables_at_parked_memory(self):
        # Kernels reaching parked chunks only through tables of their addresses (one filled by a
        # copy from the host, one written by a kernel) find them mapped: the program checks every
        # word, and without the shim taking the tables' addresses for uses its kernel faults.
        # With GPUMEMSHIM_MIN_SIZE=1 the tables are movable memory themselves (as small allocations
        # past the budget are under auto).
        for min_size in ("1M", "1"):
            with self.subTest(min_size=min_size):
                run = self.run_program("swap_tables", env=dict(self.ENV, GPUMEMSHIM_SWAP_ORDER="scan", GPUMEMSHIM_SWAP_PARK="on",
                                                               GPUMEMSHIM_MIN_SIZE=min_size))
                self.assertIn("swap tables ok", run.stdout)
                s = self.only_stats(run)
                self.assertGreaterEqual(s["decisions"]["prefetched"]["calls"], 4, "a and b, then c and d brought in through tables")
                self.assertEqual(s["decisions"]["converted_swap"]["calls"], 9 if min_size == "1M" else 13)
                self.assertEqual(s["live_bytes_at_exit"]["device"], 0)

    def test_hidden_work_at_parked_memory(self):
        # Stream memory operations writing words of parked chunks, and a kernel named as NCCL's
        # that finds its buffer through a descriptor in host memory: the program checks every word;
        # without the stream-operation hooks the writes fail, without the name rule the kernel faults.
        run = self.run_program("swap_hidden_work", env=dict(self.ENV, GPUMEMSHIM_SWAP_ORDER="scan", GPUMEMSHIM_SWAP_PARK="on"))
        self.assertIn("swap hidden work ok", run.stdout)
        self.assertEqual(self.only_stats(run)["live_bytes_at_exit"]["device"], 0)

    def test_scan_order_checks_fail_in_context_order(self):
        # The program's expectations of scan order do not hold in the default order: it fails a
        # check, without crashing.
        run = self.run_program("swap_scan", env=self.ENV, expect_rc=1)
        self.assertIn("check failed", run.stderr)

    def test_prefetch_off_moves_nothing(self):
        # The program expects moves, so it fails its first check on them, without crashing.
        run = self.run_program("swap", env=dict(self.ENV, GPUMEMSHIM_PREFETCH="off"), expect_rc=1)
        self.assertIn("check failed", run.stderr)
        self.assertEqual(self.only_stats(run)["decisions"]["prefetched"]["calls"], 0)


class PreloadBadInput(PreloadCase):
    """(i) Bad arguments and bad options: no crash, everything counted, results still right."""

    @staticmethod
    def expected():
        e = Expect()
        e.fail("mem_alloc", 2)            # before cuInit, without a context
        e.fail("mem_get_info", 3)         # NULL outputs
        e.fail("mem_alloc", 5)            # NULL dptr, 0 bytes, NULL pitch, NULL dptr (pitch, async)
        e.fail("mem_alloc_managed")
        e.fail("host_alloc", 2)
        e.alloc("mem_alloc", "device", 4096)
        e.free("mem_free", "device", 4096)
        e.fail("mem_free")                # double free: the driver refuses it
        e.call("mem_free", 0)             # cuMemFree(0)
        e.call("mem_free", 0)             # memory the shim never saw allocated
        e.anomalies["unknown_frees"] += 1
        e.call("host_free", 0)            # likewise, pinned
        e.anomalies["unknown_frees"] += 1
        e.fail("host_free")               # cuMemFreeHost(NULL)
        e.fail("memcpy", 8)
        e.fail("memset", 2)
        e.fail("launch", 4)
        e.fail("host_register")
        e.fail("host_unregister", 2)
        e.alloc("mem_alloc", "device", 4096)
        e.fail("prefetch")
        e.fail("advise")
        e.free("mem_free", "device", 4096)
        e.fail("vmm", 4)
        e.workload(64 * KiB)
        return e

    def test_bad_input(self):
        run = self.run_program("bad_input")
        self.assert_stats(self.only_stats(run), self.expected())
        self.assert_quiet(run)

    def one_line_about(self, run, variable):
        lines = [l for l in run.stderr.splitlines() if variable in l]
        self.assertEqual(len(lines), 1, f"expected one line naming {variable}:\n{run.stderr}")
        self.assertTrue(lines[0].startswith("gpumemshim: "), lines[0])

    def test_invalid_policy(self):
        run = self.run_program("bad_input", env={"GPUMEMSHIM_POLICY": "bogus"})
        self.one_line_about(run, "GPUMEMSHIM_POLICY")
        self.assertIn("bad_input: ok", run.stdout)
        # Pass-through still observes and counts everything.
        self.assert_stats(self.only_stats(run), self.expected())

    def test_invalid_threshold(self):
        run = self.run_program("bad_input", env={"GPUMEMSHIM_HOST_THRESHOLD": "lots"})
        self.one_line_about(run, "GPUMEMSHIM_HOST_THRESHOLD")
        self.assert_stats(self.only_stats(run), self.expected())

    def test_unknown_variable(self):
        run = self.run_program("bad_input", env={"GPUMEMSHIM_NO_SUCH_OPTION": "1"})
        self.one_line_about(run, "GPUMEMSHIM_NO_SUCH_OPTION")
        self.assert_stats(self.only_stats(run), self.expected())

    def test_invalid_stats_value(self):
        run = self.run_program("bad_input", env={"GPUMEMSHIM_STATS": ""})
        self.one_line_about(run, "GPUMEMSHIM_STATS")
        self.assertIn("bad_input: ok", run.stdout)
        self.assertEqual(run.stats, {})

    def test_unwritable_stats_path(self):
        run = self.run_program("bad_input", env={"GPUMEMSHIM_STATS": "/nonexistent-gms-dir/stats-%p.json"})
        self.one_line_about(run, "GPUMEMSHIM_STATS")
        self.assertIn("bad_input: ok", run.stdout)
        self.assertEqual(run.stats, {})


class PreloadOldDriver(PreloadCase):
    """(j) A CUDA 12.6 driver (no batch copies) under the shim: lookups stay honest."""

    def test_old_driver(self):
        run = self.run_program("old_driver")
        e = Expect().workload(64 * KiB)
        e.workload(64 * KiB)
        self.assert_stats(self.only_stats(run), e)
        self.assert_quiet(run)

    def test_new_program_on_old_driver(self):
        # Linked against the CUDA 13.0 stand-in, run on the 12.6 one: the program only uses what
        # the older driver has, so it runs, under the shim (which exports more) as without it.
        run = self.run_program("direct", fake_dir=Config.old_fake_dir)
        self.assert_stats(self.only_stats(run), Expect().workload(64 * KiB))


# ---- the trace (GPUMEMSHIM_TRACE; shim/trace/FORMAT.md) ------------------------------------------------------

TRACE_EVENTS = {"alloc", "free", "copy", "decision", "budget", "register", "unregister", "cache",
                "kernel", "memcpy", "memset", "um", "range", "launch"}
TRACE_BOOKKEEPING = {"site", "dropped"}


def limit_file_size(limit, ignore_sigxfsz):
    """A preexec_fn: a file-size limit (writes past it fail with EFBIG, and raise SIGXFSZ)."""
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        if ignore_sigxfsz:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    return apply


class PreloadTrace(PreloadCase):
    """(l) The trace: a valid header, exactly the allocations, frees and copies the program made (the
    statistics' counts), an `end` line; call sites, decisions and budgets; fork children; flush on
    demand; and a file that cannot be written (missing directory, planted symlink, full disk) never
    stops the program."""

    def trace_dir(self):
        d = tempfile.mkdtemp(prefix="gms-trace-")
        self.addCleanup(shutil.rmtree, d, True)
        return d

    def traced(self, name, *args, env=None, pattern="trace-%p.jsonl", directory=None, **kw):
        d = directory or self.trace_dir()
        e = {"GPUMEMSHIM_TRACE": os.path.join(d, pattern)}
        e.update(env or {})
        return self.run_program(name, *args, env=e, **kw), d

    def read_trace(self, path):
        lines = []
        with open(path, encoding="utf-8") as f:
            for number, text in enumerate(f, 1):
                self.assertTrue(text.endswith("\n"), f"{path}:{number}: a line without its end")
                try:
                    lines.append(json.loads(text))
                except ValueError as exc:
                    self.fail(f"{path}:{number} is not JSON ({exc}): {text!r}")
        self.assertTrue(lines, f"{path} is empty")
        return lines

    def traces(self, d):
        """pid -> lines of every trace-<pid>.jsonl in d."""
        out = {}
        for f in sorted(os.listdir(d)):
            if f.startswith("trace-") and f.endswith(".jsonl"):
                lines = self.read_trace(os.path.join(d, f))
                self.assertEqual(f, f"trace-{lines[0]['pid']}.jsonl", "%p must expand to the writer's pid")
                out[lines[0]["pid"]] = lines
        self.assertEqual([f for f in os.listdir(d) if ".tmp-" in f], [], "a temporary file was left behind")
        return out

    def only_trace(self, d):
        t = self.traces(d)
        self.assertEqual(len(t), 1, f"expected one trace file, got those of pids {sorted(t)}")
        return next(iter(t.values()))

    def check_trace(self, lines, program, pid=None, complete=True):
        """Header, end line and bookkeeping; returns the event lines."""
        h = lines[0]
        self.assertEqual((h.get("type"), h.get("format"), h.get("version")), ("header", "gpumemshim-trace", 1), h)
        if pid is not None:
            self.assertEqual(h["pid"], pid)
        self.assertTrue(h["argv"][0].endswith("/preload_" + program), h["argv"])
        self.assertIsInstance(h["t0_ns"], int)
        self.assertRegex(h["wall_t0"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertTrue(h["host"])
        self.assertEqual(len(h["devices"]), 1, h["devices"])
        dev = h["devices"][0]
        self.assertEqual((dev["index"], dev["total_bytes"]), (0, 16 << 30))
        self.assertIn("fake device", dev["name"])
        self.assertLessEqual(dev["budget_bytes"], dev["total_bytes"])
        # CUPTI refuses the stand-in driver: the header says why, in one line.
        self.assertIsInstance(h["cupti"], str)
        self.assertNotEqual(h["cupti"], "ok")
        self.assertTrue(h["cupti"].strip() and "\n" not in h["cupti"])
        self.assertIsInstance(h["faults"], bool)
        body = lines[1:]
        if complete:
            end = lines[-1]
            self.assertEqual(end["type"], "end", "the last line of a finished trace")
            body = lines[1:-1]
        else:
            self.assertNotEqual(lines[-1]["type"], "end")
        kinds = {l["type"] for l in body}
        self.assertEqual(kinds - TRACE_EVENTS - TRACE_BOOKKEEPING, set(), "unknown line types")
        self.assertNotIn("header", kinds)
        events = [l for l in body if l["type"] in TRACE_EVENTS]
        for e in events:
            self.assertIsInstance(e["t"], int, e)
            self.assertGreaterEqual(e["t"], 0, e)
        if complete:
            self.assertEqual(end["events"], len(events), "the end line counts the event lines")
            self.assertEqual(end["dropped"], 0)
            self.assertNotIn("dropped", kinds)
            self.assertGreaterEqual(end["t"], max([e["t"] for e in events], default=0))
        return events

    def assert_events(self, events, expect, stats):
        """Exactly the regions and copies the program made: the model's, and the statistics' counts."""
        made = sorted((e["kind"], e["bytes"]) for e in events if e["type"] == "alloc")
        gone = sorted(e["bytes"] for e in events if e["type"] == "free")
        self.assertEqual(made, sorted(expect.regions_made))
        self.assertEqual(gone, sorted(n for _, n in expect.regions_gone))
        live = set()
        for e in events:
            if e["type"] == "alloc":
                self.assertRegex(e["ptr"], r"^0x[0-9a-f]+$")
                self.assertEqual(e["placement"], "passthrough" if e["kind"] != "device" else e["placement"])
                self.assertTrue(e["api"].startswith("cu"), e)
                live.add(e["ptr"])
            elif e["type"] == "free":
                self.assertIn(e["ptr"], live, f"a free of a region the trace never made: {e}")
        copies = [e for e in events if e["type"] == "copy"]
        for direction in DIRECTIONS:
            mine = [c for c in copies if c["dir"] == direction]
            want = stats["copies_by_direction"][direction]
            self.assertEqual((len(mine), sum(c["bytes"] for c in mine)), (want["calls"], want["bytes"]), direction)
        for kind in HOST_KINDS:
            mine = [c for c in copies if c.get("host_kind") == kind]
            want = stats["copies_by_host_kind"][kind]
            self.assertEqual((len(mine), sum(c["bytes"] for c in mine)), (want["calls"], want["bytes"]), kind)
        for c in copies:
            self.assertTrue(c["api"] and c["api"].startswith("cuMemcpy"), c)
            self.assertEqual(c["path"], "driver")
            self.assertGreaterEqual(c["dur_ns"], 0)
            self.assertEqual("host_kind" in c, c["dir"] not in ("dtod", "peer"), c)

    def test_events_equal_the_statistics(self):
        models = {
            "direct": lambda: Expect().workload(64 * KiB),
            "direct_ptds": lambda: Expect().workload(64 * KiB),
            "dlopen": lambda: Expect().workload(64 * KiB),
            "old_dlsym": lambda: Expect().workload(64 * KiB),
            "procaddr": lambda: Expect().workload(64 * KiB).workload(64 * KiB).every_hook(),
            "bad_input": PreloadBadInput.expected,
        }
        for name, model in models.items():
            with self.subTest(program=name):
                run, d = self.traced(name)
                stats = self.only_stats(run)
                self.assert_stats(stats, model())
                events = self.check_trace(self.only_trace(d), name, pid=stats["pid"])
                self.assert_events(events, model(), stats)
                self.assert_quiet(run)

    def test_sixteen_threads(self):
        run, d = self.traced("threads")
        stats = self.only_stats(run)
        expect = PreloadThreads.expected(PreloadThreads)
        self.assert_stats(stats, expect)
        t = PreloadThreads  # per thread: its pinned buffer, ITERS device buffers of T, one of P
        expect.regions_made = ([("pinned_host", t.T)] + [("device", t.T)] * t.ITERS + [("device", t.P)]) * t.THREADS
        expect.regions_gone = list(expect.regions_made)
        events = self.check_trace(self.only_trace(d), "threads", pid=stats["pid"])
        self.assert_events(events, expect, stats)
        self.assert_quiet(run)

    def test_call_sites(self):
        run, d = self.traced("trace", "--sites")
        lines = self.only_trace(d)
        if lines[0]["sites_min_bytes"] == 0:
            self.skipTest("built without libunwind: no call sites")
        self.assertEqual(lines[0]["sites_min_bytes"], 1 * MiB)
        events = self.check_trace(lines, "trace")
        allocs = [e for e in events if e["type"] == "alloc"]
        self.assertEqual([a["bytes"] for a in allocs], [2 * MiB] * 4 + [4096])
        ids = [a.get("site") for a in allocs]
        self.assertIsNone(ids[4], "4 KiB is below GPUMEMSHIM_TRACE_SITES")
        self.assertTrue(all(ids[:4]), ids)
        self.assertEqual(len(set(ids[:3])), 1, "one call site, one id")
        self.assertNotEqual(ids[3], ids[0])
        sites = {}
        for i, l in enumerate(lines):
            if l["type"] == "site":
                self.assertNotIn(l["id"], sites, "a site line is written once")
                first_use = next(j for j, e in enumerate(lines) if e.get("type") == "alloc" and e.get("site") == l["id"])
                self.assertLess(i, first_use, "a site line comes before its first use")
                sites[l["id"]] = l["frames"]
        self.assertEqual(sorted(sites), sorted({ids[0], ids[3]}))
        for sid, fn in ((ids[0], "site_a"), (ids[3], "site_b")):
            frames = sites[sid]
            self.assertTrue(frames)
            for f in frames:
                self.assertEqual(set(f), {"module", "offset", "symbol"})
                self.assertRegex(f["offset"], r"^0x[0-9a-f]+$")
            self.assertFalse(any("libgpumemshim" in (f["module"] or "") for f in frames), "the shim's frames are skipped")
            ours = [f for f in frames if (f["module"] or "").endswith("/preload_trace")]
            self.assertTrue(ours, frames)
            self.assertIn(fn, [f["symbol"] for f in ours], frames)

    def test_call_sites_threshold(self):
        run, d = self.traced("trace", "--sites", env={"GPUMEMSHIM_TRACE_SITES": "0"})
        lines = self.only_trace(d)
        self.assertEqual(lines[0]["sites_min_bytes"], 0)
        self.assertFalse([l for l in lines if l["type"] == "site" or "site" in l])
        run, d = self.traced("trace", "--sites", env={"GPUMEMSHIM_TRACE_SITES": "4K"})
        lines = self.only_trace(d)
        if lines[0]["sites_min_bytes"] == 0:
            self.skipTest("built without libunwind: no call sites")
        allocs = [e for e in lines if e["type"] == "alloc"]
        self.assertEqual(len({a["site"] for a in allocs}), 3)

    def test_spill_decisions_and_budget(self):
        run, d = self.traced("trace", "--spill", env={"GPUMEMSHIM_POLICY": "spill", "GPUMEMSHIM_DEVICE_LIMIT": "1M"})
        lines = self.only_trace(d)
        self.assertEqual(lines[0]["policy"], "spill")
        self.assertEqual(lines[0]["devices"][0]["budget_bytes"], MiB)
        events = self.check_trace(lines, "trace")
        allocs = [(e["bytes"], e["kind"], e["placement"]) for e in events if e["type"] == "alloc"]
        self.assertEqual(allocs, [(512 * KiB, "device", "device"), (MiB, "managed", "managed")])
        decisions = [e for e in events if e["type"] == "decision"]
        self.assertEqual([(x["what"], x["bytes"], x["device"]) for x in decisions], [("spill_managed", MiB, 0)])
        self.assertTrue(decisions[0]["reason"])
        spilled = next(e for e in events if e["type"] == "alloc" and e["kind"] == "managed")
        self.assertEqual(decisions[0]["ptr"], spilled["ptr"])
        budgets = [e for e in events if e["type"] == "budget"]
        self.assertTrue(budgets)
        for b in budgets:
            self.assertEqual((b["device"], b["limit"]), (0, MiB))
        self.assertEqual(budgets[-1]["used"], 0, "the last budget line has the values at exit")
        per_device = [b["t"] for b in budgets]
        self.assertTrue(all(b - a >= 1000000 for a, b in zip(per_device, per_device[1:-1])),
                        "at most one budget line per millisecond (the last one, at exit, excepted)")

    def test_launch_events_name_the_allocations(self):
        """Under a policy that tracks memory, each scanned launch has a `launch` line listing the live
        allocations its arguments point into (the step timelines the schedule planner reads)."""
        # No call sites: swap.cc's second thread, exiting, frees libunwind's per-thread cache
        # through the munmap hook after ThreadSanitizer let the thread go, which it cannot take a
        # lock in (test_call_sites has them).
        run, d = self.traced("swap", env=dict(PreloadSwap.ENV, GPUMEMSHIM_TRACE_SITES="0"))
        self.assertIn("swap ok", run.stdout)
        events = self.check_trace(self.only_trace(d), "swap")
        launches = [e for e in events if e["type"] == "launch"]
        self.assertGreaterEqual(len(launches), 3, "swap.cc launches kernels over movable memory")
        seqs = [e["seq"] for e in launches if not e.get("part")]
        self.assertEqual(seqs, sorted(seqs), "one thread: seq grows in file order")
        self.assertEqual(len(seqs), len(set(seqs)))
        live = {}
        referenced = 0
        for e in events:
            if e["type"] == "alloc":
                live[e["ptr"]] = e
            elif e["type"] == "free":
                live.pop(e["ptr"], None)
            elif e["type"] == "launch":
                self.assertRegex(e["fn"], r"^0x[0-9a-f]+$")
                self.assertLessEqual(len(e["regions"]), 8)
                for r in e["regions"]:
                    self.assertIn(r, live, f"{e}: not a live allocation")
                    self.assertEqual(live[r]["placement"], "swap")
                referenced += len(e["regions"])
        self.assertGreater(referenced, 0, "some launch pointed into movable memory")

    def test_fork_child_writes_its_own_trace(self):
        run, d = self.traced("trace", "--fork")
        child = int(run.value("child_pid"))
        traces = self.traces(d)
        self.assertIn(child, traces, "the fork child must write its own trace (%p)")
        self.assertEqual(len(traces), 2, f"traces of pids {sorted(traces)}")
        parent = next(p for p in traces if p != child)
        e_parent = Expect().workload(64 * KiB)
        e_parent.alloc("mem_alloc", "device", 32 * KiB)
        e_parent.free("mem_free", "device", 32 * KiB)
        e_child = Expect().workload(128 * KiB)
        self.assertEqual(sorted(run.stats), sorted(traces))
        for pid, model in ((parent, e_parent), (child, e_child)):
            events = self.check_trace(traces[pid], "trace", pid=pid)
            self.assert_events(events, model, run.stats[pid])
        self.assert_quiet(run)

    def test_fork_child_without_pid_pattern(self):
        run, d = self.traced("trace", "--fork", pattern="trace.jsonl")
        child = int(run.value("child_pid"))
        lines = self.read_trace(os.path.join(d, "trace.jsonl"))
        self.assertEqual(sorted(os.listdir(d)), ["trace.jsonl"])
        parent = lines[0]["pid"]
        self.assertNotEqual(parent, child)
        e_parent = Expect().workload(64 * KiB)
        e_parent.alloc("mem_alloc", "device", 32 * KiB)
        e_parent.free("mem_free", "device", 32 * KiB)
        self.assert_events(self.check_trace(lines, "trace", pid=parent), e_parent, run.stats[parent])
        warnings = [l for l in run.stderr.splitlines() if l.startswith("gpumemshim:")]
        self.assertEqual(len(warnings), 1, run.stderr)
        self.assertIn(f"process {child}", warnings[0])
        self.assertIn("not traced", warnings[0])

    def test_flush_on_demand(self):
        d = self.trace_dir()
        path = os.path.join(d, "trace.jsonl")
        run, _ = self.traced("trace", "--flush", path, pattern="trace.jsonl", directory=d)
        self.assertEqual(run.value("flush_rc"), "0")
        lines = self.read_trace(path)
        self.assertEqual(int(run.value("lines_after_flush")), len(lines), "everything was in the file at the flush")
        events = self.check_trace(lines, "trace", complete=False)  # _exit: no destructor, no end line
        stats_model = Expect().workload(64 * KiB)
        self.assertEqual(len([e for e in events if e["type"] == "alloc"]), len(stats_model.regions_made))
        self.assertEqual(len([e for e in events if e["type"] == "copy"]), 7)
        run = self.run_program("trace", "--flush", path)  # not tracing: -1
        self.assertEqual(run.value("flush_rc"), "-1")

    def test_cupti_refusal_is_said_once(self):
        run, d = self.traced("direct", env={"GPUMEMSHIM_LOG": "info"})
        reason = self.only_trace(d)[0]["cupti"]
        lines = [l for l in run.stderr.splitlines() if "CUPTI" in l]
        self.assertEqual(len(lines), 1, run.stderr)
        self.assertTrue(lines[0].startswith("gpumemshim: ") and reason in lines[0], lines[0])

    def test_cupti_unified_memory_records_of_every_kind(self):
        # The stand-in CUPTI (fake/fake_cupti.cc) records nothing about managed memory made before
        # its unified-memory counters were on, as the real one does: the trace must start before
        # the program's first cuMemAllocManaged, and CUPTI is flushed before the memory is freed.
        cupti_dir = os.path.realpath(os.path.join(Config.fake_dir, "..", "fakecupti"))
        pc = 0x55D4C0004000
        script = ";".join([
            "htod:2097152:0x7f0000000000:3",      # cause coherence (CUPTI's flags)
            "dtoh:65536:0x7f0000200000:1",        # cause user
            "dtod:4096:0x7f0000000000",
            "gpu_fault:5:0x7f0000001000:2",       # access write
            f"cpu_fault:{pc}:0x7f0000002000",     # value: the faulting instruction
            "thrashing:2097152:0x7f0000000000",
            "throttling:0:0x7f0000000000",
            "remote_map:2097152:0x7f0000000000",
            "gpu_fault:907452736313848329:0x7f0000003000",  # no driver makes this: the report leaves it out
        ])
        env = {"LD_LIBRARY_PATH": cupti_dir + ":" + Config.fake_dir, "FAKE_CUPTI_UM": script,
               "GPUMEMSHIM_TRACE_FAULTS": "1"}
        run, d = self.traced("trace", "--managed", env=env)
        lines = self.only_trace(d)
        self.assertEqual(lines[0]["cupti"], "ok", lines[0])
        # The stand-in driver keeps managed pages mapped when they "move": the page census is off, and
        # says why, rather than counting no migration.
        census = [l for l in lines if l["type"] == "census"]
        self.assertEqual([c["state"] for c in census], ["off"], census)
        self.assertIn("page table does not follow managed memory", census[0]["why"])
        self.assertEqual([l for l in lines if l["type"] == "pages"], [])
        um = {l["counter"]: l for l in lines if l["type"] == "um" and l.get("value") != 907452736313848329}
        self.assertEqual(sorted(um), sorted(["htod", "dtoh", "dtod", "gpu_fault", "cpu_fault", "thrashing",
                                             "throttling", "remote_map"]), f"unified-memory lines: {um}")
        self.assertEqual((um["htod"]["bytes"], um["htod"]["address"]), (2097152, "0x7f0000000000"))
        self.assertEqual(um["dtoh"]["bytes"], 65536)
        self.assertEqual(um["dtod"]["bytes"], 4096)
        # Faults move nothing: their value is a count (GPU) or an instruction's address (CPU).
        self.assertEqual((um["gpu_fault"]["bytes"], um["gpu_fault"]["value"]), (0, 5))
        self.assertEqual((um["cpu_fault"]["bytes"], um["cpu_fault"]["value"]), (0, pc))
        for l in um.values():
            self.assertGreaterEqual(l.get("end", l["t"]), l["t"], l)
        # The report counts the CPU fault once, leaves the impossible GPU fault record out and says so.
        tool = os.path.join(os.path.dirname(Config.shim), "..", "tools", "gpumemshim")
        path = next(os.path.join(d, f) for f in os.listdir(d))
        rep = subprocess.run([tool, "report", "--json", path], capture_output=True, text=True, timeout=60)
        self.assertEqual(rep.returncode, 0, rep.stderr)
        totals = json.loads(rep.stdout)["totals"]["um"]
        self.assertEqual((totals["gpu_faults"], totals["cpu_faults"]), (5, 1), totals)
        self.assertIn("1 unified-memory records with impossible values", rep.stderr)

    def test_cupti_starts_at_cuinit_and_the_file_at_the_first_event(self):
        # CUPTI starts when the program initialises the driver, before a framework can set up its
        # own copy and keep CUPTI's one subscriber (JAX's: tools/report/README.md); the file still
        # starts at the first event, so a process that only asks whether there is a GPU writes none.
        cupti_dir = os.path.realpath(os.path.join(Config.fake_dir, "..", "fakecupti"))
        d = self.trace_dir()
        marks = tempfile.mkdtemp(prefix="gms-cupti-")
        self.addCleanup(shutil.rmtree, marks, True)
        env = self.base_env()
        env.update({"LD_PRELOAD": self.preload_list(), "GPUMEMSHIM_TRACE": os.path.join(d, "trace-%p.jsonl"),
                    "LD_LIBRARY_PATH": cupti_dir + ":" + Config.fake_dir})
        init_only = "import ctypes; assert ctypes.CDLL('libcuda.so.1').cuInit(0) == 0"
        for name, code, files in (("init", init_only, 0), ("nothing", "pass", 0)):
            with self.subTest(program=name):
                env["FAKE_CUPTI_STARTED"] = mark = os.path.join(marks, name)
                proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(os.path.exists(mark), name == "init", "CUPTI started at cuInit, and only then")
                self.assertEqual(len(os.listdir(d)), files, os.listdir(d))
        # A traced program: CUPTI is on from its cuInit, and the header says so.
        env["FAKE_CUPTI_STARTED"] = os.path.join(marks, "traced")
        run, td = self.traced("trace", env={"LD_LIBRARY_PATH": cupti_dir + ":" + Config.fake_dir,
                                             "FAKE_CUPTI_STARTED": env["FAKE_CUPTI_STARTED"]})
        self.assertTrue(os.path.exists(env["FAKE_CUPTI_STARTED"]))
        self.assertEqual(self.only_trace(td)[0]["cupti"], "ok")

    def test_no_cuda_no_trace(self):
        d = self.trace_dir()
        env = self.base_env()
        env["LD_PRELOAD"] = self.preload_list()
        env["GPUMEMSHIM_TRACE"] = os.path.join(d, "trace-%p.jsonl")
        for cmd in (["true"], [sys.executable, "-c", "import json; json.dumps([1] * 100000)"]):
            with self.subTest(cmd=cmd[0]):
                proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(os.listdir(d), [])

    def one_warning(self, run, *needles):
        lines = [l for l in run.stderr.splitlines() if l.startswith("gpumemshim:")]
        self.assertEqual(len(lines), 1, run.stderr)
        for n in needles:
            self.assertIn(n, lines[0])
        return lines[0]

    def test_unwritable_path(self):
        d = self.trace_dir()
        os.mkdir(os.path.join(d, "a-directory"))
        for path in ("/nonexistent-gms-dir/trace-%p.jsonl", os.path.join(d, "a-directory"), d + "/"):
            with self.subTest(path=path):
                run = self.run_program("direct", env={"GPUMEMSHIM_TRACE": path})
                self.one_warning(run, "untraced")
                self.assert_stats(self.only_stats(run), Expect().workload(64 * KiB))
        self.assertEqual(sorted(os.listdir(d)), ["a-directory"])
        self.assertEqual(os.listdir(os.path.join(d, "a-directory")), [])

    def test_planted_symlink_is_not_followed(self):
        # A symlink at the path is neither followed nor replaced: one warning, the program untraced.
        d = self.trace_dir()
        victim = os.path.join(d, "victim")
        with open(victim, "w") as f:
            f.write("precious\n")
        os.chmod(victim, 0o644)
        missing = os.path.join(d, "would-be-created")
        for link_target in (victim, missing):
            with self.subTest(target=link_target):
                path = os.path.join(d, "trace.jsonl")
                if os.path.lexists(path):
                    os.unlink(path)
                os.symlink(link_target, path)
                run, _ = self.traced("direct", pattern="trace.jsonl", directory=d)
                with open(victim) as f:
                    self.assertEqual(f.read(), "precious\n", "the symlink's target was written")
                self.assertEqual(os.stat(victim).st_mode & 0o777, 0o644)
                self.assertFalse(os.path.exists(missing), "the symlink's target was created")
                self.assertEqual(os.readlink(path), link_target, "the symlink must be left alone")
                self.one_warning(run, "untraced", "symlink")
                self.assertEqual(sorted(os.listdir(d)), ["trace.jsonl", "victim"], "a temporary file was left")
                self.assert_stats(self.only_stats(run), Expect().workload(64 * KiB))

    def test_existing_file_is_replaced(self):
        d = self.trace_dir()
        path = os.path.join(d, "trace.jsonl")
        with open(path, "w") as f:
            f.write("old contents\n" * 1000)
        os.chmod(path, 0o644)
        self.traced("direct", pattern="trace.jsonl", directory=d)
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
        self.check_trace(self.read_trace(path), "direct")

    def test_full_disk(self):
        # RLIMIT_FSIZE stands in for a full disk: writes past it fail (EFBIG) and raise SIGXFSZ, which
        # kills by default. Both with SIGXFSZ ignored and with its default action, the program runs
        # to the end with exact statistics; tracing stops with one warning.
        limit = 64 * KiB
        for ignore in (True, False):
            with self.subTest(sigxfsz="ignored" if ignore else "default"):
                run, d = self.traced("threads", preexec=limit_file_size(limit, ignore))
                self.one_warning(run, "tracing stopped", "the program goes on")
                self.assert_stats(self.only_stats(run), PreloadThreads.expected(PreloadThreads))
                path = os.path.join(d, os.listdir(d)[0])
                self.assertLessEqual(os.path.getsize(path), limit)
                with open(path, encoding="utf-8", errors="replace") as f:
                    self.assertTrue(f.readline().startswith('{"type":"header"'))


# ---- entry point ------------------------------------------------------------------------------------------

def sanitizer_runtime(sanitize, given):
    if given:
        return given
    for name, lib in (("address", "libasan.so"), ("thread", "libtsan.so")):
        if name in sanitize:
            cc = os.environ.get("CC", "gcc")
            out = subprocess.run([cc, f"-print-file-name={lib}"], capture_output=True, text=True).stdout.strip()
            if not out or out == lib or not os.path.exists(out):
                sys.exit(f"cannot find the {name} sanitizer runtime ({cc} -print-file-name={lib})")
            return os.path.realpath(out)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shim", required=True, help="path of libgpumemshim.so")
    parser.add_argument("--fake-dir", required=True, help="directory holding the stand-in libcuda.so.1")
    parser.add_argument("--old-fake-dir", default=None,
                        help="directory holding the stand-in built as a CUDA 12.6 driver (default: fakecuda-12.6 next to --fake-dir)")
    parser.add_argument("--bin-dir", required=True, help="directory holding the preload_* programs")
    parser.add_argument("--sanitize", default=None, help="GMS_SANITIZE of the build (default: $GMS_SANITIZE)")
    parser.add_argument("--sanitizer-runtime", default=None, help="runtime to preload first (found with gcc if not given)")
    args, rest = parser.parse_known_args()
    Config.shim = os.path.realpath(args.shim)
    Config.fake_dir = os.path.realpath(args.fake_dir)
    Config.old_fake_dir = os.path.realpath(args.old_fake_dir or os.path.join(Config.fake_dir, "..", "fakecuda-12.6"))
    Config.bin_dir = os.path.realpath(args.bin_dir)
    Config.sanitize = (args.sanitize if args.sanitize is not None else os.environ.get("GMS_SANITIZE", "")).strip()
    Config.sanitizer_runtime = sanitizer_runtime(Config.sanitize, args.sanitizer_runtime or None)
    for path in (Config.shim, os.path.join(Config.fake_dir, "libcuda.so.1"),
                 os.path.join(Config.old_fake_dir, "libcuda.so.1")):
        if not os.path.exists(path):
            sys.exit(f"{path} does not exist: build first")
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
