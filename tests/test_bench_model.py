"""`python -m fusedops bench --model llama|vit` on the CPU with tiny models:
the table, the JSON (every variant from the same weights: fusedops' first
loss and gradients are eager's), the profile by kind and the plot."""

from __future__ import annotations

import importlib.util
import json

import pytest

from fusedops.__main__ import main

TINY = {"llama": ["--layers", "1", "--hidden", "32", "--intermediate", "64", "--heads", "2", "--kv-heads", "1",
                  "--vocab", "128", "--batch", "2", "--seq", "8"],
        "vit": ["--layers", "1", "--hidden", "32", "--heads", "2", "--batch", "2", "--image", "32"]}
LIBRARY = {"llama": "transformers", "vit": "timm"}


@pytest.mark.parametrize("model", ["llama", "vit"])
def test_model_bench(model, tmp_path, capsys):
    if importlib.util.find_spec(LIBRARY[model]) is None:
        pytest.skip(f"{LIBRARY[model]} not installed")
    out = tmp_path / "run.json"
    argv = ["bench", "--model", model, "--device", "cpu", "--no-compile", "--steps", "1", "--profile", "--json",
            str(out), *TINY[model]]
    has_plot = importlib.util.find_spec("matplotlib") is not None
    if has_plot:
        argv += ["--plot", str(tmp_path / "run.png")]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "variant" in text and "CPU operator time per step by kind" in text
    result = json.loads(out.read_text())
    eager, ours = result["rows"]
    assert (eager["variant"], ours["variant"]) == ("eager", "fusedops")
    assert ours["unit"] == ("tokens" if model == "llama" else "images") and ours["per_s"] > 0
    assert ours["loss"] == pytest.approx(eager["loss"], rel=1e-5) and ours["grad_rel_diff"] < 1e-4
    assert ours["peak_gib"] is None and set(ours["profile_ms"]) == {"GEMM", "attention", "optimizer", "loss",
                                                                    "memory-bound"}
    assert ours["profile_ms"]["GEMM"] > 0
    if has_plot:
        assert (tmp_path / "run.png").stat().st_size > 0


def test_model_bench_without_its_library(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "timm" else real(name, *a))
    assert main(["bench", "--model", "vit", "--device", "cpu"]) == 2
    assert "fusedops bench --model vit: needs timm" in capsys.readouterr().err
