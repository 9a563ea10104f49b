"""GPU tests of the placement policies: every policy, with a device budget small enough that the
programs' memory really is spilled or converted, must compute exactly what the program computes
without the shim, and leave nothing behind.

For counts.cu (static and shared CUDA runtime) and the framework scripts (PyTorch, CuPy, numba):
  - stdout (a checksum of every result) is byte-identical to the run without the shim;
  - the shim's decisions show that it really placed memory elsewhere (spilled or converted > 0);
  - counts.cu frees everything it allocates: no device, managed or pinned memory is live at exit.
GPU safety: every run caps the shim's managed and pinned memory (GPUMEMSHIM_MANAGED_LIMIT=4G) and
emulates a small GPU with GPUMEMSHIM_DEVICE_LIMIT; the programs use at most a few hundred MiB.
"""
import json
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_env  # noqa: E402

_NO_GPU = gpu_env.gpu_unavailable_reason()
if _NO_GPU:
    pytest.skip(f"no GPU on this machine: {_NO_GPU} (GPU tests run on the H100 test machine: see README)",
                allow_module_level=True)

from test_gpu import FRAMEWORKS, FW_ITERS, HERE, require_file, run_program, shim, workdir  # noqa: E402,F401

SAFE = {"GPUMEMSHIM_MANAGED_LIMIT": "4G", "GPUMEMSHIM_DEVICE_LIMIT": "16M"}
POLICIES = {
    "auto": {"GPUMEMSHIM_POLICY": "auto"},
    "spill-managed": {"GPUMEMSHIM_POLICY": "spill"},
    "spill-pinned": {"GPUMEMSHIM_POLICY": "spill", "GPUMEMSHIM_SPILL": "pinned"},
    "managed": {"GPUMEMSHIM_POLICY": "managed"},
    "pinned": {"GPUMEMSHIM_POLICY": "pinned"},
    # The defaults: scan order with parking.
    "swap": {"GPUMEMSHIM_POLICY": "swap"},
    "swap-scan-mapped": {"GPUMEMSHIM_POLICY": "swap", "GPUMEMSHIM_SWAP_PARK": "off"},
    # The order for kernels that reach memory by pointers no hook sees.
    "auto-context": {"GPUMEMSHIM_POLICY": "auto", "GPUMEMSHIM_SWAP_ORDER": "context"},
    "swap-context": {"GPUMEMSHIM_POLICY": "swap", "GPUMEMSHIM_SWAP_ORDER": "context"},
}
PLACED_ELSEWHERE = ("spilled_managed", "spilled_pinned", "converted_managed", "converted_pinned", "converted_swap",
                    "spilled_vmm")

_plain = {}


def plain_run(key, argv, workdir):
    if key not in _plain:
        _plain[key] = run_program(argv, workdir=workdir)
    return _plain[key]


def check(key, argv, policy, shim, workdir, budget=None):
    plain = plain_run(key, argv, workdir)
    env = {**SAFE, **POLICIES[policy]}
    if budget:
        env["GPUMEMSHIM_DEVICE_LIMIT"] = budget
    run = run_program(argv, shim=shim, workdir=workdir, env_extra=env)
    assert run.stdout == plain.stdout, (
        f"{key} under policy {policy}: results differ from the run without the shim\n"
        f"--- without ---\n{plain.stdout.decode(errors='replace')[-1500:]}\n"
        f"--- with ---\n{run.stdout.decode(errors='replace')[-1500:]}\nshim stderr:\n{run.stderr_tail()}")
    decisions = run.stats["decisions"]
    elsewhere = sum(decisions[d]["bytes"] for d in PLACED_ELSEWHERE)
    assert elsewhere > 0, f"{key} under policy {policy}: nothing was placed off the device: {decisions}"
    return run


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("variant", ["static", "shared"])
def test_counts_program_under_policy(variant, policy, shim, workdir):
    exe = require_file(os.path.join(gpu_env.gpu_bin_dir(), f"gms_counts_{variant}"),
                       f"the {variant}-runtime counts program")
    run = check(f"counts_{variant}", [exe], policy, shim, workdir)
    live = run.stats["live_bytes_at_exit"]
    for kind in ("device", "managed", "pinned_host"):
        assert live[kind] == 0, f"gms_counts_{variant} under {policy}: {live[kind]} bytes of {kind} live at exit"


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("fw", sorted(FRAMEWORKS))
def test_framework_under_policy(fw, policy, shim, workdir):
    pytest.importorskip(FRAMEWORKS[fw])
    script = os.path.join(HERE, f"fw_{fw}.py")
    # The scripts keep two 2 MiB buffers live at a time: a 3 MiB budget makes spill spill.
    budget = "3M" if policy.startswith("spill") else None
    check(f"fw_{fw}", [sys.executable, script, str(FW_ITERS)], policy, shim, workdir, budget)


