"""tools/wheel_matrix.py: pure Python, needs neither torch nor fusedops."""

from __future__ import annotations

import copy
import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1] / "tools"
SCRIPT = TOOLS / "wheel_matrix.py"

_spec = importlib.util.spec_from_file_location("wheel_matrix", SCRIPT)
wm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wm)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def data() -> dict:
    return wm.load()


@pytest.fixture(scope="module")
def entries(data) -> list[dict]:
    return wm.expand(data)


def test_variant_tag():
    assert wm.variant_tag("2.14.1", "13.0") == "pt214cu130"
    assert wm.variant_tag("2.13.0", "cpu") == "pt213cpu"
    assert wm.variant_tag("2.11.0", "12.6") == "pt211cu126"
    assert wm.torch_local_label("2.14.1", "13.0") == "torch-2.14+cu130"
    assert wm.torch_local_label("2.13.0", "cpu") == "torch-2.13+cpu"
    with pytest.raises(wm.MatrixError):
        wm.variant_tag("2.14", "13.0")


def test_torch_versions_and_axes(data, entries):
    torches = {t["version"] for t in data["torch"]}
    assert {".".join(v.split(".")[:2]) for v in torches} == {"2.11", "2.12", "2.13", "2.14"}
    assert {"2.14.1", "2.13.0"} <= torches
    tags = [e["variant"] for e in entries]
    assert len(tags) == len(set(tags))
    # Every torch has a CPU build, and the two variants CI builds locally exist.
    for v in torches:
        assert wm.variant_tag(v, "cpu") in tags
    assert {"pt214cu130", "pt213cpu"} <= set(tags)
    assert data["python_min"] == "3.10"
    assert data["manylinux"] == "manylinux_2_28"


def test_arch_lists(data):
    # Every CUDA variant's list is valid and ends in PTX of its newest arch
    # (forward compatibility); the CPU variant has none.
    for cuda, entry in data["cuda"].items():
        if cuda == "cpu":
            assert entry.get("archs") is None
            continue
        wm.check_archs(entry["archs"])
        assert entry["archs"].split(";")[-1].endswith("+PTX")


@pytest.mark.parametrize("bad", ["", "9.0", "9.0+PTX;8.0+PTX", "8.0;7.5+PTX", "sm_90+PTX", "8.0;8.0+PTX"])
def test_check_archs_rejects(bad):
    with pytest.raises(wm.MatrixError):
        wm.check_archs(bad)


def test_check_archs_accepts_space_separated():
    wm.check_archs("8.0 9.0 12.0+PTX")


def test_expand_rejects_inconsistent_data(data):
    broken = copy.deepcopy(data)
    broken["torch"][0]["cuda"].append("11.8")
    with pytest.raises(wm.MatrixError, match="11.8"):
        wm.expand(broken)
    dup = copy.deepcopy(data)
    dup["torch"].append(dup["torch"][0])
    with pytest.raises(wm.MatrixError, match="duplicate"):
        wm.expand(dup)
    pin = copy.deepcopy(data)
    pin["cuda"]["13.0"]["toolkit"] = "12.9.1"
    with pytest.raises(wm.MatrixError, match="toolkit"):
        wm.expand(pin)


def test_github_output_is_matrix_include(entries):
    r = run("--github")
    assert r.returncode == 0, r.stderr
    assert "\n" not in r.stdout.strip()  # one line, for $GITHUB_OUTPUT
    out = json.loads(r.stdout)
    assert out == {"include": entries}
    cu = next(e for e in out["include"] if e["variant"] == "pt214cu130")
    assert cu["torch"] == "2.14.1"
    assert cu["cuda"] == "13.0"
    assert cu["fusedops_cuda"] == "ON"
    assert cu["torch_index_url"].endswith("/cu130")
    assert cu["find_links_page"] == "torch-2.14+cu130.html"
    assert cu["index_url"] == "https://fusedops.github.io/whl/pt214cu130/simple"
    cpu = next(e for e in out["include"] if e["variant"] == "pt213cpu")
    assert (cpu["fusedops_cuda"], cpu["archs"], cpu["cuda_toolkit"]) == ("OFF", "", "")


def test_variant_shell_lines_eval_to_env():
    r = run("--variant", "pt214cu130")
    assert r.returncode == 0, r.stderr
    env = dict(kv for line in r.stdout.splitlines() for kv in [shlex.split(line)[0].split("=", 1)])
    assert env["TORCH_VERSION"] == "2.14.1"
    assert env["CUDA_VERSION"] == "13.0"
    assert env["FUSEDOPS_CUDA_ARCHS"] == "7.5;8.0;8.6;8.9;9.0;10.0;11.0;12.0+PTX"
    assert env["FUSEDOPS_CUDA"] == "ON"
    # Really evaluate it in a shell: the ';' in the arch list must stay quoted.
    sh = subprocess.run(
        ["bash", "-c", 'eval "$1"; echo "$FUSEDOPS_CUDA_ARCHS|$TORCH_VERSION"', "_", r.stdout],
        capture_output=True,
        text=True,
        check=True,
    )
    assert sh.stdout.strip() == "7.5;8.0;8.6;8.9;9.0;10.0;11.0;12.0+PTX|2.14.1"


def test_variant_env_format_is_raw():
    r = run("--variant", "pt213cpu", "--format", "env")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "TORCH_VERSION=2.13.0" in lines
    assert "CUDA_VERSION=cpu" in lines
    assert "FUSEDOPS_CUDA=OFF" in lines
    assert "FUSEDOPS_CUDA_ARCHS=" in lines


def test_unknown_variant_fails():
    r = run("--variant", "pt299cu999")
    assert r.returncode == 2
    assert "pt214cu130" in r.stderr


def test_list_table(entries):
    r = run("--list")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["variant", "torch", "cuda", "cuda_toolkit", "archs"]
    assert len(lines) == len(entries) + 1
    assert any(line.split()[:3] == ["pt213cpu", "2.13.0", "cpu"] for line in lines)
