"""GPU tests: the shim under real CUDA programs and frameworks, on a machine with an NVIDIA GPU.

What is checked (each run of the shim sets GPUMEMSHIM_LOG=warn and GPUMEMSHIM_STATS=<dir>/stats-%p.json):
  counts.cu, built with the static and with the shared CUDA runtime:
    - the shim's statistics equal, key by key, the counts the program reports for what it did:
      allocations, frees, pinned host allocations and frees (calls and bytes), copies by family,
      by direction and by host memory kind (pageable / pinned), memsets, launches, peak and
      at-exit live bytes; no errors, no anomalies;
    - the program's stdout (a checksum of every result) is byte-identical with and without the shim;
    - the shim prints no warning.
  fw_torch.py, fw_cupy.py, fw_numba.py (each skipped when its framework is not installed):
    - run under the shim with N and 2N iterations, the difference of the two runs' statistics is
      exactly N times the per-iteration counts the script declares (start-up noise cancels);
    - stdout is byte-identical with and without the shim; the shim prints no warning.

Environment: GMS_SHIM (default build/shim/libgpumemshim.so), GMS_BUILD_DIR (default build/; the
CUDA programs are in $GMS_BUILD_DIR/tests/gpu), GMS_FW_ITERS (N, default 10).
The whole module is skipped on a machine without a usable GPU.
"""
import json
import os
import subprocess
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_env  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT_S = 120  # per program; each should finish in seconds
FW_ITERS = int(os.environ.get("GMS_FW_ITERS", "10"))

_NO_GPU = gpu_env.gpu_unavailable_reason()
if _NO_GPU:
    pytest.skip(f"no GPU on this machine: {_NO_GPU} (GPU tests run on the H100 test machine: see README)",
                allow_module_level=True)


# ---------------------------------------------------------------------------------------------
# Running a program with and without the shim


class Run:
    def __init__(self, argv, with_shim, returncode, stdout, stderr, stats, stats_path):
        self.argv, self.with_shim, self.returncode = argv, with_shim, returncode
        self.stdout, self.stderr, self.stats, self.stats_path = stdout, stderr, stats, stats_path

    def describe(self):
        return f"`{' '.join(self.argv)}` ({'with' if self.with_shim else 'without'} the shim)"

    def stderr_tail(self, n=3000):
        text = self.stderr.decode(errors="replace")
        return text[-n:] if text else "(empty)"

    def shim_lines(self):
        return [l for l in self.stderr.decode(errors="replace").splitlines() if l.startswith("gpumemshim")]


def _clean_env():
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("GPUMEMSHIM_") or k == "LD_PRELOAD":
            del env[k]
    env["GPUMEMSHIM_LOG"] = "warn"
    # GPU safety: the default policy (spill) may create managed memory, so every run caps it; tests
    # that place memory on purpose set their own cap.
    env["GPUMEMSHIM_MANAGED_LIMIT"] = "16G"
    return env


def run_program(argv, shim=None, workdir=None, env_extra=None):
    """Runs argv to completion; with shim, preloaded with statistics written to a fresh directory.
    Fails the test on a non-zero exit, a timeout, or (with the shim) a missing statistics file.
    env_extra: more variables (GPUMEMSHIM_POLICY...) for this run."""
    env = _clean_env()
    env.update(env_extra or {})
    stats_dir = None
    if shim:
        stats_dir = tempfile.mkdtemp(prefix="gms-stats-", dir=workdir)
        env["LD_PRELOAD"] = shim
        env["GPUMEMSHIM_STATS"] = os.path.join(stats_dir, "stats-%p.json")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=workdir)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"`{' '.join(argv)}` ran past {TIMEOUT_S} s and was killed; stderr tail:\n"
                    f"{err.decode(errors='replace')[-3000:]}")
    run = Run(argv, bool(shim), proc.returncode, out, err, None, None)
    if proc.returncode != 0:
        # Test programs say what failed on stdout, the shim on stderr.
        pytest.fail(f"{run.describe()} exited with {proc.returncode}; stdout tail:\n"
                    f"{out.decode(errors='replace')[-1500:]}\nstderr tail:\n{run.stderr_tail()}")
    if shim:
        # The child is the process itself (no shell in between), so its pid names its file. Other
        # files may exist: helper processes that made CUDA calls write their own.
        path = os.path.join(stats_dir, f"stats-{proc.pid}.json")
        if not os.path.exists(path):
            pytest.fail(f"{run.describe()}: the shim wrote no statistics at {path} "
                        f"(files there: {sorted(os.listdir(stats_dir))}); stderr tail:\n{run.stderr_tail()}")
        with open(path) as f:
            try:
                run.stats = json.load(f)
            except json.JSONDecodeError as e:
                pytest.fail(f"{run.describe()}: statistics file {path} is not valid JSON: {e}")
        run.stats_path = path
    return run


