#!/usr/bin/env bash
# linear's sm_90a GEMM on an H100/H200 in one call: build the wheel (or install
# one built by an earlier call), the linear tests, compute-sanitizer on every
# GEMM kernel, and the A/B bench (benchmarks/linear_epilogues.py). Logs and JSON
# go to OUTDIR (at most 8 files).
#
#   tools/gpu_gemm.sh OUTDIR
#
# GEMM_WHEEL=FILE installs that wheel instead of building; GEMM_STAGES (default
# "build tests sanitize bench") picks stages; GEMM_ROUNDS (2) and
# GEMM_MAX_AUTOTUNE_S (0: none) are the bench's --rounds and --max-autotune-s;
# GEMM_TEST_K (a pytest -k expression) narrows the tests; GEMM_TEST_FILES (default
# tests/test_linear.py) picks the test files; GEMM_SANITIZE_TOOLS (default
# "memcheck racecheck") the compute-sanitizer tools, each run on both tile
# configurations (tools/gemm_sanitize.py under FUSEDOPS_LINEAR_SM90=pingpong, then
# =cooperative).
set -uo pipefail

out=${1:?usage: tools/gpu_gemm.sh OUTDIR}
mkdir -p "$out"
cd "$(dirname "$0")/.." || exit 1
repo=$PWD
stages=${GEMM_STAGES:-build tests sanitize bench}
has() { [[ " $stages " == *" $1 "* ]]; }
unset CC CXX CUDAHOSTCXX
status=0
stamp() { echo "== $* [$SECONDS s]"; }

if has build; then
  stamp "build"
  if [ -n "${GEMM_WHEEL:-}" ]; then
    python3 -m pip install -q --no-deps --force-reinstall "$GEMM_WHEEL" >"$out/build.log" 2>&1 || {
      tail -30 "$out/build.log"; exit 1; }
  else
    # One wheel (returned to the caller for a later call), then installed.
    FUSEDOPS_CUDA=ON FUSEDOPS_CUTLASS=ON FUSEDOPS_CUDA_ARCHS=9.0 \
      python3 -m pip wheel -v --no-build-isolation --no-deps -w "$out" . >"$out/build.log" 2>&1 || {
      tail -60 "$out/build.log"; exit 1; }
    python3 -m pip install -q --no-deps --force-reinstall "$out"/fusedops-*.whl >>"$out/build.log" 2>&1 || exit 1
  fi
  stamp "built"
fi
cd "$out" || exit 1
python3 -m fusedops info | grep -E 'CUDA kernels|autograd|torch ' | tee info.txt

if has tests; then
  stamp "tests"
  filter=()
  if [ -n "${GEMM_TEST_K:-}" ]; then filter=(-k "$GEMM_TEST_K"); fi
  read -ra files <<< "${GEMM_TEST_FILES:-tests/test_linear.py}"
  python3 -m pytest "${files[@]/#/$repo/}" -q -rs -p no:cacheprovider -n 12 "${filter[@]}" >tests.log 2>&1
  rc=$?
  tail -25 tests.log
  [ "$rc" = 0 ] || status=1
fi

if has sanitize; then
  stamp "sanitize"
  {
    for tool in ${GEMM_SANITIZE_TOOLS:-memcheck racecheck}; do
      for tiles in pingpong cooperative; do
        echo "--- $tool $tiles"
        FUSEDOPS_LINEAR_SM90=$tiles PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 120 \
          compute-sanitizer --tool "$tool" --error-exitcode 1 python3 "$repo/tools/gemm_sanitize.py"
        echo "--- $tool $tiles exit $?"
      done
    done
  } >sanitize.log 2>&1
  grep -E '^--- |ERROR SUMMARY|RACECHECK SUMMARY|gemm_sanitize:' sanitize.log
  grep -qE -- '--- (memcheck|racecheck) [a-z]+ exit [^0]' sanitize.log && status=1
fi

if has bench; then
  stamp "bench"
  PYTHONUNBUFFERED=1 python3 "$repo/benchmarks/linear_epilogues.py" --json bench.json \
    --rounds "${GEMM_ROUNDS:-2}" --max-autotune-s "${GEMM_MAX_AUTOTUNE_S:-0}" >bench.log 2>&1 || status=1
  tail -5 bench.log
fi
stamp "done (status $status)"
exit "$status"
