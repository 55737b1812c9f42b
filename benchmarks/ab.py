"""A/B of two builds of fusedops with the bench, in alternating processes.

    python benchmarks/ab.py --a OLD_SITE --b NEW_SITE --rounds 2 --out DIR [-- BENCH ARGS]

OLD_SITE / NEW_SITE are folders that each hold one installed fusedops (`pip
install --target`). Two builds cannot share a process (both register the
fusedops operator namespace), so each round runs this tree's bench
(benchmarks/tree_bench.py: the same cases and timer for both builds, however
old) once per build, the order rotated every round, and the report compares,
case by case, the median over rounds of fusedops' time (and its speedup over
eager PyTorch, measured in the same process). Writes DIR/ab.json and prints a
table. `-- --no-compile` leaves out the torch.compile baselines, which take most
of a run's time and are the same for both builds. "B device": where the bench
also replays a case from a CUDA graph, B's device time over its time a call
(near 1 the device is the bottleneck; well below it, the host).

--env-b NAME=VALUE (repeatable) sets a variable for B's processes only: with the
same folder as both builds, `--env-b FUSEDOPS_LINEAR_SM90=0` compares linear's
sm_90 GEMM (A, the default on an H100/H200) with its cuBLASLt path (B) in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

TREE_BENCH = Path(__file__).resolve().parent / "tree_bench.py"


def case(row: dict) -> str:
    return json.dumps({k: v for k, v in row.items() if k in ("op", "pass", "dtype", "shape", "bias")}, sort_keys=True)


def run_bench(site: str, out: Path, bench_args: list[str], extra_env: dict[str, str]) -> dict:
    env = dict(os.environ, **extra_env, PYTHONPATH=site + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = out.resolve()
    subprocess.run([sys.executable, str(TREE_BENCH), "--json", str(out), *bench_args],
                   env=env, check=True, cwd=out.parent)
    return json.loads(out.read_text())


def fusedops_times(result: dict) -> dict[str, tuple[float, float | None]]:
    """case -> (fusedops ms, fusedops' speedup over eager in that run)."""
    rows = result["rows"]
    eager = {case(r): r["ms"] for r in rows if r["impl"] == "eager"}
    return {case(r): (r["ms"], eager.get(case(r), float("nan")) / r["ms"]) for r in rows if r["impl"] == "fusedops"}


def compare(runs: dict[str, list[dict]]) -> list[dict]:
    """Per case: medians over rounds of each build's time and speedup over eager.
    b_over_a compares times; b_over_a_vs_eager compares speedups, each over the
    eager call of its own process: where a call is host-bound its time moves
    with the process (eager's too, by up to 2x between processes on the H200),
    and eager, unchanged between builds, is the control."""
    common = sorted(set.intersection(*(set(t) for t in runs["a"] + runs["b"])))
    median = {side: {key: statistics.median(t[key][0] for t in runs[side]) for key in common} for side in runs}
    speedup = {side: {key: statistics.median(t[key][1] for t in runs[side]) for key in common} for side in runs}
    report = []
    for key in common:
        entry = {"case": json.loads(key), "a_ms": median["a"][key], "b_ms": median["b"][key],
                 "b_over_a": median["a"][key] / median["b"][key],
                 "a_vs_eager": speedup["a"][key], "b_vs_eager": speedup["b"][key],
                 "b_over_a_vs_eager": speedup["b"][key] / speedup["a"][key]}
        graph = json.dumps(dict(entry["case"], **{"pass": entry["case"]["pass"] + " (CUDA graph)"}), sort_keys=True)
        if graph in common:  # B's device time over its time a call: below 1 the host holds the device up
            entry["b_device_share"] = median["b"][graph] / median["b"][key]
        report.append(entry)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="site folder of build A (the baseline)")
    parser.add_argument("--b", required=True, help="site folder of build B")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--env-b", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for build B's processes only")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("bench_args", nargs="*")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    env_b = dict(item.split("=", 1) for item in args.env_b)
    runs: dict[str, list[dict]] = {"a": [], "b": []}
    for r in range(args.rounds):
        for side in ("a", "b") if r % 2 == 0 else ("b", "a"):
            site = args.a if side == "a" else args.b
            out = args.out / f"bench-{side}{r}.json"
            runs[side].append(fusedops_times(run_bench(site, out, args.bench_args, env_b if side == "b" else {})))
        report = compare(runs)  # after every round: a run cut short keeps its rounds
        (args.out / "ab.json").write_text(json.dumps({"a": args.a, "b": args.b, "env_b": env_b, "rounds": r + 1,
                                                      "bench_args": args.bench_args, "cases": report}, indent=1))
    print(f"{'case':70} {'A ms':>10} {'B ms':>10} {'A/B':>6} {'A vs eager':>10} {'B vs eager':>10} "
          f"{'B/A vs eager':>12} {'B device':>8}")
    for entry in report:
        c = entry["case"]
        label = " ".join(str(c.get(k, "")) for k in ("op", "pass", "dtype", "shape", "bias"))
        print(f"{label:70} {entry['a_ms']:10.4f} {entry['b_ms']:10.4f} {entry['b_over_a']:6.3f} "
              f"{entry['a_vs_eager']:10.3f} {entry['b_vs_eager']:10.3f} {entry['b_over_a_vs_eager']:12.3f} "
              f"{entry.get('b_device_share', float('nan')):8.2f}")
    for limit in (0.98, 0.95):
        slower = sum(e["b_over_a"] < limit for e in report)
        slower_vs_eager = sum(e["b_over_a_vs_eager"] < limit for e in report)
        print(f"ab: {len(report)} cases, B slower than A by more than {100 * (1 - limit):.0f}% in {slower} "
              f"(by time), in {slower_vs_eager} (by speedup over eager)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
