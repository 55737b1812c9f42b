"""tools/make_index.py on fake wheels: tree layout, hashes, PEP 658 files, and pip
resolving through the result (file:// only, no network, no torch)."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "make_index.py"
_spec = importlib.util.spec_from_file_location("make_index", SCRIPT)
mi = importlib.util.module_from_spec(_spec)
sys.modules["make_index"] = mi  # dataclasses look their module up by name
_spec.loader.exec_module(mi)

TAG = "cp310-abi3-manylinux_2_28_x86_64"


def fake_wheel(d: Path, version: str, torch_pin: str, name: str = "fusedops") -> Path:
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{name}-{version}-{TAG}.whl"
    info = f"{name}-{version}.dist-info"
    meta = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        f"Requires-Python: >=3.10\nRequires-Dist: {torch_pin}\n\n"
    )
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{name}/__init__.py", f"__version__ = {version!r}\n")
        zf.writestr(f"{info}/METADATA", meta)
        zf.writestr(f"{info}/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {TAG}\n")
        zf.writestr(f"{info}/RECORD", "")
    return path


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    wheels = tmp_path / "dist"
    fake_wheel(wheels / "a", "0.1.0+pt213cpu", "torch==2.13.*")
    fake_wheel(wheels / "b", "0.1.0+pt214cu130", "torch==2.14.*")
    fake_wheel(wheels / "b", "0.2.0+pt214cu130", "torch==2.14.*")
    fake_wheel(wheels, "0.1.0", "numpy", name="other")  # ignored: another project
    out = tmp_path / "site"
    assert mi.main([str(wheels), str(out), "--base-url", "https://example.test/whl/"]) == 0
    return wheels, out


def links(page: Path) -> list[str]:
    return re.findall(r'href="([^"]+)"', page.read_text())


def test_layout(tree):
    _, out = tree
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    w = "fusedops-{}-" + TAG + ".whl"
    expected = [
        ".nojekyll",
        "index.html",
        "pt213cpu/simple/fusedops/index.html",
        "pt213cpu/simple/index.html",
        "pt214cu130/simple/fusedops/index.html",
        "pt214cu130/simple/index.html",
        "torch-2.13+cpu.html",
        "torch-2.14+cu130.html",
    ]
    for v in ("0.1.0+pt213cpu", "0.1.0+pt214cu130", "0.2.0+pt214cu130"):
        expected += ["wheels/" + w.format(v), "wheels/" + w.format(v) + ".metadata"]
    assert files == sorted(expected)


def test_simple_pages_hashes_and_metadata(tree):
    wheels, out = tree
    page = out / "pt214cu130" / "simple" / "fusedops" / "index.html"
    text = page.read_text()
    hrefs = links(page)
    assert len(hrefs) == 2
    for href in hrefs:
        rel, _, frag = href.partition("#sha256=")
        assert "+" not in rel  # '+' is percent-encoded in URLs
        target = (page.parent / rel.replace("%2B", "+")).resolve()
        assert target.parent == (out / "wheels").resolve()
        assert frag == sha(target)
        src = next(wheels.rglob(target.name))
        assert frag == sha(src)  # stored copy is byte-identical
        meta = target.with_name(target.name + ".metadata")
        with zipfile.ZipFile(target) as zf:
            inner = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            assert meta.read_bytes() == zf.read(inner)
        m = sha(meta)
        assert f'data-dist-info-metadata="sha256={m}"' in text
        assert f'data-core-metadata="sha256={m}"' in text
    assert 'data-requires-python="&gt;=3.10"' in text
    # The per-variant index lists only its own variant.
    assert "pt213cpu" not in text
    root = (out / "pt214cu130" / "simple" / "index.html").read_text()
    assert '<a href="fusedops/">fusedops</a>' in root


def test_find_links_page(tree):
    _, out = tree
    page = out / "torch-2.13+cpu.html"
    hrefs = links(page)
    assert len(hrefs) == 1
    rel, _, frag = hrefs[0].partition("#sha256=")
    assert rel == "wheels/fusedops-0.1.0%2Bpt213cpu-" + TAG + ".whl"
    assert frag == sha(out / "wheels" / rel.replace("%2B", "+").split("/")[1])


def test_root_index_commands(tree):
    _, out = tree
    text = (out / "index.html").read_text()
    assert (
        "pip install fusedops --index-url https://example.test/whl/pt214cu130/simple"
        " --extra-index-url https://download.pytorch.org/whl/cu130"
    ) in text
    assert (
        "pip install &quot;fusedops==0.1.0+pt213cpu&quot;"
        " -f https://example.test/whl/torch-2.13+cpu.html"
        " --extra-index-url https://download.pytorch.org/whl/cpu"
    ) in text
    # The newest release of a variant is the one pinned.
    assert "fusedops==0.2.0+pt214cu130&quot; -f https://example.test/whl/torch-2.14+cu130.html" in text
    assert "0.1.0, 0.2.0" in text


def test_deterministic(tree, tmp_path):
    wheels, out = tree
    out2 = tmp_path / "site2"
    assert mi.main([str(wheels), str(out2), "--base-url", "https://example.test/whl"]) == 0
    for p in out.rglob("*"):
        if p.is_file():
            assert p.read_bytes() == (out2 / p.relative_to(out)).read_bytes(), p


def test_html_escaping(tmp_path):
    w = tmp_path / "w"
    fake_wheel(w, "0.1.0+pt213cpu", "torch==2.13.*")
    out = tmp_path / "o"
    assert mi.main([str(w), str(out), "--base-url", "https://x.test/<b>&"]) == 0
    text = (out / "index.html").read_text()
    assert "<b>&" not in text
    assert "https://x.test/&lt;b&gt;&amp;/pt213cpu/simple" in text


@pytest.mark.parametrize(
    ("version", "pin", "why"),
    [
        ("0.1.0", "torch==2.13.*", "local version label"),
        ("0.1.0+pt213cpu", "torch>=2.13", "Requires-Dist torch"),
        ("0.1.0+pt213cpu", "torch==2.14.*", "does not match"),
        ("0.1.0+cpu", "torch==2.13.*", "local version label"),
    ],
)
def test_rejects_bad_wheels(tmp_path, capsys, version, pin, why):
    fake_wheel(tmp_path / "w", version, pin)
    assert mi.main([str(tmp_path / "w"), str(tmp_path / "o")]) == 1
    assert why in capsys.readouterr().err


def test_renamed_release_asset_gets_its_name_back(tmp_path):
    # A wheel downloaded from a GitHub release, where '+' became '.'.
    w = fake_wheel(tmp_path / "w", "0.1.0+pt213cpu", "torch==2.13.*")
    w.rename(w.with_name(w.name.replace("+", ".")))
    out = tmp_path / "o"
    assert mi.main([str(tmp_path / "w"), str(out)]) == 0
    assert (out / "wheels" / f"fusedops-0.1.0+pt213cpu-{TAG}.whl").is_file()
    assert "fusedops-0.1.0%2Bpt213cpu" in (out / "torch-2.13+cpu.html").read_text()


def test_rejects_conflicting_duplicates_and_nonempty_out(tmp_path, capsys):
    a = fake_wheel(tmp_path / "w" / "a", "0.1.0+pt213cpu", "torch==2.13.*")
    b = fake_wheel(tmp_path / "w" / "b", "0.1.0+pt213cpu", "torch==2.13.*")
    with zipfile.ZipFile(b, "a") as zf:
        zf.writestr("fusedops/extra.py", "")
    assert mi.main([str(tmp_path / "w"), str(tmp_path / "o")]) == 1
    assert "two different files" in capsys.readouterr().err
    shutil.copyfile(a, b)  # identical copies (e.g. two artifact downloads) are fine
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "stale").write_text("")
    assert mi.main([str(tmp_path / "w"), str(tmp_path / "o")]) == 1
    assert "not empty" in capsys.readouterr().err


# -- pip resolves through the tree -------------------------------------------


def pip_download(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    # Ignore the machine's pip.conf (extra indexes, find-links): only our tree counts.
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    dest = tmp_path / "dl"
    shutil.rmtree(dest, ignore_errors=True)
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir",
        "--platform", "manylinux_2_28_x86_64", "--python-version", "3.10",
        "-d", str(dest), *args,
    ]  # fmt: skip
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)


def downloaded(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "dl").iterdir())


def test_pip_index_url_resolves(tree, tmp_path):
    _, out = tree
    r = pip_download(tmp_path, "--index-url", (out / "pt214cu130" / "simple").as_uri(), "fusedops")
    assert r.returncode == 0, r.stdout + r.stderr
    assert downloaded(tmp_path) == [f"fusedops-0.2.0+pt214cu130-{TAG}.whl"]
    r = pip_download(tmp_path, "--index-url", (out / "pt213cpu" / "simple").as_uri(), "fusedops")
    assert r.returncode == 0, r.stdout + r.stderr
    assert downloaded(tmp_path) == [f"fusedops-0.1.0+pt213cpu-{TAG}.whl"]


def test_pip_find_links_resolves(tree, tmp_path):
    _, out = tree
    page = (out / "torch-2.14+cu130.html").as_uri()
    r = pip_download(tmp_path, "--no-index", "-f", page, "fusedops==0.1.0+pt214cu130")
    assert r.returncode == 0, r.stdout + r.stderr
    assert downloaded(tmp_path) == [f"fusedops-0.1.0+pt214cu130-{TAG}.whl"]


def test_pip_require_hashes(tree, tmp_path):
    _, out = tree
    whl = out / "wheels" / f"fusedops-0.1.0+pt213cpu-{TAG}.whl"
    req = tmp_path / "req.txt"
    req.write_text(f"fusedops==0.1.0+pt213cpu --hash=sha256:{sha(whl)}\n")
    index = (out / "pt213cpu" / "simple").as_uri()
    r = pip_download(tmp_path, "--require-hashes", "--index-url", index, "-r", str(req))
    assert r.returncode == 0, r.stdout + r.stderr
    req.write_text(f"fusedops==0.1.0+pt213cpu --hash=sha256:{'0' * 64}\n")
    r = pip_download(tmp_path, "--require-hashes", "--index-url", index, "-r", str(req))
    assert r.returncode != 0
    assert "HASHES" in r.stderr.upper()


def test_pip_rejects_tampered_wheel(tree, tmp_path):
    # The #sha256 fragment is what protects users of a plain static host.
    _, out = tree
    whl = out / "wheels" / f"fusedops-0.1.0+pt213cpu-{TAG}.whl"
    with zipfile.ZipFile(whl, "a") as zf:
        zf.writestr("fusedops/evil.py", "")
    r = pip_download(tmp_path, "--index-url", (out / "pt213cpu" / "simple").as_uri(), "fusedops")
    assert r.returncode != 0
    assert "sha256" in (r.stdout + r.stderr).lower()
