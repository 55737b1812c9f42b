#!/usr/bin/env bash
# Build, test and benchmark fusedops on a CUDA machine where torch is already
# installed and there is no network (the H200 of the device tool, a
# self-hosted CI runner). Logs and JSON go to the directory given.
#
#   tools/gpu_check.sh OUTDIR            (PYTHON=... to pick the interpreter)
#
# GPU_CHECK_BUILD=0 uses the fusedops already installed (a later call on the
# same machine). GPU_CHECK_SANITIZER=1 adds a stage that runs the CUDA tests of
# GPU_CHECK_MEMCHECK_TESTS under compute-sanitizer's memcheck (with torch's
# caching allocator off, so that out-of-bounds accesses are not hidden in
# cached blocks) and those of GPU_CHECK_RACECHECK_TESTS under racecheck, both
# with --error-exitcode 1, into OUTDIR/sanitizer.log (test paths relative to
# the checkout, absolute paths and pytest options kept). compute-sanitizer is looked up on PATH, in
# CUDA_HOME, /usr/local/cuda and NVIDIA's pip wheels (COMPUTE_SANITIZER=...
# to name it). GPU_CHECK_TESTS=0 / GPU_CHECK_BENCH=0 skip the full test suite /
# the benchmark (e.g. a sanitizer-only run); GPU_CHECK_PYTEST_ARGS selects tests
# (default: the whole suite; paths relative to the checkout, e.g. "tests -k rms_norm"),
# GPU_CHECK_BENCH_ARGS are the bench's options. GPU_CHECK_AB_BASELINE=DIR (a
# source tree) adds an A/B bench of that tree against this checkout in
# GPU_CHECK_AB_ROUNDS rotated rounds (bench options: GPU_CHECK_AB_ARGS) into
# OUTDIR/ab/. OUTDIR gets at most 8 files and the ab/ folder.
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
if [ "${GPU_CHECK_BUILD:-1}" = 1 ]; then
  echo "== build for sm_${arch/./} ($("$python" -c 'import torch; print(torch.__version__)'))"
  start=$SECONDS
  # -lineinfo (FUSEDOPS_CUDA_LINEINFO): compute-sanitizer's reports name source lines.
  FUSEDOPS_CUDA=ON FUSEDOPS_CUDA_ARCHS=$arch FUSEDOPS_CUDA_LINEINFO=1 \
    "$python" -m pip install -v --no-build-isolation --no-deps . >"$out/build.log" 2>&1 || {
    tail -50 "$out/build.log"; echo "gpu_check: build failed" >&2; exit 1; }
  echo "   built in $((SECONDS - start)) s"
else
  echo "== build skipped (GPU_CHECK_BUILD=0): the installed fusedops"
fi

# Run from outside the checkout so that the installed package is imported.
repo=$PWD
cd "$out" || exit 1
"$python" -m fusedops info | tee info.txt

echo "== tests"
# pytest-xdist, where present, spreads the suite over CPU cores (one GPU).
workers=()
"$python" -c 'import xdist' 2>/dev/null && workers=(-n "${GPU_CHECK_WORKERS:-8}")
tests_status=0
if [ "${GPU_CHECK_TESTS:-1}" = 1 ]; then
  selection=()
  # shellcheck disable=SC2086  # GPU_CHECK_PYTEST_ARGS is a list of pytest arguments
  for word in ${GPU_CHECK_PYTEST_ARGS:-tests}; do
    case $word in
      tests*) selection+=("$repo/$word") ;;  # relative to the checkout
      *) selection+=("$word") ;;
    esac
  done
  "$python" -m pytest "${selection[@]}" -q -rs -p no:cacheprovider "${workers[@]}" --junitxml=junit.xml 2>&1 |
    tee tests.log
  tests_status=${PIPESTATUS[0]}
else
  echo "   skipped (GPU_CHECK_TESTS=0)"
fi