# ---------------------------------------------------------------------------------------------
# Comparing statistics


def flatten(obj, prefix=""):
    """{'families': {'mem_alloc': {'calls': 3}}} -> {'families.mem_alloc.calls': 3} (numbers only)."""
    flat = {}
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            flat.update(flatten(v, key + "."))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            flat[key] = v
    return flat


def flatten_stats(stats):
    """The shim's statistics as flat keys, plus launches_total (every launch kind together: which
    driver entry point a runtime uses for <<<>>> is the runtime's business, not the test's)."""
    flat = flatten({k: v for k, v in stats.items() if k not in ("format", "version", "pid")})
    flat["launches_total"] = sum(stats.get("launches", {}).values())
    return flat


def mismatches(expected, measured, describe_measured=None):
    """Lines naming every expected key whose measured value differs (or is missing)."""
    lines = []
    for key in sorted(expected):
        want = expected[key]
        got = measured.get(key)
        if got != want:
            detail = describe_measured(key) if describe_measured else ""
            lines.append(f"  {key}: measured {got if got is not None else 'MISSING'}, expected {want}{detail}")
    return lines


def nonzero_anomalies(stats):
    return {k: v for k, v in stats.get("anomalies", {}).items() if v}


def require_file(path, what):
    if not os.path.isfile(path):
        pytest.fail(f"{what} not found at {path}: build the project with a CUDA compiler "
                    f"(tests/gpu/device_check.sh does) or set GMS_BUILD_DIR / GMS_SHIM")
    return path


@pytest.fixture(scope="session")
def shim():
    return os.path.abspath(require_file(gpu_env.shim_path(), "the shim (libgpumemshim.so)"))


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("gms-gpu"))


# ---------------------------------------------------------------------------------------------
# counts.cu, static and shared CUDA runtime

_counts_cache = {}


def counts_runs(variant, shim, workdir):
    """(run without the shim, run with it, expected counts) for gms_counts_<variant>, run once."""
    if variant not in _counts_cache:
        exe = require_file(os.path.join(gpu_env.gpu_bin_dir(), f"gms_counts_{variant}"),
                           f"the {variant}-runtime counts program")
        plain = run_program([exe], workdir=workdir)
        shimmed = run_program([exe], shim=shim, workdir=workdir)
        expected = None
        for line in shimmed.stdout.decode(errors="replace").splitlines():
            if line.startswith("{"):
                expected = json.loads(line)["expected"]
        if expected is None:
            pytest.fail(f"{shimmed.describe()} printed no expected-counts line; stdout:\n{shimmed.stdout[-2000:]}")
        _counts_cache[variant] = (plain, shimmed, flatten(expected))
    return _counts_cache[variant]


@pytest.mark.parametrize("variant", ["static", "shared"])
def test_counts_match_program(variant, shim, workdir):
    plain, shimmed, expected = counts_runs(variant, shim, workdir)
    expected = dict(expected)
    measured = flatten_stats(shimmed.stats)
    # No call the program made may have failed.
    for fam in ("mem_alloc", "mem_free", "host_alloc", "host_free", "memcpy", "memset", "launch"):
        expected[f"families.{fam}.errors"] = 0
    bad = mismatches(expected, measured)
    anomalies = nonzero_anomalies(shimmed.stats)
    if bad or anomalies:
        pytest.fail(f"gms_counts_{variant}: the shim's statistics ({shimmed.stats_path}) differ from what the "
                    f"program did, in {len(bad)} of {len(expected)} values:\n" + "\n".join(bad)
                    + (f"\n  anomalies (should all be 0): {anomalies}" if anomalies else "")
                    + f"\nshim stderr tail:\n{shimmed.stderr_tail()}")


