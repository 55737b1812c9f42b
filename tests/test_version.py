"""The release's version is written once (pyproject.toml's base-version): the README, docs,
sources and tools name no other release, and the installed wheel is that version."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

import fusedops

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "project_version.py"
_spec = importlib.util.spec_from_file_location("project_version", SCRIPT)
pv = importlib.util.module_from_spec(_spec)
sys.modules["project_version"] = pv
_spec.loader.exec_module(pv)


def test_readme_docs_and_tools_name_this_release():
    assert pv.other_versions() == []


def test_a_stale_mention_is_found(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[[tool.dynamic-metadata]]\nbase-version = "0.5.0"\n')
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "wheel_matrix.json").write_text('{"accelerators": {"2.13": "2.13.0"}}')
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "install.md").write_text(
        'pip install "fusedops==0.5.0+cpu"\ntorch 2.13.0+cpu, 2.11.0+cu130\n'
        "| `0.4.0+cu13` |\ngit tag v0.4.0\nfusedops-0.5.0+cu12-cp310-abi3-manylinux_2_28_x86_64.whl\n")
    assert pv.other_versions(tmp_path) == ["docs/install.md:3: 0.4.0+cu13 (base-version is 0.5.0)",
                                           "docs/install.md:4: tag v0.4.0 (base-version is 0.5.0)"]


def test_base_version_is_the_one_toml_reads():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11; the pattern serves 3.10
    with open(pv.ROOT / "pyproject.toml", "rb") as f:
        assert tomllib.load(f)["tool"]["dynamic-metadata"][0]["base-version"] == pv.base_version()


def test_the_installed_wheel_is_this_release():
    assert fusedops.__version__.split("+")[0] == pv.base_version(), "rebuild: the wheel predates base-version"
