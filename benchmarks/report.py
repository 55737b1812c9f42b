"""Make the plot and docs/PERFORMANCE.md from the JSON of `python -m fusedops bench`.

    python benchmarks/report.py RUN.json [RUN.json ...] PLOT.png PERFORMANCE.md
    e.g. python benchmarks/report.py benchmarks/results/h200-2026-11-30.json \\
             docs/performance.png docs/PERFORMANCE.md

Several runs (of different ops) make one report, each run named with its
command.

Needs fusedops (for its report code) and matplotlib (`pip install 'fusedops[bench]'`).
"""

from __future__ import annotations

import argparse
import json

from fusedops import bench_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", nargs="+", help="JSON that `python -m fusedops bench --json` wrote")
    parser.add_argument("png", help="where to write the speedup plot")
    parser.add_argument("md", help="where to write the Markdown report")
    parser.add_argument("--note", help="a paragraph to put under the run's description")
    args = parser.parse_args(argv)
    runs = []
    for path in args.json:
        with open(path) as f:
            runs.append(json.load(f))
    result = runs[0] if len(runs) == 1 else bench_report.combine(runs, args.json)
    bench_report.plot(result, args.png)
    with open(args.md, "w") as f:
        f.write(bench_report.performance_markdown(result, args.png, args.md, source=args.json[0], note=args.note))
    print(f"wrote {args.png} and {args.md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
