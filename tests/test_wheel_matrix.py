"""tools/wheel_matrix.py: pure Python, needs neither torch nor fusedops."""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "wheel_matrix.py"

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


def by_variant(entries: list[dict]) -> dict[str, dict]:
    return {e["variant"]: e for e in entries}


def test_three_variants_as_designed(entries):
    # DESIGN.md section 3: the variants, their toolkits and arch lists.
    v = by_variant(entries)
    assert list(v) == ["cpu", "cu12", "cu13"]
    assert (v["cpu"]["cuda"], v["cpu"]["cuda_toolkit"], v["cpu"]["archs"], v["cpu"]["fusedops_cuda"]) == (
        "cpu", "", "", "OFF")
    assert (v["cu12"]["cuda"], v["cu12"]["cuda_toolkit"]) == ("12.4", "12.4.1")
    assert v["cu12"]["archs"] == "7.5;8.0;8.6;8.9;9.0+PTX"
    assert (v["cu13"]["cuda"], v["cu13"]["cuda_toolkit"]) == ("13.0", "13.0.3.0")
    assert v["cu13"]["archs"] == "7.5;8.0;8.6;8.9;9.0;10.0;12.0+PTX"
    # Built against the oldest torch of that CUDA major on PyPI, from the variant's index.
    assert {k: (e["torch"], e["torch_label"]) for k, e in v.items()} == {
        "cpu": ("2.10.0", "cpu"), "cu12": ("2.10.0", "cu128"), "cu13": ("2.11.0", "cu130")}
    assert v["cpu"]["test_torch"] == ["2.10.0", "2.13.0", "2.14.1", "2.15.0"]
    assert v["cu12"]["test_torch"] == ["2.10.0"]
    assert v["cu13"]["test_torch"] == ["2.14.1", "2.15.0"]
    for e in entries:
        assert e["python"] == "cp310" and e["python_min"] == "3.10" and e["manylinux"] == "manylinux_2_28"
        assert e["index_url"] == f"https://fusedops.github.io/whl/{e['variant']}/simple"


def test_build_torch_is_the_abi_target(entries):
    # The oldest torch a variant is built against is the stable-ABI target (pyproject).
    target = re.search(r'^abi-target = "(\d+\.\d+)"', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    assert min((e["torch"] for e in entries), key=wm.torch_key).startswith(target + ".")
    for e in entries:
        assert wm.torch_key(e["torch"]) >= wm.torch_key(target + ".0")


def test_toolkit_pin_is_one_install_cuda_toolkit_knows():
    # 13.0.3.0 is the exact cuda-toolkit release the script maps 13.0 to; 12.4.x is
    # its Debian 12.4.1 set.
    script = (ROOT / "tools" / "install_cuda_toolkit.sh").read_text()
    assert "13.0) toolkit_version=13.0.3.0" in script
    assert "12.4 | 12.4.*) toolkit_version=12.4" in script
    assert "nvidia-cuda-toolkit=12.4.131~12.4.1" in script


def test_arch_lists_match_cmake_reader(data):
    # cmake/cuda_archs.cmake reads variants.cu<major>.archs: the keys it uses exist.
    cmake = (ROOT / "cmake" / "cuda_archs.cmake").read_text()
    assert "wheel_matrix.json" in cmake and "string(JSON" in cmake
    for name in ("cu12", "cu13"):
        wm.check_archs(data["variants"][name]["archs"])


@pytest.mark.parametrize("bad", ["", "9.0", "9.0+PTX;8.0+PTX", "8.0;7.5+PTX", "sm_90+PTX", "8.0;8.0+PTX",
                                 "10.0;9.0+PTX"])
def test_check_archs_rejects(bad):
    with pytest.raises(wm.MatrixError):
        wm.check_archs(bad)


def test_check_archs_accepts():
    wm.check_archs("8.0 9.0 12.0+PTX")
    wm.check_archs("9.0;10.0a;12.0f+PTX")


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        (("cu13", "toolkit"), "12.9.1", "toolkit"),
        (("cu13", "toolkit"), "13.0", "toolkit"),
        (("cu12", "cuda"), "13.0", "cuda must be 12"),
        (("cu13", "torch_index_url"), "https://download.pytorch.org/whl/cu128", "not CUDA 13"),
        (("cu12", "torch_index_url"), "https://download.pytorch.org/whl/cu118", "not CUDA 12"),
        (("cpu", "torch_index_url"), "https://pypi.org/simple", "cpu"),
        (("cpu", "archs"), "9.0+PTX", "null"),
        (("cu13", "test_torch"), ["2.10.0"], "older than build_torch"),
        (("cu13", "test_torch"), [], "empty"),
        (("cu13", "test_torch"), ["2.14.1", "2.14.1"], "duplicate"),
        (("cu13", "build_torch"), "2.11", "X.Y.Z"),
        (("cu13", "archs"), "9.0;8.0+PTX", "ascending"),
    ],
)
def test_expand_rejects_inconsistent_data(data, path, value, match):
    broken = copy.deepcopy(data)
    broken["variants"][path[0]][path[1]] = value
    with pytest.raises(wm.MatrixError, match=match):
        wm.expand(broken)


def test_expand_rejects_unknown_variant(data):
    broken = copy.deepcopy(data)
    broken["variants"]["cu11"] = copy.deepcopy(broken["variants"]["cu12"])
    with pytest.raises(wm.MatrixError, match="cu11"):
        wm.expand(broken)


def test_github_output_is_matrix_include(entries):
    r = run("--github")
    assert r.returncode == 0, r.stderr
    assert "\n" not in r.stdout.strip()  # one line, for $GITHUB_OUTPUT
    out = json.loads(r.stdout)
    assert out == {"include": entries}
    cu = by_variant(out["include"])["cu13"]
    assert (cu["torch"], cu["cuda"], cu["cuda_major"], cu["fusedops_cuda"]) == ("2.11.0", "13.0", "13", "ON")
    assert cu["torch_index_url"] == "https://download.pytorch.org/whl/cu130"
    assert cu["find_links_page"] == "cu13.html"


