"""Summary of a host A/B (benchmarks/host_ab.sh): per case and build, the median
over rounds of torch's time over fusedops' (torch/ours, each round measured in
one process) and of fusedops' microseconds a call.

    python benchmarks/host_ab_summary.py DIR [--json OUT]    # DIR: host_ab.sh's files
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def summarize(folder: Path) -> list[dict]:
    ratios: dict[tuple[str, str], dict[str, list[tuple[float, float]]]] = {}
    for path in sorted(folder.glob("host-*-r*.json")):
        build = path.stem.removeprefix("host-").rsplit("-r", 1)[0]
        for row in json.loads(path.read_text())["rows"]:
            per_build = ratios.setdefault((row["case"], row["pass"]), {})
            per_build.setdefault(build, []).append((row["torch_us"] / row["fusedops_us"], row["fusedops_us"]))
    return [{"case": case, "pass": pass_,
             **{build: {"torch_over_ours": statistics.median(r for r, _ in runs),
                        "fusedops_us": statistics.median(us for _, us in runs), "rounds": len(runs)}
                for build, runs in builds.items()}}
            for (case, pass_), builds in ratios.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = summarize(args.folder)
    builds = sorted({b for row in rows for b in row if b not in ("case", "pass")})
    print(f"{'torch/ours (us a call)':34}" + "".join(f"{b:>18}" for b in builds))
    for row in rows:
        cells = "".join(f"{row[b]['torch_over_ours']:>9.3f} ({row[b]['fusedops_us']:5.1f})" if b in row else " " * 18
                        for b in builds)
        print(f"{row['case'] + ' ' + row['pass']:34}{cells}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
