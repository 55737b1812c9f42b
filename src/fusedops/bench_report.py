"""Tables, a plot and a Markdown report from the JSON of `python -m fusedops bench`.

Rows of the JSON are measurements of one implementation ("fusedops", "eager",
"compile", and "liger" where Liger-Kernel ran) of one case; a case is every field of a row that is not a
measurement (op, pass, dtype, shape, and op-specific ones such as the bias
shape or the activation). Used by `python -m fusedops bench --plot` and by
benchmarks/report.py. matplotlib is needed for the plot only
(`pip install fusedops[bench]`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

# Fields that are measurements or derived from them, not part of a case.
MEASURED = {"impl", "ms", "bytes", "flops", "GBs", "TFLOPs", "pct_of_ceiling", "ceiling", "fusedops_speedup",
            "vs_eager", "vs_compile", "vs_liger", "us_per_call", "peak_GiB"}

# The implementations fusedops is compared with, and their names in text.
BASELINES = {"eager": "eager PyTorch", "compile": "torch.compile", "liger": "Liger-Kernel"}


def case_key(row: dict[str, Any]) -> tuple:
    return tuple((k, json.dumps(v)) for k, v in sorted(row.items()) if k not in MEASURED)


def shape_text(shape: Iterable[int]) -> str:
    """[268435456] -> 2^28 (a flat size of 2^10 and up that is a power of two);
    [65536, 4096] -> 65536x4096."""
    shape = [int(s) for s in shape]
    if len(shape) == 1 and shape[0] >= 1024 and shape[0] & (shape[0] - 1) == 0:
        return f"2^{shape[0].bit_length() - 1}"
    return "x".join(str(s) for s in shape)


def case_label(row: dict[str, Any]) -> str:
    """A short text for a case: pass, dtype, shape and any op-specific fields."""
    parts = [row.get("pass", ""), row.get("dtype", ""), shape_text(row.get("shape", []))]
    for key, value in sorted(row.items()):
        if key in MEASURED or key in ("op", "pass", "dtype", "shape"):
            continue
        parts.append(f"{key}={shape_text(value) if isinstance(value, list) else value}")
    return " ".join(p for p in parts if p)


def rate(row: dict[str, Any]) -> tuple[float, str]:
    """The achieved rate of a row: TFLOP/s for FLOP-counted rows, GB/s for
    byte-counted ones, host microseconds per call for overhead rows."""
    if "TFLOPs" in row:
        return row["TFLOPs"], "TFLOP/s"
    if "us_per_call" in row:
        return row["us_per_call"], "us/call"
    return row.get("GBs", float("nan")), "GB/s"


def pct_of_ceiling(row: dict[str, Any]) -> float:
    return row.get("pct_of_ceiling", float("nan"))


def ceiling_name(row: dict[str, Any]) -> str:
    return row.get("ceiling") or ""


def cases(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per case, in the order of the rows: op, label, the fusedops
    row, ms per implementation, and fusedops' speedup over each baseline
    (baseline time / fusedops time: above 1 means fusedops is faster; NaN
    where the case has no row of that baseline)."""
    grouped: dict[tuple, dict[str, Any]] = {}
    for row in result["rows"]:
        entry = grouped.setdefault(case_key(row), {"op": row["op"], "label": case_label(row), "ms": {}})
        entry["ms"][row["impl"]] = row["ms"]
        if row["impl"] == "fusedops":
            entry["row"] = row
    out = []
    for entry in grouped.values():
        ours = entry["ms"].get("fusedops")
        for impl in BASELINES:
            base = entry["ms"].get(impl)
            entry[f"vs_{impl}"] = base / ours if ours and base else float("nan")
        out.append(entry)
    return out


def baselines_of(entries: list[dict[str, Any]]) -> list[str]:
    """The baselines that ran in any of the cases: eager and compile always
    (a --no-compile run shows its compile column empty), liger where it ran."""
    return [impl for impl in BASELINES if impl != "liger" or any("liger" in e["ms"] for e in entries)]


