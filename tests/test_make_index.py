"""tools/make_index.py on fake wheels: per-variant trees, hashes, PEP 658 files, PEP 691
JSON, and pip resolving through the result (file:// only, no network, no torch)."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
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
    fake_wheel(wheels / "a", "0.2.0+cpu", "torch>=2.10")
    fake_wheel(wheels / "b", "0.2.0+cu13", "torch>=2.10")
    fake_wheel(wheels / "b", "0.3.0+cu13", "torch>=2.10")
    fake_wheel(wheels / "c", "0.2.0+cu12", "torch>=2.10")
    fake_wheel(wheels / "old", "0.1.0+pt214cu130", "torch==2.14.*")  # a 0.1 wheel: kept, in cu13
    fake_wheel(wheels, "0.1.0", "numpy", name="other")  # ignored: another project
    out = tmp_path / "site"
    assert mi.main([str(wheels), str(out), "--base-url", "https://example.test/whl/"]) == 0
    return wheels, out


def links(page: Path) -> list[str]:
    return re.findall(r'href="([^"]+)"', page.read_text())


def whl(version: str) -> str:
    return f"fusedops-{version}-{TAG}.whl"


def test_layout(tree):
    _, out = tree
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    expected = ["index.html", "cpu.html", "cu12.html", "cu13.html"]
    for variant in ("cpu", "cu12", "cu13"):
        expected += [f"{variant}/simple/{f}" for f in
                     ("index.html", "index.json", "fusedops/index.html", "fusedops/index.json")]
    for variant, version in [("cpu", "0.2.0+cpu"), ("cu12", "0.2.0+cu12"), ("cu13", "0.2.0+cu13"),
                             ("cu13", "0.3.0+cu13"), ("cu13", "0.1.0+pt214cu130")]:
        expected += [f"{variant}/wheels/{whl(version)}", f"{variant}/wheels/{whl(version)}.metadata"]
    assert files == sorted(expected)


def test_simple_pages_hashes_and_metadata(tree):
    wheels, out = tree
    page = out / "cu13" / "simple" / "fusedops" / "index.html"
    text = page.read_text()
    hrefs = links(page)
    assert len(hrefs) == 3
    for href in hrefs:
        rel, _, frag = href.partition("#sha256=")
        assert "+" not in rel  # '+' is percent-encoded in URLs
        target = (page.parent / rel.replace("%2B", "+")).resolve()
        assert target.parent == (out / "cu13" / "wheels").resolve()
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
    assert "+cpu" not in text and "+cu12" not in text
    root = (out / "cu13" / "simple" / "index.html").read_text()
    assert '<a href="fusedops/">fusedops</a>' in root


def test_pep691_json_matches_html(tree):
    _, out = tree
    for variant in ("cpu", "cu12", "cu13"):
        simple = out / variant / "simple"
        root = json.loads((simple / "index.json").read_text())
        assert root == {"meta": {"api-version": "1.1"}, "projects": [{"name": "fusedops"}]}
        page = json.loads((simple / "fusedops" / "index.json").read_text())
        assert page["meta"]["api-version"] == "1.1" and page["name"] == "fusedops"
        html_links = links(simple / "fusedops" / "index.html")
        assert [f["url"] + "#sha256=" + f["hashes"]["sha256"] for f in page["files"]] == html_links
        for f in page["files"]:
            target = simple / "fusedops" / f["url"].replace("%2B", "+")
            assert target.is_file() and f["size"] == target.stat().st_size
            assert f["hashes"]["sha256"] == sha(target)
            meta = sha(target.with_name(target.name + ".metadata"))
            assert f["core-metadata"] == f["dist-info-metadata"] == {"sha256": meta}
            assert f["requires-python"] == ">=3.10"
            assert f["filename"] == target.name
        assert sorted(page["versions"]) == sorted({f["filename"].split("-")[1] for f in page["files"]})


def test_find_links_page(tree):
    _, out = tree
    page = out / "cpu.html"
    hrefs = links(page)
    assert len(hrefs) == 1
    rel, _, frag = hrefs[0].partition("#sha256=")
    assert rel == "cpu/wheels/fusedops-0.2.0%2Bcpu-" + TAG + ".whl"
    assert frag == sha(out / rel.replace("%2B", "+"))
    assert len(links(out / "cu13.html")) == 3


def test_root_index_commands(tree):
    _, out = tree
    text = (out / "index.html").read_text()
    assert "pip install fusedops --index-url https://example.test/whl/cu13/simple" in text
    assert "pip install torch --index-url https://download.pytorch.org/whl/cu130" in text
    assert "pip install fusedops --index-url https://example.test/whl/cpu/simple" in text
    # The newest release of a variant is the one pinned.
    assert "pip install &quot;fusedops==0.3.0+cu13&quot; -f https://example.test/whl/cu13.html" in text
    assert "0.1.0+pt214cu130, 0.2.0+cu13, 0.3.0+cu13" in text
    assert "--extra-index-url" not in text


def test_deterministic(tree, tmp_path):
    wheels, out = tree
    out2 = tmp_path / "site2"
    assert mi.main([str(wheels), str(out2), "--base-url", "https://example.test/whl"]) == 0
    for p in out.rglob("*"):
        if p.is_file():
            assert p.read_bytes() == (out2 / p.relative_to(out)).read_bytes(), p


def test_default_base_url_is_the_matrix_one(tmp_path):
    fake_wheel(tmp_path / "w", "0.2.0+cpu", "torch>=2.10")
    assert mi.main([str(tmp_path / "w"), str(tmp_path / "o")]) == 0
    base = json.loads(mi.MATRIX.read_text())["index_base_url"].rstrip("/")
    assert f"--index-url {base}/cpu/simple" in (tmp_path / "o" / "index.html").read_text()


def test_html_escaping(tmp_path):
    w = tmp_path / "w"
    fake_wheel(w, "0.2.0+cpu", "torch>=2.10")
    out = tmp_path / "o"
    assert mi.main([str(w), str(out), "--base-url", "https://x.test/<b>&"]) == 0
    text = (out / "index.html").read_text()
    assert "<b>&" not in text
    assert "https://x.test/&lt;b&gt;&amp;/cpu/simple" in text


@pytest.mark.parametrize(
    ("version", "pin", "why"),
    [
        ("0.2.0", "torch>=2.10", "local version label"),
        ("0.2.0+cuda13", "torch>=2.10", "local version label"),
        ("0.2.0+cu13", "numpy", "Requires-Dist on torch"),
        ("0.1.0+pt213cpu", "torch==2.14.*", "does not match"),
        ("0.1.0+pt213cpu", "torch>=2.13", "does not match"),
    ],
)
def test_rejects_bad_wheels(tmp_path, capsys, version, pin, why):
    fake_wheel(tmp_path / "w", version, pin)
    assert mi.main([str(tmp_path / "w"), str(tmp_path / "o")]) == 1
    assert why in capsys.readouterr().err


def test_renamed_release_asset_gets_its_name_back(tmp_path):
    # A wheel downloaded from a GitHub release, where '+' became '.'.
    w = fake_wheel(tmp_path / "w", "0.2.0+cu12", "torch>=2.10")
    w.rename(w.with_name(w.name.replace("+", ".")))
    out = tmp_path / "o"
    assert mi.main([str(tmp_path / "w"), str(out)]) == 0
    assert (out / "cu12" / "wheels" / whl("0.2.0+cu12")).is_file()
    assert "fusedops-0.2.0%2Bcu12" in (out / "cu12.html").read_text()


def test_rejects_conflicting_duplicates_and_nonempty_out(tmp_path, capsys):
    a = fake_wheel(tmp_path / "w" / "a", "0.2.0+cpu", "torch>=2.10")
    b = fake_wheel(tmp_path / "w" / "b", "0.2.0+cpu", "torch>=2.10")
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
    r = pip_download(tmp_path, "--index-url", (out / "cu13" / "simple").as_uri(), "fusedops")
    assert r.returncode == 0, r.stdout + r.stderr
    assert downloaded(tmp_path) == [whl("0.3.0+cu13")]
    r = pip_download(tmp_path, "--index-url", (out / "cpu" / "simple").as_uri(), "fusedops")
    assert r.returncode == 0, r.stdout + r.stderr
    assert downloaded(tmp_path) == [whl("0.2.0+cpu")]
    r = pip_download(tmp_path, "--index-url", (out / "cu12" / "simple").as_uri(), "fusedops")
    assert r.returncode == 0, r.stdout + r.stderr
    assert downloaded(tmp_path) == [whl("0.2.0+cu12")]


def test_pip_find_links_resolves(tree, tmp_path):
    _, out = tree
    page = (out / "cu13.html").as_uri()
    r = pip_download(tmp_path, "--no-index", "-f", page, "fusedops==0.2.0+cu13")
    assert r.returncode == 0, r.stdout + r.stderr
    assert downloaded(tmp_path) == [whl("0.2.0+cu13")]


def test_pip_require_hashes(tree, tmp_path):
    _, out = tree
    wheel = out / "cpu" / "wheels" / whl("0.2.0+cpu")
    req = tmp_path / "req.txt"
    req.write_text(f"fusedops==0.2.0+cpu --hash=sha256:{sha(wheel)}\n")
    index = (out / "cpu" / "simple").as_uri()
    r = pip_download(tmp_path, "--require-hashes", "--index-url", index, "-r", str(req))
    assert r.returncode == 0, r.stdout + r.stderr
    req.write_text(f"fusedops==0.2.0+cpu --hash=sha256:{'0' * 64}\n")
    r = pip_download(tmp_path, "--require-hashes", "--index-url", index, "-r", str(req))
    assert r.returncode != 0
    assert "HASHES" in r.stderr.upper()


def test_pip_rejects_tampered_wheel(tree, tmp_path):
    # The #sha256 fragment is what protects users of a plain static host.
    _, out = tree
    wheel = out / "cpu" / "wheels" / whl("0.2.0+cpu")
    with zipfile.ZipFile(wheel, "a") as zf:
        zf.writestr("fusedops/evil.py", "")
    r = pip_download(tmp_path, "--index-url", (out / "cpu" / "simple").as_uri(), "fusedops")
    assert r.returncode != 0
    assert "sha256" in (r.stdout + r.stderr).lower()


def fake_attestation(wheel: Path, name: str | None = None, digest: str | None = None) -> Path:
    """The shape `pypi-attestations sign` writes beside a wheel (unsigned here: make_index
    checks what it attests, signatures are checked by pypi-attestations verify)."""
    statement = {"_type": "https://in-toto.io/Statement/v1", "predicateType": "https://docs.pypi.org/attestations/publish/v1",
                 "subject": [{"name": name or wheel.name, "digest": {"sha256": digest or sha(wheel)}}]}
    att = {"version": 1, "verification_material": {"certificate": "", "transparency_entries": [{}]},
           "envelope": {"statement": base64.b64encode(json.dumps(statement).encode()).decode(), "signature": ""}}
    path = wheel.with_name(wheel.name + ".publish.attestation")
    path.write_text(json.dumps(att))
    return path


def test_provenance_served_in_html_and_json(tmp_path):
    wheels = tmp_path / "dist"
    signed = fake_wheel(wheels, "0.2.0+cpu", "torch>=2.10")
    fake_wheel(wheels / "old", "0.1.0+pt214cpu", "torch==2.14.*")  # released before attestations
    att = json.loads(fake_attestation(signed).read_text())
    out = tmp_path / "site"
    assert mi.main([str(wheels), str(out), "--base-url", "https://x.test", "--github-repository", "o/r"]) == 0
    prov = json.loads((out / "cpu" / "wheels" / f"{signed.name}.provenance").read_text())
    assert prov == {"version": 1, "attestation_bundles": [
        {"publisher": {"kind": "GitHub", "repository": "o/r", "workflow": "wheels.yml"}, "attestations": [att]}]}
    assert not (out / "cpu" / "wheels" / "fusedops-0.1.0+pt214cpu-cp310-abi3-manylinux_2_28_x86_64.whl.provenance").exists()
    page = (out / "cpu" / "simple" / "fusedops" / "index.html").read_text()
    quoted = signed.name.replace("+", "%2B")
    assert page.count("data-provenance=") == 1
    assert f'data-provenance="../../wheels/{quoted}.provenance"' in page
    files = {f["filename"]: f for f in json.loads((out / "cpu" / "simple" / "fusedops" / "index.json").read_text())["files"]}
    assert files[signed.name]["provenance"] == f"../../wheels/{quoted}.provenance"
    assert files["fusedops-0.1.0+pt214cpu-cp310-abi3-manylinux_2_28_x86_64.whl"]["provenance"] is None


@pytest.mark.parametrize("what", ["digest", "name", "garbage", "no-publisher"])
def test_rejects_an_attestation_of_another_wheel(tmp_path, capsys, what):
    wheels = tmp_path / "dist"
    w = fake_wheel(wheels, "0.2.0+cpu", "torch>=2.10")
    args = ["--github-repository", "o/r"]
    if what == "digest":
        fake_attestation(w, digest="0" * 64)
    elif what == "name":
        fake_attestation(w, name=w.name.replace("0.2.0", "0.2.1"))
    elif what == "garbage":
        w.with_name(w.name + ".publish.attestation").write_text("{}")
    else:
        fake_attestation(w)
        args = []
    assert mi.main([str(wheels), str(tmp_path / "site"), *args]) == 1
    assert "make_index: error:" in capsys.readouterr().err