MIX_PARTS = ["torch_train", "torch_graph", "cupy", "interop", "numba"]


def _mix(policy, shim, workdir, key, parts, budget="64M"):
    for module in ("torch", "cupy", "numba"):
        pytest.importorskip(module)
    check(key, [sys.executable, os.path.join(HERE, "fw_mix.py"), *parts], policy, shim, workdir, budget)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_frameworks_together_under_policy(policy, shim, workdir):
    """fw_mix.py: PyTorch (caching allocator, cuDNN, a CUDA graph, pinned non-blocking copies),
    CuPy (its pool, cuBLAS, cuFFT, raw kernels) and numba in one process, sharing tensors through
    DLPack and __cuda_array_interface__. It keeps up to about 150 MiB live: a 64 MiB budget makes
    every policy place some of it off the device."""
    _mix(policy, shim, workdir, "fw_mix", MIX_PARTS)


# torch.compile costs 20 to 30 s a process on the H100, so it runs under two policies only: auto,
# the default, and spill.
@pytest.mark.parametrize("policy", ["spill-managed", "auto"])
def test_torch_compile_under_policy(policy, shim, workdir):
    # CuPy's part beside it, and a budget below the two's 20 MiB, so that spill has something to do.
    _mix(policy, shim, workdir, "fw_mix_compiled", ["torch_compiled", "cupy"], budget="8M")


@pytest.mark.parametrize("policy", ["auto", "spill-managed", "swap"])
def test_frameworks_together_with_expandable_segments(policy, shim, workdir, monkeypatch):
    """The same with PyTorch's expandable segments: its allocator maps its own memory with
    cuMemCreate/cuMemMap, which counts against the budget and past it is made in host memory."""
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    _mix(policy, shim, workdir, "fw_mix_expandable", MIX_PARTS)


@pytest.mark.parametrize("policy", ["auto", "spill-managed", "swap", "managed", "pinned"])
def test_expandable_segments_stay_within_the_budget(policy, shim, workdir, monkeypatch):
    """torch_expandable.py: three times a 512 MiB budget in tensors, with expandable segments.
    The device memory the process holds, as NVML sees it (not through the shim), never goes past
    the budget by more than one 128 MiB tensor and PyTorch's 20 MiB segments' rounding; every
    tensor's sum is as without the shim; the memory past the budget was made in host memory (under
    auto, PyTorch's async backend in their place: placed by the shim like any allocation)."""
    pytest.importorskip("torch")
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    monkeypatch.setenv("GMS_TEST_BUDGET_MIB", "512")
    run = check("torch_expandable", [sys.executable, os.path.join(HERE, "torch_expandable.py")], policy, shim,
                workdir, budget="512M")
    peak = re.search(r"peak beyond base MiB: (\w+)", run.stderr.decode(errors="replace"))
    assert peak, run.stderr_tail()
    if peak.group(1) == "none":
        pytest.skip("NVML is not there to measure the device memory from outside the shim")
    assert int(peak.group(1)) <= 512 + 128 + 40, f"{peak.group(0)} under a 512 MiB budget"
    d = run.stats["decisions"]
    placed = d["spilled_vmm"]["bytes"] if not policy.startswith(("auto", "swap")) else \
        d["spilled_managed"]["bytes"] + d["converted_swap"]["bytes"]
    assert placed >= 1 << 30, d