def matplotlib_missing() -> str | None:
    """None where matplotlib imports, else how to get it (the plot needs it)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "fusedops bench: --plot needs matplotlib: pip install 'fusedops[bench]' (or matplotlib)"
    return None


def plot(result: dict[str, Any], path: str) -> None:
    """Speedup bars per op and case: fusedops over each baseline, with the
    break-even line at 1."""
    hint = matplotlib_missing()
    if hint:
        raise SystemExit(hint)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entries = cases(result)
    baselines = baselines_of(entries)
    ops = list(dict.fromkeys(e["op"] for e in entries))
    heights = [max(1, sum(e["op"] == op for e in entries)) for op in ops]
    fig, axes = plt.subplots(len(ops), 1, figsize=(10, 1.2 + 0.42 * sum(heights) + 0.6 * len(ops)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, op in zip(axes[:, 0], ops, strict=True):
        mine = [e for e in entries if e["op"] == op][::-1]
        ys = range(len(mine))
        width = 0.8 / len(baselines)
        for i, impl in enumerate(baselines):
            values = [e[f"vs_{impl}"] for e in mine]
            offset = (len(baselines) - 1) / 2 * width - i * width
            bars = ax.barh([y + offset for y in ys], values, height=width, color=PLOT_COLORS[impl],
                           label=f"fusedops speed / {BASELINES[impl]}")
            ax.bar_label(bars, labels=[f"{v:.2f}x" if v == v else "n/a" for v in values], fontsize=7,
                         padding=2)
        ax.axvline(1.0, color="black", linewidth=0.8, linestyle="--")
        ax.set_yticks(list(ys), [e["label"] for e in mine], fontsize=8)
        ax.set_title(op, fontsize=10, loc="left")
        finite = [e[f"vs_{impl}"] for e in mine for impl in baselines if e[f"vs_{impl}"] == e[f"vs_{impl}"]]
        ax.set_xlim(0, max([1.2] + [1.15 * v for v in finite]))
    handles, labels = axes[0, 0].get_legend_handles_labels()
    env = result.get("env", {})
    fig.suptitle(f"fusedops {env.get('fusedops', '')} on {env.get('device', '?')}, "
                 f"torch {env.get('torch', '')}  (> 1: fusedops faster)", fontsize=10)
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.4 / fig.get_figheight()),
               ncol=len(baselines), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.7 / fig.get_figheight()))
    fig.savefig(path, dpi=120)
    plt.close(fig)


PLOT_COLORS = {"eager": "#4c72b0", "compile": "#dd8452", "liger": "#55a868"}


def ceilings_text(result: dict[str, Any]) -> str:
    return "; ".join(f"{name} {c['value']:.1f} {c['unit']}" + (f" ({c['what']})" if c.get("what") else "")
                     for name, c in result["ceilings"].items() if c.get("value") is not None)


def _num(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None or value != value else f"{value:{spec}}{suffix}"


def markdown_tables(result: dict[str, Any]) -> str:
    """One Markdown table per op: fusedops' time, rate and % of the ceiling,
    the baselines' times, and the speedups."""
    entries = cases(result)
    baselines = baselines_of(entries)
    lines = []
    for op in dict.fromkeys(e["op"] for e in entries):
        lines += [f"### {op}", "",
                  "| case | fusedops ms | rate | % of ceiling | "
                  + " | ".join(f"{impl} ms" for impl in baselines) + " | "
                  + " | ".join(f"vs {impl}" for impl in baselines) + " |",
                  "|---|---:|---:|---:|" + "---:|" * 2 * len(baselines)]
        for e in entries:
            if e["op"] != op or "row" not in e:
                continue
            value, unit = rate(e["row"])
            ms = e["ms"]
            pct = pct_of_ceiling(e["row"])
            cells = [e["label"], f"{ms['fusedops']:.4f}", f"{value:.4g} {unit}",
                     f"{pct:.0f}% ({ceiling_name(e['row'])})" if pct == pct else "-",
                     *(_num(ms.get(impl), ".4f") for impl in baselines),
                     *(_num(e[f"vs_{impl}"], ".2f", "x") for impl in baselines)]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def losses(result: dict[str, Any], threshold: float = 1.0) -> list[str]:
    """Cases where fusedops is slower than a baseline (speedup below threshold)."""
    out = []
    for e in cases(result):
        for impl, name in BASELINES.items():
            if e[f"vs_{impl}"] < threshold:
                out.append(f"{e['op']} {e['label']}: {e[f'vs_{impl}']:.2f}x {name} "
                           f"({e['ms']['fusedops']:.4f} ms vs {e['ms'][impl]:.4f} ms)")
    return out


