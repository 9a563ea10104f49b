"""GPU tests of recycled host blocks (GPUMEMSHIM_HOST_POOL): PyTorch, CuPy and numba copying into
new host buffers again and again give byte-identical results with the pool, the pool really served
them (blocks reused, copies at pinned speed through registrations that survived the frees), and a
fork child reads memory the shim registered. The framework scripts of test_gpu.py run under the
pool as well. GPU safety: host memory only; the programs use about 100 MiB of device memory.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_env  # noqa: E402

_NO_GPU = gpu_env.gpu_unavailable_reason()
if _NO_GPU:
    pytest.skip(f"no GPU on this machine: {_NO_GPU} (GPU tests run on the H100 test machine: see README)",
                allow_module_level=True)

from test_gpu import FRAMEWORKS, FW_ITERS, HERE, run_program, shim, workdir  # noqa: E402,F401

POOL = {"GPUMEMSHIM_HOST_POOL": "1G", "GPUMEMSHIM_MANAGED_LIMIT": "4G"}
SCRIPT = os.path.join(HERE, "copies", "pool_fw.py")
_plain = {}


def plain(key, argv, workdir):
    if key not in _plain:
        _plain[key] = run_program(argv, workdir=workdir)
    return _plain[key]


@pytest.mark.parametrize("fw", sorted(FRAMEWORKS))
def test_repeated_copies_into_new_buffers(fw, shim, workdir):
    pytest.importorskip(FRAMEWORKS[fw])
    argv = [sys.executable, SCRIPT, fw]
    want = plain(f"pool_{fw}", argv, workdir)
    run = run_program(argv, shim=shim, workdir=workdir, env_extra=POOL)
    assert run.stdout == want.stdout, f"{fw}: results differ with the pool:\n{run.stdout!r}\n{want.stdout!r}"
    d = run.stats["decisions"]
    assert d["pool_reused"]["calls"] >= 15, f"{fw}: the pool did not serve the repeated buffers: {d}"
    assert d["copy_registered"]["calls"] >= 15, f"{fw}: copies did not run at pinned speed: {d}"
    assert d["registered"]["calls"] <= 6, f"{fw}: registrations were not kept with the pool blocks: {d}"


def test_fork_child_reads_registered_memory(shim, workdir):
    pytest.importorskip("torch")
    argv = [sys.executable, SCRIPT, "fork"]
    for env in (POOL, {"GPUMEMSHIM_REGISTER": "always"}):
        run = run_program(argv, shim=shim, workdir=workdir, env_extra=env)
        assert run.stdout.decode().strip() == "fork child=0 parent_intact=True", (env, run.stdout, run.stderr_tail())
        assert run.stats["decisions"]["registered"]["calls"] >= 1, "the buffer was never registered: nothing tested"


@pytest.mark.parametrize("fw", sorted(FRAMEWORKS))
def test_framework_scripts_under_the_pool(fw, shim, workdir):
    pytest.importorskip(FRAMEWORKS[fw])
    argv = [sys.executable, os.path.join(HERE, f"fw_{fw}.py"), str(FW_ITERS)]
    want = plain(f"fw_{fw}", argv, workdir)
    run = run_program(argv, shim=shim, workdir=workdir, env_extra=POOL)
    assert run.stdout == want.stdout, f"fw_{fw}: results differ with the pool"
