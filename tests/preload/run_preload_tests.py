#!/usr/bin/env python3
"""Preload tests: the real libgpumemshim.so preloaded over a stand-in libcuda.so.1 (no GPU).

Each test runs one of the programs in progs/ with
    LD_PRELOAD=<sanitizer runtime, if any>:<libgpumemshim.so>
    LD_LIBRARY_PATH=<directory of the stand-in libcuda.so.1>
    GPUMEMSHIM_STATS=<temporary directory>/stats-%p.json
and compares the statistics the shim wrote with what the program is known to have done, exactly:
every family's calls/bytes/errors, copies by direction and by host memory kind, launches, peak and
exit live bytes per memory kind, anomalies. Sections this runner does not know (added to the shim
later) must be all zero for these programs, which run with the default policy (off).

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
import json
import os
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

    def free(self, family, kind, n):
        self.call(family, n)
        self.live_sub(kind, n)

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
        """progs/procaddr.cc every_hook(): each of the 117 hooked implementations once."""
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
        return env

    def preload_list(self):
        libs = []
        if Config.sanitizer_runtime:
            libs.append(Config.sanitizer_runtime)
        libs.append(Config.shim)
        return ":".join(libs)

    def run_program(self, name, *args, env=None, shim=True, expect_rc=0, timeout=180, fake_dir=None):
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
            proc = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            self.fail(f"{' '.join(cmd)} did not finish in {timeout}s (deadlock?)\n{exc.stdout}\n{exc.stderr}")
        if proc.returncode != expect_rc:
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
                "host", "bad_input", "old_driver"]


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
        self.assertIn("117 hooked implementations called", run.stdout)
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

    def test_registration_by_the_cost_model(self):
        d = self.decisions(self.run_program("copies"))
        # 9 blocks in the main part (6 when the sanitizer owns malloc: steps 1 to 3 are skipped),
        # registered at their first copy (64 MiB pays at once); each thread's 4 blocks of 8 MiB are
        # staged at their first copy and registered at the second.
        regs = (6 if Config.shadowed_malloc() else 9) + 64
        self.assertEqual(d["registered"]["calls"], regs)
        self.assertEqual(d["unregistered"]["calls"], regs, "every registration dropped before its memory went")
        self.assertEqual(d["invalidated"]["calls"], regs)
        self.assertEqual(d["copy_staged"]["calls"], 64)
        self.assertEqual(d["cache_evicted"]["calls"], 0)
        self.assertGreater(d["cache_hit"]["calls"], 0)

    def test_register_off_stages_large_copies(self):
        d = self.decisions(self.run_program("copies", env={"GPUMEMSHIM_REGISTER": "off"}))
        self.assertEqual(d["registered"]["calls"], 0)
        self.assertEqual(d["copy_registered"]["calls"], 0)
        self.assertGreater(d["copy_staged"]["calls"], 64)

    def test_a_small_limit_evicts_least_recently_used(self):
        d = self.decisions(self.run_program("copies", "--lru", env={"GPUMEMSHIM_REGISTER_LIMIT": "100M"}))
        self.assertEqual(d["registered"]["calls"], 4)
        self.assertEqual(d["cache_evicted"]["calls"], 2)
        self.assertEqual(d["invalidated"]["calls"], 2)
        self.assertEqual(d["unregistered"]["calls"], 4)

    def test_without_the_shim(self):
        self.run_program("copies", shim=False)


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
