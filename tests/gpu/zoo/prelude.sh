# Sourced by the zoo's scripts: the repository's root as the working directory, $OUT made, $B the
# build (GMS_BUILD_DIR, default build-gpu), and build_gpu, which builds what is missing there.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
B=${GMS_BUILD_DIR:-build-gpu}

# build_gpu [cli]: the shim, and with `cli` the gpumemshim tool, built unless already there; SHIM
# (and TOOL) their absolute paths. Exits with the build log's tail when the build fails.
build_gpu() {
  local targets=gpumemshim missing=0
  [ -x "$B/shim/libgpumemshim.so" ] || missing=1
  if [ "${1:-}" = cli ]; then
    targets="gpumemshim gpumemshim_cli"
    [ -x "$B/tools/gpumemshim" ] || missing=1
  fi
  if [ "$missing" = 1 ]; then
    cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGMS_WERROR=OFF -DGMS_BUILD_TESTS=OFF >"$OUT/configure.log" 2>&1 &&
      cmake --build "$B" --target $targets >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  fi
  SHIM=$(readlink -f "$B/shim/libgpumemshim.so")
  TOOL=$(readlink -f "$B/tools/gpumemshim")
}
