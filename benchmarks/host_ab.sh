#!/usr/bin/env bash
# Host cost per call on a GPU machine, A/B of builds in alternating processes:
# this tree with C++ autograd ("new"), the same build with its Python fallback
# ("fallback"), and older trees given as NAME=DIR (default: v0.2 and v0.1,
# made here with `git archive 82dd9b9 | tar -x -C .dev/v02`, `git archive
# 5bd4d0d | tar -x -C .dev/v01`, and carried to the device machine). Each build
# is installed with pip --target and run through PYTHONPATH, the order rotated
# every round. Prints the summary (benchmarks/host_ab_summary.py) and writes
# $OUT/host.tgz (one file: the device tool returns a few files only).
#
#   bash benchmarks/host_ab.sh [ROUNDS [NAME=DIR ...]]
#
# HOST_AB_NEW_WHEEL=FILE installs this tree's wheel built earlier instead of building it.
set -uo pipefail
unset CC CXX CUDAHOSTCXX
export PYTHONUNBUFFERED=1
root=$(pwd)
rounds=${1:-4}
shift || true
[ "$#" -gt 0 ] || set -- v02=.dev/v02 v01=.dev/v01
work=$(mktemp -d)
build() {  # name source: a source tree (built here) or a wheel
  local start=$SECONDS
  if [ -d "$2" ]; then
    (cd "$2" && python3 -m pip install -q --no-build-isolation --no-deps --target "/tmp/site-$1" .)
  else
    python3 -m pip install -q --no-deps --target "/tmp/site-$1" "$2"
  fi > "$work/build-$1.log" 2>&1
  echo "build $1: rc $? in $((SECONDS - start)) s"
}
runs=(new fallback)
pids=()
build new "${HOST_AB_NEW_WHEEL:-.}" & pids+=($!)
for older in "$@"; do
  runs+=("${older%%=*}")
  build "${older%%=*}" "${older#*=}" & pids+=($!)
done
wait "${pids[@]}"
for ((round = 0; round < rounds; round++)); do
  for ((i = 0; i < ${#runs[@]}; i++)); do
    run=${runs[$(((i + round) % ${#runs[@]}))]}
    site=/tmp/site-$run; env=()
    [ "$run" = fallback ] && { site=/tmp/site-new; env=(FUSEDOPS_CPP_AUTOGRAD=0); }
    (cd /tmp && env "${env[@]}" PYTHONPATH="$site" timeout 90 python3 "$root/benchmarks/host.py" --device cuda \
      --calls 200 --rounds 5 --json "$work/host-$run-r$round.json") >> "$work/host-$run.txt" 2>&1
    echo "round $round $run: rc $? at $SECONDS s"
  done
done
python3 "$root/benchmarks/host_ab_summary.py" "$work" --json "$work/summary.json"
tar -czf "$OUT/host.tgz" -C "$work" .
