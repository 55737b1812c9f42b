#!/usr/bin/env bash
# Host cost per call on a GPU machine, A/B of builds in alternating processes:
# this tree with C++ autograd, the same build with its Python fallback, v0.2
# and v0.1. Each older build is a source tree under .dev/ (made here with
# `git archive 5bd4d0d | tar -x -C .dev/v01`, `git archive 82dd9b9 | tar -x -C
# .dev/v02`, and carried to the device machine); each build is installed with
# pip --target and run through PYTHONPATH, the order rotated every round.
# Writes $OUT/host.tgz (one file: the device tool returns a few files only).
#
#   bash benchmarks/host_ab.sh [ROUNDS]
set -uo pipefail
unset CC CXX CUDAHOSTCXX
export PYTHONUNBUFFERED=1
root=$(pwd)
rounds=${1:-4}
work=$(mktemp -d)
build() {  # name source
  local start=$SECONDS
  (cd "$2" && python3 -m pip install -q --no-build-isolation --no-deps --target "/tmp/site-$1" .) \
    > "$work/build-$1.log" 2>&1
  echo "build $1: rc $? in $((SECONDS - start)) s"
}
build v01 .dev/v01 & p1=$!
build v02 .dev/v02 & p2=$!
build new . & p3=$!
wait "$p1" "$p2" "$p3"
runs=(new fallback v02 v01)
for ((round = 0; round < rounds; round++)); do
  for i in 0 1 2 3; do
    run=${runs[$(((i + round) % 4))]}
    site=/tmp/site-$run; env=()
    [ "$run" = fallback ] && { site=/tmp/site-new; env=(FUSEDOPS_CPP_AUTOGRAD=0); }
    (cd /tmp && env "${env[@]}" PYTHONPATH="$site" timeout 90 python3 "$root/benchmarks/host.py" --device cuda \
      --calls 200 --rounds 5 --json "$work/host-$run-r$round.json") >> "$work/host-$run.txt" 2>&1
    echo "round $round $run: rc $? at $SECONDS s"
  done
done
tar -czf "$OUT/host.tgz" -C "$work" .