@pytest.mark.parametrize("policy", ["auto", "spill-managed", "swap"])
def test_cupy_async_pool_past_the_budget(policy, shim, workdir):
    """cupy_async_pool.py: CuPy's MemoryAsyncPool (cudaMallocAsync from the device's default pool)
    holding three times a 512 MiB budget: the same sums as without the shim, and the memory past the
    budget placed off the device (the pool's allocations go through the shim like any other)."""
    pytest.importorskip("cupy")
    run = check("cupy_async_pool", [sys.executable, os.path.join(HERE, "cupy_async_pool.py")], policy, shim,
                workdir, budget="512M")
    assert run.stdout.startswith(b"sums"), run.stdout.decode(errors="replace") + run.stderr_tail()


@pytest.mark.parametrize("policy", ["auto", "spill-managed"])
def test_jax_past_its_pool(policy, shim, workdir):
    """jax_big.py: 1.5 GiB of arrays past a 1 GiB budget with JAX's defaults: the results as
    without the shim (XLA's own pool, sized from the budget, would fail with RESOURCE_EXHAUSTED)."""
    pytest.importorskip("jax")
    check("jax_big", [sys.executable, os.path.join(HERE, "jax_big.py")], policy, shim, workdir, budget="1G")


def _jax_same_as_plain(script, policy, budget, shim, workdir, rel=0.0, env=None):
    """Runs tests/gpu/SCRIPT.py (it prints "step 0 ..." first) without the shim and under `policy`
    and `budget`: the same output (every number within `rel` of the plain run's), or skipped where
    JAX has no GPU. XLA plans its computation for the memory the driver reports: told 1 GiB, it
    rematerialises (its log says so), and the float sums come out in another order."""
    pytest.importorskip("jax")
    argv = [sys.executable, os.path.join(HERE, script + ".py")]
    plain = plain_run(script, argv, workdir)
    if not plain.stdout.startswith(b"step 0"):
        pytest.skip(f"JAX has no GPU here: {plain.stdout.decode(errors='replace')[:200]}")
    env = {**SAFE, "GPUMEMSHIM_DEVICE_LIMIT": budget, "GPUMEMSHIM_POLICY": policy, **(env or {})}
    run = run_program(argv, shim=shim, workdir=workdir, env_extra=env)
    if rel == 0.0:
        assert run.stdout == plain.stdout, run.stdout.decode(errors="replace") + run.stderr_tail()
        return run
    number = re.compile(rb"-?\d+\.\d+(?:e-?\d+)?")
    got, want = run.stdout.splitlines(), plain.stdout.splitlines()
    assert [number.sub(b"N", l) for l in got] == [number.sub(b"N", l) for l in want], run.stdout.decode() + run.stderr_tail()
    for g, w in zip(got, want):
        for a, b in zip(number.findall(g), number.findall(w)):
            assert abs(float(a) - float(b)) <= rel * abs(float(b)), f"{g!r} against {w!r}"
    return run


@pytest.mark.parametrize("policy", ["spill", "auto", "swap"])
def test_jax_under_policy(policy, shim, workdir):
    """fw_jax.py: a jitted JAX training loop with JAX's defaults (it preallocates three quarters of
    the 256 MiB budget the driver reports: movable memory under swap; under auto, as under spill,
    ordinary memory, being over a quarter of the budget): every step's loss and parameters as
    without the shim."""
    run = _jax_same_as_plain("fw_jax", policy, "256M", shim, workdir)
    if policy == "swap":
        assert run.stats["decisions"]["converted_swap"]["bytes"] > 0, run.stats["decisions"]


