#!/usr/bin/env bash
# Build, test and benchmark fusedops on a CUDA machine where torch is already
# installed and there is no network (the H200 of the device tool, a
# self-hosted CI runner). Logs and JSON go to the directory given.
#
#   tools/gpu_check.sh OUTDIR            (PYTHON=... to pick the interpreter)
set -uo pipefail

out=${1:?usage: tools/gpu_check.sh OUTDIR}
mkdir -p "$out"
python=${PYTHON:-python3}
cd "$(dirname "$0")/.." || exit 1

# The system compiler, whatever CXX says: some images point CXX at a wrapper
# that links libstdc++ statically, which CMakeLists.txt refuses.
unset CC CXX CUDAHOSTCXX

arch=$("$python" -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability())') || {
  echo "gpu_check: no CUDA device visible to torch" >&2; exit 1; }
echo "== build for sm_${arch/./} ($("$python" -c 'import torch; print(torch.__version__)'))"
start=$SECONDS
FUSEDOPS_CUDA=ON FUSEDOPS_CUDA_ARCHS=$arch \
  "$python" -m pip install -v --no-build-isolation --no-deps . >"$out/build.log" 2>&1 || {
  tail -50 "$out/build.log"; echo "gpu_check: build failed" >&2; exit 1; }
echo "   built in $((SECONDS - start)) s"

# Run from outside the checkout so that the installed package is imported.
repo=$PWD
cd "$out" || exit 1
"$python" -m fusedops info | tee info.txt

echo "== tests"
# pytest-xdist, where present, spreads the suite over CPU cores (one GPU).
workers=()
"$python" -c 'import xdist' 2>/dev/null && workers=(-n "${GPU_CHECK_WORKERS:-8}")
"$python" -m pytest "$repo/tests" -q -rs -p no:cacheprovider "${workers[@]}" --junitxml=junit.xml 2>&1 | tee tests.log
tests_status=${PIPESTATUS[0]}

echo "== benchmark"
# shellcheck disable=SC2086  # GPU_CHECK_BENCH_ARGS is a list of options
"$python" -m fusedops bench --json bench.json ${GPU_CHECK_BENCH_ARGS:-} 2>&1 | tee bench.log
bench_status=${PIPESTATUS[0]}

echo "gpu_check: tests exit $tests_status, bench exit $bench_status; results in $out"
[ "$tests_status" -eq 0 ] && [ "$bench_status" -eq 0 ]
