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


def by_variant(entries: list[dict], platform: str = "x86_64") -> dict[str, dict]:
    return {e["variant"]: e for e in entries if e["platform"] == platform}


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
        assert e["wheel_platform"] == f"manylinux_2_28_{e['platform']}"
        assert e["cibw_build"] == f"cp310-manylinux_{e['platform']}"


def test_aarch64_has_cpu_and_cu13_as_designed(entries):
    # PyPI's aarch64 torch is CPU-only for 2.10 and CUDA 13 from 2.11: no cu12 there.
    assert [(e["variant"], e["platform"]) for e in entries] == [
        ("cpu", "x86_64"), ("cpu", "aarch64"), ("cu12", "x86_64"), ("cu13", "x86_64"), ("cu13", "aarch64")]
    a, x = by_variant(entries, "aarch64"), by_variant(entries)
    # Same toolkit, build torch and index as on x86_64; the archs cover GH200 (9.0)
    # and GB200 (10.0) with PTX of the newest.
    for key in ("cuda", "cuda_toolkit", "torch", "torch_index_url"):
        assert a["cu13"][key] == x["cu13"][key]
    archs = wm.check_archs(a["cu13"]["archs"])
    assert {"9.0", "10.0"} <= {arch.removesuffix("+PTX") for arch in archs} and archs[-1].endswith("+PTX")
    assert a["cpu"]["archs"] == "" and a["cpu"]["fusedops_cuda"] == "OFF"
    assert a["cpu"]["test_torch"] == ["2.10.0", "2.15.0"] and a["cu13"]["test_torch"] == ["2.15.0"]


def test_the_package_knows_the_matrix_wheels(entries):
    # _variant.WHEELS (what `info` and the ImportError offer) is the matrix's pairs.
    from fusedops._variant import WHEELS

    matrix = {p: tuple(e["variant"] for e in entries if e["platform"] == p) for p in wm.PLATFORMS}
    assert matrix == WHEELS


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
    # cmake/cuda_archs.cmake reads variants.cu<major>.platforms.<processor>.archs:
    # the keys it uses exist.
    cmake = (ROOT / "cmake" / "cuda_archs.cmake").read_text()
    assert "wheel_matrix.json" in cmake
    assert "GET \"${matrix}\" variants ${variant} platforms ${CMAKE_SYSTEM_PROCESSOR} archs)" in cmake
    for name in ("cu12", "cu13"):
        for per_platform in data["variants"][name]["platforms"].values():
            wm.check_archs(per_platform["archs"])


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
        (("cpu", "platforms", "aarch64", "archs"), "9.0+PTX", "null"),
        (("cu13", "platforms", "x86_64", "test_torch"), ["2.10.0"], "older than build_torch"),
        (("cu13", "platforms", "aarch64", "test_torch"), [], "cu13 on aarch64: test_torch is empty"),
        (("cu13", "platforms", "x86_64", "test_torch"), ["2.14.1", "2.14.1"], "duplicate"),
        (("cu13", "build_torch"), "2.11", "X.Y.Z"),
        (("cu13", "platforms", "aarch64", "archs"), "9.0;8.0+PTX", "ascending"),
        (("cu13", "platforms", "aarch64", "archs"), None, "bad arch list"),
        (("cu13", "platforms"), {}, "platforms must be some of"),
        (("cu12", "platforms", "ppc64le"), {"archs": "9.0+PTX", "test_torch": ["2.10.0"]}, "ppc64le"),
    ],
)
def test_expand_rejects_inconsistent_data(data, path, value, match):
    broken = copy.deepcopy(data)
    target = broken["variants"]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(wm.MatrixError, match=match):
        wm.expand(broken)


def test_every_platform_test_torch_has_an_accelerator(data):
    broken = copy.deepcopy(data)
    broken["variants"]["cu13"]["platforms"]["aarch64"]["test_torch"].append("2.16.0")
    with pytest.raises(wm.MatrixError, match="cu13 on aarch64: tested under torch 2.16.0"):
        wm.accelerator_torches(broken)


def test_expand_rejects_unknown_variant(data):
    broken = copy.deepcopy(data)
    broken["variants"]["cu11"] = copy.deepcopy(broken["variants"]["cu12"])
    with pytest.raises(wm.MatrixError, match="cu11"):
        wm.expand(broken)


def test_github_output_is_matrix_include(entries):
    r = run("--github", "--platform", "all")
    assert r.returncode == 0, r.stderr
    assert "\n" not in r.stdout.strip()  # one line, for $GITHUB_OUTPUT
    out = json.loads(r.stdout)
    assert out == {"include": entries}
    # Without --platform: this machine's platform only (an x86_64 runner's
    # matrix is today's three jobs).
    here = json.loads(run("--github").stdout)["include"]
    assert here == [e for e in entries if e["platform"] == wm.this_platform()]
    assert json.loads(run("--github", "--platform", "aarch64").stdout)["include"] == [
        e for e in entries if e["platform"] == "aarch64"]
    cu = by_variant(out["include"])["cu13"]
    assert (cu["torch"], cu["cuda"], cu["cuda_major"], cu["fusedops_cuda"]) == ("2.11.0", "13.0", "13", "ON")
    assert cu["torch_index_url"] == "https://download.pytorch.org/whl/cu130"
    assert cu["find_links_page"] == "cu13.html"


