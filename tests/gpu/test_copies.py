"""GPU tests of fast copies (issue 5): copy_bench.cu's integrity check under every copy mode of the
shim: small copies (the driver's way), large one-shot copies (staged or registered), reused blocks
(registered), an async copy whose source is overwritten as soon as the call returns, device data
read into pageable memory right after an async call, and file-backed mappings read-only and
read-write. GPU safety: 4 GiB of ordinary device memory, no managed memory.
"""
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_env  # noqa: E402

_NO_GPU = gpu_env.gpu_unavailable_reason()
if _NO_GPU:
    pytest.skip(f"no GPU on this machine: {_NO_GPU} (GPU tests run on the H100 test machine: see README)",
                allow_module_level=True)

from test_gpu import HERE, run_program, shim, workdir  # noqa: E402,F401
from test_trace import nvcc_path  # noqa: E402

# The pool (on by default) recycles freed blocks, registrations and all: off in the modes that
# check each path on new memory.
OFF = {"GPUMEMSHIM_HOST_POOL": "off"}
MODES = {
    "auto": OFF,
    "always": {**OFF, "GPUMEMSHIM_REGISTER": "always"},
    "staged": {**OFF, "GPUMEMSHIM_REGISTER": "off"},
    "driver": {**OFF, "GPUMEMSHIM_REGISTER": "off", "GPUMEMSHIM_STAGE": "off"},
    "defaults": {},
    "pool-always": {"GPUMEMSHIM_HOST_POOL": "3G", "GPUMEMSHIM_REGISTER": "always"},
}


def build(tmp_path_factory, name, folder="copies", libs=()):
    nvcc = nvcc_path()
    if not nvcc:
        pytest.skip(f"nvcc not found: cannot build {name}.cu")
    exe = str(tmp_path_factory.mktemp("gms-copies") / name)
    source = os.path.join(HERE, folder, f"{name}.cu")
    for arch in ("-arch=native", "-arch=sm_90"):
        r = subprocess.run([nvcc, "-O2", arch, "-o", exe, source, *libs], capture_output=True, text=True, timeout=300)
        if r.returncode == 0:
            return exe
    pytest.fail(f"nvcc could not build {source}:\n{r.stderr[-3000:]}")


@pytest.fixture(scope="module")
def copy_bench(tmp_path_factory):
    return build(tmp_path_factory, "copy_bench")


@pytest.mark.parametrize("spill", ["managed", "pinned"])
def test_copies_out_of_spilled_memory_wait_for_earlier_work(spill, tmp_path_factory, shim, workdir):
    exe = build(tmp_path_factory, "spilled_order")
    env = {"GPUMEMSHIM_POLICY": "spill", "GPUMEMSHIM_SPILL": spill, "GPUMEMSHIM_DEVICE_LIMIT": "256M",
           "GPUMEMSHIM_MANAGED_LIMIT": "4G"}
    run = run_program([exe], shim=shim, workdir=workdir, env_extra=env)
    assert run.stdout.decode().strip() == "ok", run.stdout
    d = run.stats["decisions"]
    assert d["spilled_" + spill]["calls"] >= 1 and d["copy_on_host"]["calls"] >= 12, d


@pytest.mark.parametrize("mode", sorted(MODES))
def test_copy_integrity(mode, copy_bench, shim, workdir):
    run = run_program([copy_bench, "check"], shim=shim, workdir=workdir, env_extra=MODES[mode])
    assert run.stdout.decode().strip().endswith('{"check": "ok"}'), run.stderr_tail()
    d = run.stats["decisions"]
    if mode == "always":
        assert d["registered"]["calls"] >= 4 and d["copy_registered"]["calls"] > 0, d
        assert d["registered"]["calls"] == d["unregistered"]["calls"], f"a registration outlived its memory: {d}"
    if mode == "staged":
        assert d["copy_staged"]["calls"] > 0 and d["registered"]["calls"] == 0, d
    if mode == "driver":
        assert d["copy_staged"]["calls"] == 0 and d["registered"]["calls"] == 0, d