@pytest.mark.parametrize("policy", ["auto", "spill"])
def test_jax_optax_training_past_the_budget(policy, shim, workdir):
    """jax_optax.py: a jitted training loop with optax (SGD with momentum) needing about 1.6 GiB a
    step, under a 1 GiB budget with JAX's defaults: every step's loss and the parameters' checksum
    within 1e-4 of the run without the shim."""
    pytest.importorskip("optax")
    # XLA_FLAGS of the machine's own would decide command buffers (the shim leaves a choice alone).
    run = _jax_same_as_plain("jax_optax", policy, "1G", shim, workdir, rel=1e-4, env={"XLA_FLAGS": ""})
    d = run.stats["decisions"]
    placed = sum(d[k]["bytes"] for k in ("spilled_managed", "converted_swap", "spilled_pinned"))
    assert placed > 0, f"nothing went past the budget: {d}"
    if policy == "auto":
        # Under a limit the shim turns XLA's command buffers off (policy/frameworks.h): the step's
        # kernels come one by one, where memory can move between them, not as graph launches
        # (with them, ten of twelve steps of jax_train.py were one graph launch each).
        launches = run.stats["launches"]
        assert launches["graph"] == 0 and launches["kernel"] + launches["kernel_ex"] > 0, launches
    else:
        # Under spill the shim leaves XLA's command buffers on: the same step is graph launches,
        # which is what the assertion above tells apart.
        assert run.stats["launches"]["graph"] > 0, run.stats["launches"]


@pytest.mark.parametrize("policy", ["default", "auto-context"])
def test_decode_tokens_past_the_budget(policy, shim, workdir):
    """zoo/decode.py: greedy decoding of 24 tokens with a key/value cache by a small Llama-shaped
    model (random bf16 weights, about 32 MiB) under a 16 MiB budget, with the default policy (no
    GPUMEMSHIM_POLICY) and in context order: the same tokens as without the shim, with memory
    really placed off the device or moved."""
    pytest.importorskip("transformers")
    argv = [sys.executable, os.path.join(HERE, "zoo", "decode.py"), "tiny", "--tokens", "24", "--prompt", "32"]
    plain = plain_run("decode", argv, workdir)
    env = dict(SAFE, GPUMEMSHIM_DEVICE_LIMIT="16M")
    if policy != "default":
        env.update(POLICIES[policy])
    run = run_program(argv, shim=shim, workdir=workdir, env_extra=env)
    last_json = lambda r: json.loads(r.stdout.decode().strip().splitlines()[-1])  # noqa: E731
    want, got = last_json(plain), last_json(run)
    assert "digest" in want, plain.stdout.decode()
    assert (got.get("digest"), got.get("first_tokens")) == (want["digest"], want["first_tokens"]), (
        f"tokens differ: {got} against {want}\n{run.stderr_tail()}")
    d = run.stats["decisions"]
    assert sum(d[k]["bytes"] for k in PLACED_ELSEWHERE + ("evicted",)) > 0, d


def _placement_program(tmp_path_factory, name, libs=()):
    from test_copies import build
    return build(tmp_path_factory, name, folder="placement", libs=libs)


def _placement_ok(argv, shim, workdir, device_limit, managed_limit):
    """Runs a placement test program under policy spill with the budget and cap given; it must
    print "ok" (else what it printed is the failure)."""
    env = {"GPUMEMSHIM_POLICY": "spill", "GPUMEMSHIM_DEVICE_LIMIT": device_limit,
           "GPUMEMSHIM_MANAGED_LIMIT": managed_limit}
    run = run_program(argv, shim=shim, workdir=workdir, env_extra=env)
    assert run.stdout.decode().strip() == "ok", run.stdout.decode() + run.stderr_tail()
    return run


def test_placement_rules_on_the_gpu(tmp_path_factory, shim, workdir):
    """placement/rules.cu: pointer attributes and IPC on spilled memory, a stream capture that uses,
    allocates and frees spilled memory, a graph memory node past the budget replayed three times,
    the same graph built by hand (cudaGraphAddMemAllocNode), and a stream-ordered free right after
    a kernel."""
    run = _placement_ok([_placement_program(tmp_path_factory, "rules")], shim, workdir, "64M", "1G")
    d = run.stats["decisions"]
    assert d["spilled_managed"]["calls"] == 5, f"three outside captures, two graph memory nodes: {d}"
    assert d["kept_on_device"]["calls"] >= 1, f"the capture's own allocation: {d}"