sanitizer_status=0
if [ "${GPU_CHECK_SANITIZER:-0}" = 1 ]; then
  echo "== compute-sanitizer (memcheck, racecheck) -> sanitizer.log"
  sanitizer=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer)}
  for candidate in "${CUDA_HOME:-/nonexistent}/bin/compute-sanitizer" /usr/local/cuda/bin/compute-sanitizer \
    $("$python" -c 'import nvidia, os; print(" ".join(nvidia.__path__))' 2>/dev/null); do
    [ -n "$sanitizer" ] && break
    if [ -d "$candidate" ]; then
      candidate=$(find "$candidate" -name compute-sanitizer -type f -perm -u+x 2>/dev/null | head -1)
    fi
    [ -n "$candidate" ] && [ -x "$candidate" ] && sanitizer=$candidate
  done
  if [ -n "${GPU_CHECK_SANITIZER_TESTS:-}" ]; then
    echo "gpu_check: GPU_CHECK_SANITIZER_TESTS is gone: use GPU_CHECK_MEMCHECK_TESTS / GPU_CHECK_RACECHECK_TESTS" >&2
    exit 2
  fi
  if [ -z "$sanitizer" ]; then
    echo "gpu_check: GPU_CHECK_SANITIZER=1 but no compute-sanitizer found (set COMPUTE_SANITIZER)" | tee sanitizer.log >&2
    sanitizer_status=1
  else
    # Small and fast: no torch.compile (its worker processes), no opcheck, no
    # > 2^31-element tests, CUDA cases only, and of test_every_op.py add's
    # samples only (layouts and shapes, as test_add.py held them before the
    # table). The robustness tests run every op's samples forward and backward,
    # so racecheck (shared-memory hazards) needs no more.
    filter=${GPU_CHECK_SANITIZER_FILTER:-cuda and not cpu and not compile and not opcheck and not 2_31 and (add or not test_every_op)}
    "$sanitizer" --version >sanitizer.log 2>&1
    for tool in memcheck racecheck; do
      if [ "$tool" = memcheck ]; then
        tests=${GPU_CHECK_MEMCHECK_TESTS:-tests/test_cuda_robustness.py tests/test_every_op.py tests/test_add.py}
        # Without the caching allocator nothing can allocate during CUDA-graph
        # capture, so the graph tests run under racecheck only.
        run_env=(env PYTHONUNBUFFERED=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1)
        tool_filter="($filter) and not graph"
      else
        tests=${GPU_CHECK_RACECHECK_TESTS:-tests/test_cuda_robustness.py}
        run_env=(env PYTHONUNBUFFERED=1)
        # Four host threads launching at once: racecheck loses track of a
        # launch ("Internal Sanitizer Error") or crawls for minutes; the
        # kernels are the ones the other tests check. add's broadcast sample
        # reduces its gradients with torch's own sum, whose reduce_kernel
        # racecheck reports (PyTorch's kernel, not one of ours; H200, torch
        # 2.11, benchmarks/results/NOTES.md).
        tool_filter="($filter) and not threads and not broadcast"
      fi
      selection=()
      for word in $tests; do
        case $word in
          /* | -*) selection+=("$word") ;;
          *) selection+=("$repo/$word") ;;  # relative to the checkout
        esac
      done
      echo "== $tool: $sanitizer --tool $tool, pytest ${selection[*]} -k '$tool_filter'" | tee -a sanitizer.log
      start=$SECONDS
      "${run_env[@]}" "$sanitizer" --tool "$tool" --error-exitcode 1 --report-api-errors no --print-limit 200 \
        "$python" -m pytest "${selection[@]}" -k "$tool_filter" -v -p no:cacheprovider >>sanitizer.log 2>&1
      status=$?
      echo "== $tool exit $status in $((SECONDS - start)) s" | tee -a sanitizer.log
      [ "$status" -eq 0 ] || sanitizer_status=1
    done
    grep -E '========= (ERROR SUMMARY|RACECHECK SUMMARY|Internal)|FAILED|passed|failed' sanitizer.log
  fi
fi

echo "== benchmark"
# The speedup plot where matplotlib is installed (the bench extra).
plot=()
"$python" -c 'import matplotlib' 2>/dev/null && plot=(--plot bench.png)
bench_status=0
if [ "${GPU_CHECK_BENCH:-1}" = 1 ]; then
  # shellcheck disable=SC2086  # GPU_CHECK_BENCH_ARGS is a list of options
  "$python" -m fusedops bench --json bench.json "${plot[@]}" ${GPU_CHECK_BENCH_ARGS:-} 2>&1 | tee bench.log
  bench_status=${PIPESTATUS[0]}
else
  echo "   skipped (GPU_CHECK_BENCH=0)"
fi

ab_status=0
if [ -n "${GPU_CHECK_AB_BASELINE:-}" ]; then
  # The same bench run alternately on a baseline build (a source tree, e.g.
  # `git archive` of an older commit) and this checkout: see benchmarks/ab.py.
  echo "== A/B: $GPU_CHECK_AB_BASELINE (a) against this checkout (b) -> ab/"
  sites=${TMPDIR:-/tmp}/fusedops-ab
  rm -rf "$sites" && mkdir -p ab "$sites"
  for side in a b; do
    source_dir=$repo
    [ "$side" = a ] && source_dir=$GPU_CHECK_AB_BASELINE
    FUSEDOPS_CUDA=ON FUSEDOPS_CUDA_ARCHS=$arch "$python" -m pip install --no-build-isolation --no-deps \
      --target "$sites/$side" "$source_dir" >"ab/build-$side.log" 2>&1 || { tail -30 "ab/build-$side.log"; ab_status=1; }
  done
  if [ "$ab_status" -eq 0 ]; then
    # shellcheck disable=SC2086  # GPU_CHECK_AB_ARGS is a list of bench options
    "$python" "$repo/benchmarks/ab.py" --a "$sites/a" --b "$sites/b" --rounds "${GPU_CHECK_AB_ROUNDS:-2}" \
      --out ab -- ${GPU_CHECK_AB_ARGS:-} 2>&1 | tee ab/ab.log
    ab_status=${PIPESTATUS[0]}
  fi
fi

echo "gpu_check: tests exit $tests_status, sanitizer exit $sanitizer_status, bench exit $bench_status," \
  "A/B exit $ab_status; results in $out"
[ "$tests_status" -eq 0 ] && [ "$sanitizer_status" -eq 0 ] && [ "$bench_status" -eq 0 ] && [ "$ab_status" -eq 0 ]
