"""fusedops.bench_report and benchmarks/report.py on a made-up run."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from fusedops import bench_report

REPORT = Path(__file__).resolve().parents[1] / "benchmarks" / "report.py"


def row(op, impl, ms, shape, **extra):
    r = {"op": op, "pass": "fwd", "impl": impl, "dtype": "float32", "shape": shape, "ms": ms}
    if op == "linear":
        r.update(flops=2 * 1024**3, TFLOPs=2 * 1024**3 / ms / 1e9, pct_of_ceiling=50.0, ceiling="gemm")
    else:
        r.update(bytes=3 * 4 * shape[0], GBs=3 * 4 * shape[0] / ms / 1e6, pct_of_ceiling=90.0, ceiling="copy")
    r.update(extra)
    return r


RESULT = {
    "env": {"fusedops": "0.1.0+pt213cpu", "torch": "2.13.0", "device": "cpu", "threads": 2,
            "command": "python -m fusedops bench --device cpu --quick --json run.json"},
    "ceilings": {"copy": {"value": 10.0, "unit": "GB/s", "what": "copy_"},
                 "gemm": {"value": 1.0, "unit": "TFLOP/s", "what": "mm 1024^3"}},
    "rows": [
        row("add", "fusedops", 1.0, [1 << 20]), row("add", "eager", 2.0, [1 << 20]),
        row("add", "compile", 0.5, [1 << 20]),
        row("scale_bias_clamp", "fusedops", 1.0, [1 << 20], bias=[4096]), row("scale_bias_clamp", "eager", 3.0, [1 << 20], bias=[4096]),
        row("scale_bias_clamp", "compile", 1.5, [1 << 20], bias=[4096]),
        row("scale_bias_clamp", "fusedops", 2.0, [1 << 20], bias=[1 << 20]),
        row("scale_bias_clamp", "eager", 2.0, [1 << 20], bias=[1 << 20]),
        row("scale_bias_clamp", "compile", 4.0, [1 << 20], bias=[1 << 20]),
        row("linear", "fusedops", 4.0, [1024, 1024, 1024]), row("linear", "eager", 3.0, [1024, 1024, 1024]),
        row("linear", "compile", 4.0, [1024, 1024, 1024]),
        {"op": "linear", "pass": "host", "impl": "fusedops", "dtype": "float32", "shape": [16, 16, 16],
         "ms": 0.004, "us_per_call": 4.0},
        {"op": "linear", "pass": "host", "impl": "eager", "dtype": "float32", "shape": [16, 16, 16],
         "ms": 0.005, "us_per_call": 5.0},
    ],
}


def test_cases_and_speedups():
    cases = bench_report.cases(RESULT)
    assert [(c["op"], c["label"]) for c in cases] == [
        ("add", "fwd float32 2^20"),
        ("scale_bias_clamp", "fwd float32 2^20 bias=2^12"),
        ("scale_bias_clamp", "fwd float32 2^20 bias=2^20"),
        ("linear", "fwd float32 1024x1024x1024"),
        ("linear", "host float32 16x16x16"),
    ]
    speed = [(c["vs_eager"], c["vs_compile"]) for c in cases]
    assert speed[:4] == [(2.0, 0.5), (3.0, 1.5), (1.0, 2.0), (0.75, 1.0)]
    assert speed[4][0] == pytest.approx(1.25) and math.isnan(speed[4][1])
    losses = bench_report.losses(RESULT)
    assert losses == ["add fwd float32 2^20: 0.50x torch.compile (1.0000 ms vs 0.5000 ms)",
                      "linear fwd float32 1024x1024x1024: 0.75x eager PyTorch (4.0000 ms vs 3.0000 ms)"]


def test_markdown_names_run_and_losses(tmp_path):
    md = bench_report.performance_markdown(RESULT, str(tmp_path / "plot.png"), str(tmp_path / "PERF.md"))
    assert "`python -m fusedops bench --device cpu --quick --json run.json`" in md
    assert "copy 10.0 GB/s (copy_); gemm 1.0 TFLOP/s (mm 1024^3)" in md
    assert "![fusedops speedup over eager PyTorch and torch.compile](plot.png)" in md
    assert "| fwd float32 2^20 | 1.0000 | 12.58 GB/s | 90% (copy) | 2.0000 | 0.5000 | 2.00x | 0.50x |" in md
    assert "- add fwd float32 2^20: 0.50x torch.compile" in md
    assert "host float32 16x16x16 | 0.0040 | 4 us/call" in md


def test_liger_is_a_baseline_where_it_ran():
    """A "liger" row (Liger-Kernel, on CUDA where it is installed) gets its
    speedup, columns and losses; a run without one shows no liger column."""
    assert "liger" not in bench_report.markdown_tables(RESULT)
    result = dict(RESULT, rows=RESULT["rows"] + [row("add", "liger", 0.8, [1 << 20]),
                                                 row("linear", "liger", 8.0, [1024, 1024, 1024])])
    cases = bench_report.cases(result)
    assert [c["vs_liger"] for c in cases[:1] + cases[3:4]] == [0.8, 2.0]
    assert math.isnan(cases[1]["vs_liger"])
    md = bench_report.markdown_tables(result)
    assert "| eager ms | compile ms | liger ms | vs eager | vs compile | vs liger |" in md
    assert "| fwd float32 2^20 | 1.0000 | 12.58 GB/s | 90% (copy) | 2.0000 | 0.5000 | 0.8000 | 2.00x | 0.50x | 0.80x |" in md
    assert "add fwd float32 2^20: 0.80x Liger-Kernel (1.0000 ms vs 0.8000 ms)" in bench_report.losses(result)


def test_committed_results_are_in_the_current_format():
    """No reader shim for older formats: the committed runs are kept current
    (ab-*.json are benchmarks/ab.py's comparisons, not runs; model runs have
    their own rows)."""
    for path in sorted((REPORT.parent / "results").glob("[!a]*.json")):
        result = json.loads(path.read_text())
        if "model" in result:  # `bench --model`'s training steps: a variant a row
            assert all({"variant", "ms", "per_s", "peak_gib", "loss"} <= row.keys() for row in result["rows"]), path
            continue
        assert result["ceilings"]["copy"]["unit"] == "GB/s", path
        assert "copy_GBs" not in result, path
        for row in result["rows"]:
            assert not {"pct_of_copy", "pct_of_gemm"} & row.keys() and row["op"] != "sbc", (path, row)
        assert bench_report.markdown_tables(result)


def test_report_script_writes_plot_and_markdown(tmp_path):
    pytest.importorskip("matplotlib")
    run = tmp_path / "run.json"
    run.write_text(json.dumps(RESULT))
    png, md = tmp_path / "docs" / "perf.png", tmp_path / "docs" / "PERFORMANCE.md"
    png.parent.mkdir()
    subprocess.run([sys.executable, str(REPORT), str(run), str(png), str(md)], check=True, cwd=tmp_path,
                   timeout=120)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "](perf.png)" in md.read_text()


def test_report_on_a_real_cpu_run(tmp_path):
    """benchmarks/results/cpu-quick-2026-11-30.json: `python -m fusedops bench
    --device cpu --quick` on a 2-core machine, every op."""
    run = REPORT.parent / "results" / "cpu-quick-2026-11-30.json"
    result = json.loads(run.read_text())
    cases = bench_report.cases(result)
    ops = {c["op"] for c in cases}
    assert {"add", "scale_bias_clamp", "linear", "linear+relu", "linear+gelu", "linear+clamp"} <= ops
    assert all(c["vs_eager"] > 0 for c in cases)
    md = bench_report.performance_markdown(result, None, str(tmp_path / "PERFORMANCE.md"), source=str(run))
    assert md.count("\n### ") == len(ops)
    assert "gemm_float32 0.1 TFLOP/s (float32 mm 1024^3)" in md
    if importlib.util.find_spec("matplotlib"):
        bench_report.plot(result, str(tmp_path / "cpu.png"))
        assert (tmp_path / "cpu.png").stat().st_size > 10_000


def test_report_script_combines_runs(tmp_path):
    first = dict(RESULT, rows=RESULT["rows"][:3])
    second = dict(RESULT, rows=RESULT["rows"][9:], env=dict(RESULT["env"], command="python -m fusedops bench "
                                                                                   "--ops linear"))
    paths = []
    for i, run in enumerate((first, second)):
        paths.append(tmp_path / f"run{i}.json")
        paths[-1].write_text(json.dumps(run))
    md = tmp_path / "PERFORMANCE.md"
    png = tmp_path / "perf.png" if importlib.util.find_spec("matplotlib") else None
    if png is None:  # the Markdown alone, in-process
        result = bench_report.combine([first, second], [str(p) for p in paths])
        md.write_text(bench_report.performance_markdown(result, None, str(md)))
    else:
        subprocess.run([sys.executable, str(REPORT), *map(str, paths), str(png), str(md)], check=True,
                       timeout=120)
    text = md.read_text()
    assert f"- `python -m fusedops bench --device cpu --quick --json run.json` -> `{paths[0]}`: add" in text
    assert f"- `python -m fusedops bench --ops linear` -> `{paths[1]}`: linear" in text
    assert "### add" in text and "### linear" in text and "### scale_bias_clamp" not in text