def test_github_tests_one_entry_per_variant_platform_and_torch(entries):
    r = run("--github-tests", "--platform", "all")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)["include"]
    assert [(e["variant"], e["platform"], e["torch"]) for e in out] == [
        ("cpu", "x86_64", "2.10.0"), ("cpu", "x86_64", "2.13.0"), ("cpu", "x86_64", "2.14.1"),
        ("cpu", "x86_64", "2.15.0"), ("cpu", "aarch64", "2.10.0"), ("cpu", "aarch64", "2.15.0"),
        ("cu12", "x86_64", "2.10.0"), ("cu13", "x86_64", "2.14.1"), ("cu13", "x86_64", "2.15.0"),
        ("cu13", "aarch64", "2.15.0")]
    assert all(e["torch_index_url"] == by_variant(entries, e["platform"])[e["variant"]]["torch_index_url"]
               for e in out)


def test_variant_shell_lines_eval_to_env():
    r = run("--variant", "cu13", "--platform", "x86_64")
    assert r.returncode == 0, r.stderr
    env = dict(kv for line in r.stdout.splitlines() for kv in [shlex.split(line)[0].split("=", 1)])
    assert env["FUSEDOPS_VARIANT"] == "cu13" and env["FUSEDOPS_PLATFORM"] == "x86_64"
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


def test_variant_of_another_platform():
    r = run("--variant", "cpu", "--platform", "aarch64", "--format", "env")
    assert r.returncode == 0, r.stderr
    assert {"FUSEDOPS_PLATFORM=aarch64", "TEST_TORCH_VERSIONS=2.10.0 2.15.0"} <= set(r.stdout.splitlines())
    # No cu12 wheel for aarch64: asking for one fails, naming what exists.
    r = run("--variant", "cu12", "--platform", "aarch64")
    assert r.returncode == 2 and "no variant 'cu12' on aarch64; aarch64 has: cpu cu13" in r.stderr
    assert run("--variant", "cpu", "--platform", "all").returncode == 2


def test_variant_env_format_is_raw():
    r = run("--variant", "cpu", "--platform", "x86_64", "--format", "env")
    assert r.returncode == 0, r.stderr
    expected = {"TORCH_VERSION=2.10.0", "TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu",
                "CUDA_VERSION=cpu", "FUSEDOPS_CUDA=OFF", "FUSEDOPS_CUDA_ARCHS="}
    assert not expected - set(r.stdout.splitlines()), r.stdout


def test_unknown_variant_fails():
    r = run("--variant", "cu11", "--platform", "x86_64")
    assert r.returncode == 2
    assert "cpu cu12 cu13" in r.stderr


def test_list_table(entries):
    r = run("--list")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(entries) + 1
    assert lines[1].split()[:5] == ["cpu", "x86_64", "2.10.0", "-", "cpu"]
    assert lines[2].split()[:5] == ["cpu", "aarch64", "2.10.0", "-", "cpu"]
    assert lines[5].split()[:5] == ["cu13", "aarch64", "2.11.0", "13.0.3.0", "cu130"]


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
    got = wm.torch_mismatches(by_variant(entries)[variant], version, cuda, requires, want, label, "x86_64")
    assert len(got) == len(problems), got
    for text, problem in zip(got, problems, strict=True):
        assert problem in text


def test_check_torch_needs_variant():
    r = run("--list", "--check-torch")
    assert r.returncode == 2


def test_every_tested_torch_minor_has_an_accelerator(data):
    versions = wm.accelerator_torches(data)
    assert versions == sorted(set(versions), key=wm.torch_key)
    tested = {".".join(v.split(".")[:2]) for spec in data["variants"].values()
              for platform in spec["platforms"].values() for v in platform["test_torch"]}
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


def test_torch_mismatches_names_another_machine(entries):
    entry = by_variant(entries, "aarch64")["cu13"]
    assert wm.torch_mismatches(entry, "2.15.0", "13.2", [], machine="aarch64") == []
    got = wm.torch_mismatches(entry, "2.15.0", "13.2", [], machine="x86_64")
    assert got == ["this machine is x86_64, the wheel is for aarch64"]


def test_pythons_start_at_the_wheels_oldest(data):
    assert wm.pythons(data) == ["3.10", "3.11", "3.12", "3.13", "3.14"]
    assert run("--pythons").stdout.split() == wm.pythons(data)


@pytest.mark.parametrize("change, match", [
    (lambda d: d["pythons"].pop(0), r"the first python_min 3\.10"),
    (lambda d: d["pythons"].reverse(), r"ascending"),
    (lambda d: d["pythons"].append("3.14t"), r"must be 3\.N"),
    (lambda d: d.update(python_build="cp311"), r"python_build cp311 is not python_min 3\.10"),
])
def test_pythons_are_checked(data, change, match):
    bad = copy.deepcopy(data)
    change(bad)
    with pytest.raises(wm.MatrixError, match=match):
        wm.pythons(bad)
