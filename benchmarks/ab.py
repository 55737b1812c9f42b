"""A/B of two builds of fusedops with the bench, in alternating processes.

    python benchmarks/ab.py --a OLD_SITE --b NEW_SITE --rounds 2 --out DIR [-- BENCH ARGS]

OLD_SITE / NEW_SITE are folders that each hold one installed fusedops (`pip
install --target`). Two builds cannot share a process (both register the
fusedops operator namespace), so each round runs `python -m fusedops bench`
once per build, the order rotated every round, and the report compares, case
by case, the median over rounds of fusedops' time (and its speedup over eager
PyTorch, measured in the same process). Writes DIR/ab.json and prints a table.

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

# Op names that changed between builds.
RENAMED = {"sbc": "scale_bias_clamp"}


def case(row: dict) -> str:
    fields = {k: v for k, v in row.items()
              if k in ("op", "pass", "dtype", "shape", "bias")}
    fields["op"] = RENAMED.get(fields["op"], fields["op"])
    return json.dumps(fields, sort_keys=True)


def run_bench(site: str, out: Path, bench_args: list[str], extra_env: dict[str, str]) -> dict:
    env = dict(os.environ, **extra_env, PYTHONPATH=site + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = out.resolve()
    subprocess.run([sys.executable, "-m", "fusedops", "bench", "--json", str(out), *bench_args],
                   env=env, check=True, cwd=out.parent)
    return json.loads(out.read_text())


def fusedops_times(result: dict) -> dict[str, tuple[float, float | None]]:
    """case -> (fusedops ms, fusedops' speedup over eager in that run)."""
    rows = result["rows"]
    eager = {case(r): r["ms"] for r in rows if r["impl"] == "eager"}
    return {case(r): (r["ms"], eager.get(case(r), float("nan")) / r["ms"]) for r in rows if r["impl"] == "fusedops"}


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
    common = sorted(set.intersection(*(set(t) for t in runs["a"] + runs["b"])))
    report = []
    for key in common:
        a = statistics.median(t[key][0] for t in runs["a"])
        b = statistics.median(t[key][0] for t in runs["b"])
        report.append({"case": json.loads(key), "a_ms": a, "b_ms": b, "b_over_a": a / b,
                       "a_vs_eager": statistics.median(t[key][1] for t in runs["a"]),
                       "b_vs_eager": statistics.median(t[key][1] for t in runs["b"])})
    (args.out / "ab.json").write_text(json.dumps({"a": args.a, "b": args.b, "env_b": env_b, "rounds": args.rounds,
                                                  "bench_args": args.bench_args, "cases": report}, indent=1))
    print(f"{'case':70} {'A ms':>10} {'B ms':>10} {'A/B':>6} {'A vs eager':>10} {'B vs eager':>10}")
    for entry in report:
        c = entry["case"]
        label = " ".join(str(c.get(k, "")) for k in ("op", "pass", "dtype", "shape", "bias"))
        print(f"{label:70} {entry['a_ms']:10.4f} {entry['b_ms']:10.4f} {entry['b_over_a']:6.3f} "
              f"{entry['a_vs_eager']:10.3f} {entry['b_vs_eager']:10.3f}")
    slower = [e for e in report if e["b_over_a"] < 0.98]
    print(f"ab: {len(report)} cases, B slower than A by more than 2% in {len(slower)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
