#!/usr/bin/env bash
# The one command for the GPU test machine (one H100, CUDA 13, PyTorch, CuPy, numba, pytest):
#   tests/gpu/device_check.sh
# 0. libunwind (call sites in traces): when pkg-config finds none, the Debian packages carried in
#    .deps/libunwind/ (git-ignored: name it in the run's carry) are unpacked into build-gpu-deps/
#    (never into /), and PKG_CONFIG_PATH and LD_LIBRARY_PATH point there;
# 1. configures and builds the project into build-gpu/ (Ninja, GMS_BUILD_TESTS=ON, warnings not
#    fatal); when the main project's tests cannot be configured there (no GoogleTest), it builds the
#    shim and the gpumemshim command with GMS_BUILD_TESTS=OFF and tests/gpu as a project of its own
#    in build-gpu/tests/gpu;
# 2. runs the GPU pytest suite (tests/gpu/test_gpu.py) with -v;
# 3. runs the benchmarks (tests/gpu/bench/run_bench.sh): shim against no shim, side by side;
# 4. prints a short summary.
# Everything is logged under $OUT (default ./out): env.txt, configure.log, build.log, pytest.log,
# pytest.xml, pytest-tmp/ (the shim's statistics files of every run), bench.log, bench.md,
# summary.txt. The whole run stays within about 8 minutes: each step gets what is left of that.
# Environment: OUT, GMS_GPU_BUILD (build directory, default <repo>/build-gpu), GMS_FW_ITERS,
# GMS_CHECK_SECONDS (the whole run, default 470), GMS_PYTEST_SECONDS (the tests, default 240).
# The carried packages (fetched on a Debian machine with internet, in the repo's root):
#   mkdir -p .deps/libunwind && cd .deps/libunwind &&
#   apt-get download libunwind8 libunwind-dev pkgconf-bin libpkgconf3
# pkgconf-bin and libpkgconf3 are used only where the machine has no pkg-config at all.
# Exit status: 0 when everything built, every test passed or skipped, and the benchmarks ran.
set -u -o pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
OUT=${OUT:-./out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export OUT
build=${GMS_GPU_BUILD:-$root/build-gpu}
start=$(date +%s)
deadline=$((start + ${GMS_CHECK_SECONDS:-470}))
status=0
summary=()

note() { printf '%s\n' "$*"; summary+=("$*"); }
elapsed() { echo $(($(date +%s) - start)); }
# seconds for a step: at most $1, leaving $2 for the steps after it, and never under 20
budget() {
  local left=$((deadline - $(date +%s) - $2))
  local want=$1
  ((left < want)) && want=$left
  ((want < 20)) && want=20
  echo "$want"
}

echo "device check: repo $root, build $build, logs $OUT"

# --- 0. what this machine is ---------------------------------------------------------------
{
  echo "date: $(date -u)"
  uname -a
  nvidia-smi -L 2>&1 || echo "nvidia-smi -L failed"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
  nvcc=$(command -v nvcc || true)
  if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc; fi
  echo "nvcc: ${nvcc:-none}"; [ -n "$nvcc" ] && "$nvcc" --version | tail -2
  cmake --version | head -1; ninja --version; gcc --version | head -1
  command -v valgrind >/dev/null && valgrind --version || echo "valgrind: none"
  python3 - <<'EOF'
import importlib, sys
print("python", sys.version.split()[0])
for m in ("pytest", "numpy", "torch", "cupy", "numba", "numba_cuda"):
    try:
        print(m, getattr(importlib.import_module(m), "__version__", "?"))
    except Exception as e:
        print(m, "unavailable:", type(e).__name__, str(e)[:120])
EOF
  python3 "$here/gpu_env.py"
} > "$OUT/env.txt" 2>&1
nvcc=$(command -v nvcc || true)
if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc; fi
cuda_args=()
[ -n "$nvcc" ] && cuda_args=(-DCMAKE_CUDA_COMPILER="$nvcc")
gpu_line=$(python3 "$here/gpu_env.py" 2>&1)
note "GPU: $gpu_line; nvcc: ${nvcc:-none}"

# --- 0b. libunwind --------------------------------------------------------------------------
# The shim dlopens libunwind.so.8 for call sites when the build found libunwind through pkg-config
# (CMakeLists.txt, GMS_HAVE_LIBUNWIND). Where pkg-config finds none, the carried .debs are unpacked
# into prefixes of their own beside the build directory, never into /: the libraries into
# $deps/libunwind (each .pc file's prefix= pointed at the copy), pkgconf into $deps/pkgconf only where
# there is no pkg-config at all. LD_LIBRARY_PATH is exported for the programs the tests run: the shim
# in them dlopens libunwind.so.8 by that name.

# Unpacks a .deb into a directory: dpkg-deb where there is one, else ar and tar (or Python's tarfile
# where tar cannot read the member, e.g. data.tar.xz without xz).
unpack_deb() {
  local deb=$1 dest=$2 tmp member rc
  if command -v dpkg-deb > /dev/null 2>&1; then
    echo "  dpkg-deb -x $deb $dest"
    dpkg-deb -x "$deb" "$dest"
    return
  fi
  tmp=$(mktemp -d) || return 1
  if ! (cd "$tmp" && ar x "$deb"); then
    rm -rf "$tmp"
    return 1
  fi
  member=$(ls "$tmp"/data.tar* 2> /dev/null | head -1)
  if [ -z "$member" ]; then
    echo "  $deb: no data.tar* member"
    rm -rf "$tmp"
    return 1
  fi
  echo "  no dpkg-deb: ar x $deb; tar -xf $(basename "$member") -C $dest"
  if tar -xf "$member" -C "$dest"; then
    rc=0
  else
    echo "  tar could not unpack it; Python's tarfile instead"
    python3 - "$member" "$dest" << 'EOF'
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    try:
        t.extractall(sys.argv[2], filter="tar")
    except TypeError:  # a Python without extraction filters
        t.extractall(sys.argv[2])
EOF
    rc=$?
  fi
  rm -rf "$tmp"
  return $rc
}

deps=${build%/}-deps
unwind_debs=()
pkgconf_debs=()
for deb in "$root"/.deps/libunwind/*.deb; do
  [ -f "$deb" ] || continue
  case $(basename "$deb") in
    pkgconf*|libpkgconf*) pkgconf_debs+=("$deb") ;;
    *) unwind_debs+=("$deb") ;;
  esac
done
{
  echo
  echo "---- libunwind ----"
  echo "carried: ${unwind_debs[*]:-none} ${pkgconf_debs[*]:-}"
  if command -v pkg-config > /dev/null 2>&1; then
    echo "pkg-config: $(command -v pkg-config) $(pkg-config --version 2>&1)"
  else
    echo "pkg-config: none"
  fi
} >> "$OUT/env.txt"
if command -v pkg-config > /dev/null 2>&1 && pkg-config --exists libunwind; then
  unwind_how=system
  unwind_note="libunwind: system ($(pkg-config --modversion libunwind) in $(pkg-config --variable=libdir libunwind))"
elif ((${#unwind_debs[@]})); then
  unwind_how=debs
  unwind_ok=1
  {
    # No pkg-config at all: the carried pkgconf, behind a wrapper that finds its own library.
    if ! command -v pkg-config > /dev/null 2>&1; then
      if ((${#pkgconf_debs[@]})); then
        rm -rf "$deps/pkgconf" && mkdir -p "$deps/pkgconf/bin"
        for deb in "${pkgconf_debs[@]}"; do unpack_deb "$deb" "$deps/pkgconf" || unwind_ok=0; done
        pc_lib=$(dirname "$(find "$deps/pkgconf" -name 'libpkgconf.so*' | head -1)")
        printf '#!/bin/sh\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' \
          "$pc_lib" "$deps/pkgconf/usr/bin/pkgconf" > "$deps/pkgconf/bin/pkg-config"
        chmod +x "$deps/pkgconf/bin/pkg-config"
        export PATH="$deps/pkgconf/bin:$PATH"
        echo "pkg-config: the carried pkgconf through $deps/pkgconf/bin/pkg-config: $(pkg-config --version 2>&1)"
      else
        echo "pkg-config: none, and no pkgconf .deb carried: CMake cannot find libunwind"
        unwind_ok=0
      fi
    fi
    rm -rf "$deps/libunwind" && mkdir -p "$deps/libunwind"
    for deb in "${unwind_debs[@]}"; do unpack_deb "$deb" "$deps/libunwind" || unwind_ok=0; done
    pc=$(find "$deps/libunwind" -name libunwind.pc | head -1)
    if [ -n "$pc" ]; then
      # Debian's .pc files say prefix=/usr, and libdir=${prefix}/lib/<multiarch>: the pkgconfig
      # folder's parent is the library folder.
      pc_dir=$(dirname "$pc")
      unwind_lib=$(dirname "$pc_dir")
      for f in "$pc_dir"/*.pc; do sed -i "s|^prefix=.*|prefix=$deps/libunwind/usr|" "$f"; done
      export PKG_CONFIG_PATH="$pc_dir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
      export LD_LIBRARY_PATH="$unwind_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      echo "PKG_CONFIG_PATH=$PKG_CONFIG_PATH"
      echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
      grep -H '^prefix=' "$pc_dir"/*.pc
      echo "pkg-config --modversion --cflags --libs libunwind: $(pkg-config --modversion libunwind 2>&1) $(pkg-config --cflags --libs libunwind 2>&1)"
      [ "$(pkg-config --variable=libdir libunwind 2>&1)" = "$unwind_lib" ] || unwind_ok=0
      ls -l "$unwind_lib"/libunwind.so*
      ldd "$unwind_lib/libunwind.so.8" 2>&1
      ldd "$unwind_lib/libunwind.so.8" 2>&1 | grep -q "not found" && unwind_ok=0
      # What the shim does: dlopen by that name, then unw_backtrace; and which file that loaded.
      python3 - << 'EOF' || unwind_ok=0
import ctypes
ctypes.CDLL("libunwind.so.8").unw_backtrace
loaded = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libunwind.so.8" in l})
print("dlopen(libunwind.so.8) and unw_backtrace: ok,", " ".join(loaded))
EOF
    else
      echo "no libunwind.pc among the unpacked files"
      unwind_ok=0
    fi
  } >> "$OUT/env.txt" 2>&1
  if ((unwind_ok)); then
    unwind_note="libunwind: from carried debs ($(pkg-config --modversion libunwind) in $unwind_lib)"
  else
    unwind_note="libunwind: the carried debs gave no usable libunwind (see env.txt)"
    status=1
  fi
else
  unwind_how=none
  unwind_note="libunwind: none (pkg-config finds none, no .deb in .deps/libunwind/): traces get no call sites"
fi
echo "$unwind_note" >> "$OUT/env.txt"

# --- 1. configure and build -----------------------------------------------------------------
standalone=0
if timeout "$(budget 120 330)" cmake -G Ninja -S "$root" -B "$build" -DGMS_BUILD_TESTS=ON -DGMS_WERROR=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo ${cuda_args[@]+"${cuda_args[@]}"} > "$OUT/configure.log" 2>&1; then
  note "configure: ok (GMS_BUILD_TESTS=ON)"
else
  echo "---- configure with GMS_BUILD_TESTS=ON failed; shim alone, then tests/gpu stand-alone ----" >> "$OUT/configure.log"
  standalone=1
  rm -rf "$build/tests/gpu"
  if timeout "$(budget 90 330)" cmake -G Ninja -S "$root" -B "$build" -DGMS_BUILD_TESTS=OFF -DGMS_WERROR=OFF \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >> "$OUT/configure.log" 2>&1 &&
     timeout "$(budget 90 330)" cmake -G Ninja -S "$here" -B "$build/tests/gpu" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      ${cuda_args[@]+"${cuda_args[@]}"} >> "$OUT/configure.log" 2>&1; then
    note "configure: main project tests OFF (see configure.log), tests/gpu stand-alone: ok"
  else
    note "configure: FAILED (see $OUT/configure.log)"
    status=1
  fi
fi
grep -E "GPU tests:" "$OUT/configure.log" | sed 's/^-- /  /' || true
# What the configure made of libunwind: GMS_HAVE_LIBUNWIND, as the shim is built.
have_unwind=$(sed -n 's/^#define GMS_HAVE_LIBUNWIND \([0-9]*\).*/\1/p' "$build/generated/gms/build_config.h" 2> /dev/null)
echo "---- libunwind: $unwind_how; GMS_HAVE_LIBUNWIND ${have_unwind:-unknown} ($build/generated/gms/build_config.h)" >> "$OUT/configure.log"
note "$unwind_note; GMS_HAVE_LIBUNWIND ${have_unwind:-unknown}"
if [ "$unwind_how" != none ] && [ "${have_unwind:-0}" != 1 ]; then
  note "  libunwind was there but the build did not take it (see env.txt and configure.log)"
  status=1
fi

gpu_targets=(gms_counts_static gms_counts_shared gms_bench_cuda gms_bench_malloc)
if ((standalone)); then
  timeout "$(budget 240 250)" cmake --build "$build" --target gpumemshim gpumemshim_cli > "$OUT/build.log" 2>&1 &&
    timeout "$(budget 120 250)" cmake --build "$build/tests/gpu" >> "$OUT/build.log" 2>&1
  build_rc=$?
  build_note="build: shim, gpumemshim command and tests/gpu ok"
else
  timeout "$(budget 240 250)" cmake --build "$build" > "$OUT/build.log" 2>&1
  build_rc=$?
  build_note="build: ok"
  if ((build_rc != 0)); then
    # Something outside the GPU tests may not build here; the GPU tests need only these.
    echo "---- full build failed; building what the GPU tests need ----" >> "$OUT/build.log"
    timeout "$(budget 120 250)" cmake --build "$build" --target gpumemshim gpumemshim_cli "${gpu_targets[@]}" >> "$OUT/build.log" 2>&1
    build_rc=$?
    build_note="build: full build FAILED (see build.log); the shim, the gpumemshim command and the GPU programs built"
    status=1
  fi
fi
if ((build_rc == 0)); then
  note "$build_note"
else
  note "build: FAILED (see $OUT/build.log; last lines below)"
  tail -15 "$OUT/build.log"
  status=1
fi
for f in shim/libgpumemshim.so tools/gpumemshim tests/gpu/gms_counts_static tests/gpu/gms_counts_shared \
         tests/gpu/bench/gms_bench_cuda tests/gpu/bench/gms_bench_malloc; do
  [ -e "$build/$f" ] || note "  missing: $build/$f"
done
export GMS_SHIM="$build/shim/libgpumemshim.so" GMS_BUILD_DIR="$build"

# --- 2. GPU tests ---------------------------------------------------------------------------
if ! python3 -c 'import pytest' > /dev/null 2>&1; then
  note "pytest: NOT INSTALLED for $(command -v python3): GPU tests not run"
  status=1
else
  echo "running the GPU tests (log: $OUT/pytest.log)"
  (cd "$root" && timeout "$(budget ${GMS_PYTEST_SECONDS:-240} 100)" python3 -m pytest -v -rs -p no:cacheprovider tests/gpu \
      --basetemp="$OUT/pytest-tmp" --junitxml="$OUT/pytest.xml") > "$OUT/pytest.log" 2>&1
  rc=$?
  line=$(grep -E "^=+ .*(passed|failed|skipped|error).* =+$" "$OUT/pytest.log" | tail -1)
  note "pytest (exit $rc): ${line:-no summary line, see pytest.log}"
  grep -E "(PASSED|FAILED|SKIPPED|ERROR)" "$OUT/pytest.log" | grep "::" | sed 's/^/  /' | head -40
  ((rc == 124)) && note "  pytest ran out of time"
  ((rc == 5)) && note "  pytest ran no test (the module skips itself without a GPU: see pytest.log)"
  ((rc != 0)) && status=1
fi

# --- 3. benchmarks --------------------------------------------------------------------------
echo "running the benchmarks (log: $OUT/bench.log)"
rm -f "$OUT/bench.md"
timeout "$(budget 150 5)" "$here/bench/run_bench.sh" > "$OUT/bench.log" 2>&1
rc=$?
note "benchmarks (exit $rc):"
if [ -s "$OUT/bench.md" ]; then
  while IFS= read -r l; do note "$l"; done < "$OUT/bench.md"
else
  note "  no table (see bench.log)"; tail -5 "$OUT/bench.log"
fi
((rc != 0)) && status=1

# --- 4. summary -----------------------------------------------------------------------------
note "total: $(elapsed) s; logs in $OUT"
{
  echo "==== device check summary ===="
  printf '%s\n' "${summary[@]}"
} | tee "$OUT/summary.txt"
exit $status
