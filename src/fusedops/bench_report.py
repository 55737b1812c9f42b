"""Tables, a plot and a Markdown report from the JSON of `python -m fusedops bench`.

Rows of the JSON are measurements of one implementation ("fusedops", "eager",
"compile") of one case; a case is every field of a row that is not a
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
            "vs_eager", "vs_compile", "us_per_call", "peak_GiB"}


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
    row, ms per implementation, and fusedops' speedup over eager and compile
    (baseline time / fusedops time: above 1 means fusedops is faster)."""
    grouped: dict[tuple, dict[str, Any]] = {}
    for row in result["rows"]:
        entry = grouped.setdefault(case_key(row), {"op": row["op"], "label": case_label(row), "ms": {}})
        entry["ms"][row["impl"]] = row["ms"]
        if row["impl"] == "fusedops":
            entry["row"] = row
    out = []
    for entry in grouped.values():
        ours = entry["ms"].get("fusedops")
        for impl in ("eager", "compile"):
            base = entry["ms"].get(impl)
            entry[f"vs_{impl}"] = base / ours if ours and base else float("nan")
        out.append(entry)
    return out


def matplotlib_missing() -> str | None:
    """None where matplotlib imports, else how to get it (the plot needs it)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "fusedops bench: --plot needs matplotlib: pip install 'fusedops[bench]' (or matplotlib)"
    return None


def plot(result: dict[str, Any], path: str) -> None:
    """Speedup bars per op and case: fusedops over eager and over
    torch.compile, with the break-even line at 1."""
    hint = matplotlib_missing()
    if hint:
        raise SystemExit(hint)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entries = cases(result)
    ops = list(dict.fromkeys(e["op"] for e in entries))
    heights = [max(1, sum(e["op"] == op for e in entries)) for op in ops]
    fig, axes = plt.subplots(len(ops), 1, figsize=(10, 1.2 + 0.42 * sum(heights) + 0.6 * len(ops)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, op in zip(axes[:, 0], ops, strict=True):
        mine = [e for e in entries if e["op"] == op][::-1]
        ys = range(len(mine))
        width = 0.4
        for offset, impl, color in ((width / 2, "eager", "#4c72b0"), (-width / 2, "compile", "#dd8452")):
            values = [e[f"vs_{impl}"] for e in mine]
            bars = ax.barh([y + offset for y in ys], values, height=width, color=color,
                           label=f"fusedops speed / {'eager' if impl == 'eager' else 'torch.compile'}")
            ax.bar_label(bars, labels=[f"{v:.2f}x" if v == v else "n/a" for v in values], fontsize=7,
                         padding=2)
        ax.axvline(1.0, color="black", linewidth=0.8, linestyle="--")
        ax.set_yticks(list(ys), [e["label"] for e in mine], fontsize=8)
        ax.set_title(op, fontsize=10, loc="left")
        finite = [e[k] for e in mine for k in ("vs_eager", "vs_compile") if e[k] == e[k]]
        ax.set_xlim(0, max([1.2] + [1.15 * v for v in finite]))
    handles, labels = axes[0, 0].get_legend_handles_labels()
    env = result.get("env", {})
    fig.suptitle(f"fusedops {env.get('fusedops', '')} on {env.get('device', '?')}, "
                 f"torch {env.get('torch', '')}  (> 1: fusedops faster)", fontsize=10)
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.4 / fig.get_figheight()),
               ncol=2, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.7 / fig.get_figheight()))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def ceilings_text(result: dict[str, Any]) -> str:
    return "; ".join(f"{name} {c['value']:.1f} {c['unit']}" + (f" ({c['what']})" if c.get("what") else "")
                     for name, c in result["ceilings"].items() if c.get("value") is not None)


def _num(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None or value != value else f"{value:{spec}}{suffix}"


def markdown_tables(result: dict[str, Any]) -> str:
    """One Markdown table per op: fusedops' time, rate and % of the ceiling,
    the baselines' times, and the speedups."""
    entries = cases(result)
    lines = []
    for op in dict.fromkeys(e["op"] for e in entries):
        lines += [f"### {op}", "",
                  "| case | fusedops ms | rate | % of ceiling | eager ms | compile ms "
                  "| vs eager | vs compile |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for e in entries:
            if e["op"] != op or "row" not in e:
                continue
            value, unit = rate(e["row"])
            ms = e["ms"]
            pct = pct_of_ceiling(e["row"])
            cells = [e["label"], f"{ms['fusedops']:.4f}", f"{value:.4g} {unit}",
                     f"{pct:.0f}% ({ceiling_name(e['row'])})" if pct == pct else "-",
                     _num(ms.get("eager"), ".4f"), _num(ms.get("compile"), ".4f"),
                     _num(e["vs_eager"], ".2f", "x"), _num(e["vs_compile"], ".2f", "x")]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def losses(result: dict[str, Any], threshold: float = 1.0) -> list[str]:
    """Cases where fusedops is slower than a baseline (speedup below threshold)."""
    out = []
    for e in cases(result):
        for impl, name in (("eager", "eager PyTorch"), ("compile", "torch.compile")):
            if e[f"vs_{impl}"] < threshold:
                out.append(f"{e['op']} {e['label']}: {e[f'vs_{impl}']:.2f}x {name} "
                           f"({e['ms']['fusedops']:.4f} ms vs {e['ms'][impl]:.4f} ms)")
    return out


def print_summary(result: dict[str, Any]) -> None:
    """The per-op tables on stdout, in plain text."""
    entries = cases(result)
    for op in dict.fromkeys(e["op"] for e in entries):
        mine = [e for e in entries if e["op"] == op and "row" in e]
        width = max(len(e["label"]) for e in mine) if mine else 10
        header = (f"{'case':<{width}}  {'fusedops ms':>11}  {'rate':>15}  {'%ceil':>6}  {'eager ms':>10}  "
                  f"{'compile ms':>10}  {'x eager':>7}  {'x compile':>9}")
        print(f"\n{op}\n{header}\n{'-' * len(header)}")
        for e in mine:
            value, unit = rate(e["row"])
            print(f"{e['label']:<{width}}  {e['ms']['fusedops']:>11.4f}  {value:>8.4g} {unit:<7}"
                  f"{pct_of_ceiling(e['row']):>6.1f}  {e['ms'].get('eager', float('nan')):>10.4f}  "
                  f"{e['ms'].get('compile', float('nan')):>10.4f}  {e['vs_eager']:>7.2f}  "
                  f"{e['vs_compile']:>9.2f}")


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
        "GEMM (linear). vs eager / vs compile: the baseline's time over fusedops' time (above 1:",
        "fusedops is faster).",
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
        slower = ["none: fusedops was at least as fast as both baselines in every case measured."]
    lines += [f"- {text}" for text in slower]
    lines.append("")
    return "\n".join(lines)