def test_github_tests_one_entry_per_variant_and_torch(entries):
    r = run("--github-tests")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)["include"]
    assert [(e["variant"], e["torch"]) for e in out] == [
        ("cpu", "2.10.0"), ("cpu", "2.13.0"), ("cpu", "2.14.1"), ("cpu", "2.15.0"),
        ("cu12", "2.10.0"), ("cu13", "2.14.1"), ("cu13", "2.15.0")]
    assert all(e["torch_index_url"] == by_variant(entries)[e["variant"]]["torch_index_url"] for e in out)


def test_variant_shell_lines_eval_to_env():
    r = run("--variant", "cu13")
    assert r.returncode == 0, r.stderr
    env = dict(kv for line in r.stdout.splitlines() for kv in [shlex.split(line)[0].split("=", 1)])
    assert env["FUSEDOPS_VARIANT"] == "cu13"
    assert env["TORCH_VERSION"] == "2.11.0"
    assert env["CUDA_VERSION"] == "13.0"
    assert env["CUDA_TOOLKIT_VERSION"] == "13.0.3.0"
    assert env["FUSEDOPS_CUDA_ARCHS"] == "7.5;8.0;8.6;8.9;9.0;10.0;12.0+PTX"
    assert env["TEST_TORCH_VERSIONS"] == "2.14.1 2.15.0"
    # Really evaluate it in a shell: the ';' in the arch list must stay quoted.
    sh = subprocess.run(
        ["bash", "-c", 'eval "$1"; echo "$FUSEDOPS_CUDA_ARCHS|$TEST_TORCH_VERSIONS"', "_", r.stdout],
        capture_output=True,
        text=True,
        check=True,
    )
    assert sh.stdout.strip() == "7.5;8.0;8.6;8.9;9.0;10.0;12.0+PTX|2.14.1 2.15.0"


def test_variant_env_format_is_raw():
    r = run("--variant", "cpu", "--format", "env")
    assert r.returncode == 0, r.stderr
    expected = {"TORCH_VERSION=2.10.0", "TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu",
                "CUDA_VERSION=cpu", "FUSEDOPS_CUDA=OFF", "FUSEDOPS_CUDA_ARCHS="}
    assert not expected - set(r.stdout.splitlines()), r.stdout


def test_unknown_variant_fails():
    r = run("--variant", "cu11")
    assert r.returncode == 2
    assert "cpu cu12 cu13" in r.stderr


def test_list_table(entries):
    r = run("--list")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(entries) + 1
    assert lines[1].split()[:4] == ["cpu", "2.10.0", "-", "cpu"]
    assert lines[3].split()[:4] == ["cu13", "2.11.0", "13.0.3.0", "cu130"]


@pytest.mark.parametrize(
    ("variant", "version", "cuda", "requires", "want", "label", "problems"),
    [
        ("cpu", "2.10.0+cpu", None, [], "2.10.0", "cpu", []),
        ("cpu", "2.10.0", "12.8", [], "2.10.0", "cpu", ["not a +cpu build", "builds against a CPU torch"]),
        ("cpu", "2.15.0", "13.2", [], None, None, []),  # a CPU wheel is tested under any torch
        ("cu12", "2.10.0+cu128", "12.8", ["nvidia-cuda-runtime-cu12==12.8.90; platform_system == 'Linux'"],
         "2.10.0", "cu128", []),
        ("cu12", "2.10.0", "12.8", ["nvidia-cuda-runtime-cu12==12.8.90"], None, None, []),
        ("cu12", "2.10.0+cu118", "11.8", [], None, None, ["12.x >= 12.4"]),
        ("cu12", "2.10.0+cpu", None, [], None, None, ["no CUDA"]),
        ("cu13", "2.11.0+cu130", "13.0", ["cuda-toolkit[cublas,cudart]==13.0.2"], "2.11.0", "cu130", []),
        ("cu13", "2.14.1", "12.8", ["nvidia-cuda-runtime-cu12==12.8.90"], "2.11.0", None,
         ["needs 2.11.0", "13.x >= 13.0", "metadata requires nvidia-cuda-runtime-cu12==12.8.90"]),
    ],
)
def test_torch_mismatches(entries, variant, version, cuda, requires, want, label, problems):
    got = wm.torch_mismatches(by_variant(entries)[variant], version, cuda, requires, want, label)
    assert len(got) == len(problems), got
    for text, problem in zip(got, problems, strict=True):
        assert problem in text


def test_check_torch_needs_variant():
    r = run("--list", "--check-torch")
    assert r.returncode == 2


def test_every_tested_torch_minor_has_an_accelerator(data):
    versions = wm.accelerator_torches(data)
    assert versions == sorted(set(versions), key=wm.torch_key)
    tested = {".".join(v.split(".")[:2]) for spec in data["variants"].values() for v in spec["test_torch"]}
    assert tested <= {".".join(v.split(".")[:2]) for v in versions}
    out = run("--accelerators")
    assert out.stdout.split() == versions


@pytest.mark.parametrize("change, match", [
    (lambda d: d["accelerators"].pop("2.13"), r"tested under torch 2\.13\.0, but no accelerator"),
    (lambda d: d["accelerators"].update({"2.13": "2.12.1"}), r"not a release of torch 2\.13"),
])
def test_accelerators_are_checked(data, change, match):
    bad = copy.deepcopy(data)
    change(bad)
    with pytest.raises(wm.MatrixError, match=match):
        wm.accelerator_torches(bad)