def print_summary(result: dict[str, Any]) -> None:
    """The per-op tables on stdout, in plain text."""
    entries = cases(result)
    baselines = baselines_of(entries)
    for op in dict.fromkeys(e["op"] for e in entries):
        mine = [e for e in entries if e["op"] == op and "row" in e]
        width = max(len(e["label"]) for e in mine) if mine else 10
        header = (f"{'case':<{width}}  {'fusedops ms':>11}  {'rate':>15}  {'%ceil':>6}"
                  + "".join(f"  {impl + ' ms':>10}" for impl in baselines)
                  + "".join(f"  {'x ' + impl:>9}" for impl in baselines))
        print(f"\n{op}\n{header}\n{'-' * len(header)}")
        for e in mine:
            value, unit = rate(e["row"])
            print(f"{e['label']:<{width}}  {e['ms']['fusedops']:>11.4f}  {value:>8.4g} {unit:<7}"
                  f"{pct_of_ceiling(e['row']):>6.1f}"
                  + "".join(f"  {e['ms'].get(impl, float('nan')):>10.4f}" for impl in baselines)
                  + "".join(f"  {e[f'vs_{impl}']:>9.2f}" for impl in baselines))


def combine(results: list[dict[str, Any]], sources: list[str]) -> dict[str, Any]:
    """Several runs as one result: all rows (cases of different runs must
    differ, e.g. different ops), the first run's environment for titles, and
    each run with its source for the description."""
    rows = [row for result in results for row in result["rows"]]
    return {"env": results[0].get("env", {}), "rows": rows,
            "runs": [dict(result, source=source) for result, source in zip(results, sources, strict=True)]}


def _run_lines(run: dict[str, Any]) -> list[str]:
    env = run.get("env", {})
    ops = ", ".join(dict.fromkeys(r["op"] for r in run["rows"]))
    return [
        f"- `{env.get('command', '?')}`" + (f" -> `{run['source']}`" if run.get("source") else "") + f": {ops}",
        f"  - {env.get('device', '?')}; torch {env.get('torch', '?')}; fusedops {env.get('fusedops', '?')}"
        + (f"; CUDA {env['cuda']}" if env.get("cuda") else "")
        + (f"; {env['threads']} CPU threads" if env.get("threads") and env.get("device") == "cpu" else ""),
        f"  - ceilings measured in the run: {ceilings_text(run)}",
    ]


def performance_markdown(result: dict[str, Any], plot_path: str | None, md_path: str,
                         source: str | None = None, note: str | None = None) -> str:
    """docs/PERFORMANCE.md: what was run (each run's exact command), on what,
    the tables, the plot, and where fusedops does not win."""
    runs = result.get("runs") or [dict(result, source=source)]
    lines = [
        "# Performance",
        "",
        "Generated by `benchmarks/report.py` from the JSON of `python -m fusedops bench`; every baseline",
        "and ceiling was measured in the same run as the fusedops numbers it is compared with.",
        "",
        *[line for run in runs for line in _run_lines(run)],
        "",
        "Time: median of the repeats per case, taken in 5 rounds in which the implementations take",
        "turns; on the GPU, CUDA events around each of back-to-back calls (device time where the device",
        "is the bottleneck, the launch path included where the host is); passes marked (CUDA graph):",
        "the same calls captured up to 16 to a CUDA graph (fewer as sizes grow, one at 2^28 elements;",
        "linear's shapes up to 2^34 FLOPs a call) and replayed, time per call,",
        "i.e. device time without the host path (autograd, dispatch, launches). Rate: the op's bytes moved",
        "(read + written) or FLOPs per second. % of ceiling: of the run's copy bandwidth, or of its",
        "GEMM (linear). vs eager / vs compile / vs liger (Liger-Kernel, where it ran): the baseline's",
        "time over fusedops' time (above 1: fusedops is faster).",
        "",
    ]
    if note:
        lines += [note, ""]
    if plot_path:
        rel = os.path.relpath(plot_path, os.path.dirname(os.path.abspath(md_path)) or ".")
        lines += [f"![fusedops speedup over eager PyTorch and torch.compile]({rel})", ""]
    lines += ["## Results", "", markdown_tables(result), "## Where fusedops does not win", ""]
    slower = losses(result)
    if not slower:
        slower = ["none: fusedops was at least as fast as every baseline in every case measured."]
    lines += [f"- {text}" for text in slower]
    lines.append("")
    return "\n".join(lines)