@pytest.mark.parametrize("variant", ["static", "shared"])
def test_counts_output_identical(variant, shim, workdir):
    plain, shimmed, _ = counts_runs(variant, shim, workdir)
    assert shimmed.stdout == plain.stdout, (
        f"gms_counts_{variant}: stdout differs with the shim\n--- without ---\n{plain.stdout.decode(errors='replace')}"
        f"--- with ---\n{shimmed.stdout.decode(errors='replace')}")


@pytest.mark.parametrize("variant", ["static", "shared"])
def test_counts_shim_quiet(variant, shim, workdir):
    _, shimmed, _ = counts_runs(variant, shim, workdir)
    assert not shimmed.shim_lines(), f"gms_counts_{variant}: the shim warned:\n" + "\n".join(shimmed.shim_lines())


# ---------------------------------------------------------------------------------------------
# Frameworks: delta of N and 2N iterations

FRAMEWORKS = {"torch": "torch", "cupy": "cupy", "numba": "numba"}
_fw_cache = {}


def fw_result(run):
    for line in reversed(run.stdout.decode(errors="replace").splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    pytest.fail(f"{run.describe()} printed no result line; stdout:\n{run.stdout.decode(errors='replace')[-2000:]}")


def framework_runs(fw, shim, workdir):
    """(without the shim, N), (with, N), (with, 2N) for fw_<fw>.py, run once per session."""
    if fw not in _fw_cache:
        pytest.importorskip(FRAMEWORKS[fw])
        script = os.path.join(HERE, f"fw_{fw}.py")
        n = FW_ITERS
        plain = run_program([sys.executable, script, str(n)], workdir=workdir)
        once = run_program([sys.executable, script, str(n)], shim=shim, workdir=workdir)
        twice = run_program([sys.executable, script, str(2 * n)], shim=shim, workdir=workdir)
        _fw_cache[fw] = (plain, once, twice)
    return _fw_cache[fw]


@pytest.mark.parametrize("fw", sorted(FRAMEWORKS))
def test_framework_delta_counts(fw, shim, workdir):
    plain, once, twice = framework_runs(fw, shim, workdir)
    n = FW_ITERS
    per_iter = fw_result(once)["per_iteration"]
    a, b = flatten_stats(once.stats), flatten_stats(twice.stats)
    delta = {k: b[k] - a[k] for k in per_iter if k in a and k in b}
    expected = {k: n * v for k, v in per_iter.items()}
    bad = mismatches(expected, delta,
                     lambda k: f" (= {n} x {per_iter[k]}; run of {n}: {a.get(k)}, run of {2 * n}: {b.get(k)})")
    if bad:
        pytest.fail(f"fw_{fw}.py: statistics of {2 * n} iterations minus those of {n} differ from {n} times the "
                    f"per-iteration counts, in {len(bad)} of {len(expected)} values:\n" + "\n".join(bad)
                    + f"\nstatistics: {once.stats_path}, {twice.stats_path}")


@pytest.mark.parametrize("fw", sorted(FRAMEWORKS))
def test_framework_output_identical(fw, shim, workdir):
    plain, once, _ = framework_runs(fw, shim, workdir)
    assert once.stdout == plain.stdout, (
        f"fw_{fw}.py: stdout differs with the shim\n--- without ---\n{plain.stdout.decode(errors='replace')}"
        f"--- with ---\n{once.stdout.decode(errors='replace')}")


@pytest.mark.parametrize("fw", sorted(FRAMEWORKS))
def test_framework_shim_quiet(fw, shim, workdir):
    _, once, twice = framework_runs(fw, shim, workdir)
    lines = once.shim_lines() + twice.shim_lines()
    assert not lines, f"fw_{fw}.py: the shim warned:\n" + "\n".join(lines)