@pytest.mark.parametrize("policy", ["auto", "spill-managed"])
def test_arrays_within_the_budget(policy, tmp_path_factory, shim, workdir):
    """placement/arrays.cu: a 64 MiB CUDA array counts against a 256 MiB budget until it is freed,
    its texels read back as written, and a 512 MiB one is refused with out-of-memory; the device
    malloc heap grown by 64 MiB counts and serves kernels' malloc, grown by 512 MiB is refused."""
    exe = _placement_program(tmp_path_factory, "arrays")
    env = {**SAFE, **POLICIES[policy], "GPUMEMSHIM_DEVICE_LIMIT": "256M"}
    run = run_program([exe], shim=shim, workdir=workdir, env_extra=env)
    assert run.stdout.decode().strip() == "ok", run.stdout.decode() + run.stderr_tail()
    assert run.stats["decisions"]["refused"]["calls"] == 2, run.stats["decisions"]


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_textures_under_policy(policy, tmp_path_factory, shim, workdir):
    """placement/swap_tex.cu: kernels reading six 64 MiB buffers through texture objects (linear
    and pitched) under a 128 MiB budget; under swap in scan order with parking, the buffers behind
    the textures are parked when the kernels are launched."""
    exe = _placement_program(tmp_path_factory, "swap_tex")
    plain = plain_run("swap_tex", [exe], workdir)
    assert plain.stdout.decode().strip() == "ok", plain.stdout.decode()
    check("swap_tex", [exe], policy, shim, workdir, "128M")


# Scan order (the default) too: the shim learns the tables (act/tables.h), from the copy that filled
# one and from the first launch of the kernel that wrote the other.
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_hidden_pointers_under_policy(policy, tmp_path_factory, shim, workdir):
    """placement/hidden_ptrs.cu: kernels that reach ten 64 MiB buffers only through pointer tables
    (filled by a copy from the host, written by another kernel) and cuBLAS's batched GEMM over
    arrays of matrix pointers, between kernels that make the shim move the buffers (a 320 MiB
    budget): every word as the host computed it."""
    exe = _placement_program(tmp_path_factory, "hidden_ptrs", libs=("-lcublas",))
    plain = plain_run("hidden_ptrs", [exe], workdir)
    assert plain.stdout.decode().strip() == "ok", plain.stdout.decode()
    check("hidden_ptrs", [exe], policy, shim, workdir, "320M")


def _two_gpus():
    n = gpu_env.gpu_count()
    if n < 2:
        pytest.skip(f"needs two GPUs, this machine has {n} (they ran on 2x H200)")


def test_placement_on_two_gpus(tmp_path_factory, shim, workdir):
    """placement/two_gpus.cu: a budget per device, spill and prefetch per device, a kernel on one
    device over the other's spilled memory, each device's free memory back after the frees."""
    _two_gpus()
    run = _placement_ok([_placement_program(tmp_path_factory, "two_gpus")], shim, workdir, "0:96M,1:48M", "1G")
    d = run.stats["decisions"]
    assert d["spilled_managed"]["calls"] == 2, d
    assert d["kept_on_device"]["calls"] >= 2, d
    assert d["prefetched"]["bytes"] >= 32 << 20, f"device 1's spilled buffer once it fit: {d}"
    assert run.stats["live_bytes_at_exit"]["managed"] == 0


def test_torch_on_two_gpus(shim, workdir):
    _two_gpus()
    pytest.importorskip("torch")
    script = os.path.join(HERE, "placement", "torch_two_gpus.py")
    run = _placement_ok([sys.executable, script], shim, workdir, "0:256M,1:128M", "2G")
    assert run.stats["decisions"]["spilled_managed"]["calls"] >= 2, run.stats["decisions"]
