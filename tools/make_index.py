#!/usr/bin/env python3
"""Build the static wheel index, one tree per variant, from a directory of wheels.

    make_index.py WHEEL_DIR OUT_DIR [--base-url URL] [--github-repository OWNER/NAME]

Output (all links relative, so the tree works from any host or file://):

    OUT/index.html                           variants, what each serves, install commands
    OUT/<variant>/simple/index.html          PEP 503 root of the variant's index
    OUT/<variant>/simple/index.json          the same as PEP 691 JSON
    OUT/<variant>/simple/fusedops/index.html PEP 503 project page: #sha256= links,
                                             data-requires-python, PEP 658/714 metadata
    OUT/<variant>/simple/fusedops/index.json the same as PEP 691 JSON (api-version 1.1)
    OUT/<variant>/wheels/<wheel>             the variant's wheels
    OUT/<variant>/wheels/<wheel>.metadata    each one's METADATA (PEP 658)
    OUT/<variant>/wheels/<wheel>.provenance  its PEP 740 provenance, where the wheel has
                                             an attestation: data-provenance (HTML) and
                                             provenance (JSON) link it
    OUT/<variant>.html                       find-links page of the variant

The variants are cpu, cu12, cu13, ... : a wheel's local version label (X.Y.Z+cu13).
Wheels of 0.1 carried one label per torch (0.1.0+pt214cu130, torch==2.14.*); they
go into the index of their CUDA major (cu13) or cpu, so no published wheel is
dropped. A wheel's attestation is the file <wheel>.publish.attestation beside it
(what `pypi-attestations sign` writes): it must attest exactly that wheel (its
name and sha256), and is served inside a provenance object naming the
publisher, wheels.yml of --github-repository. A static host serves index.html for a directory; index.json is there
for hosts that pick by the Accept header (application/vnd.pypi.simple.v1+json).
Output depends only on the wheels (and tools/wheel_matrix.json for the torch
index named in the install commands): no timestamps, sorted everywhere.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import json
import re
import shutil
import sys
import zipfile
from dataclasses import dataclass
from email.parser import BytesParser
from pathlib import Path
from urllib.parse import quote

PROJECT = "fusedops"
MATRIX = Path(__file__).with_name("wheel_matrix.json")
WORKFLOW = "wheels.yml"  # the workflow that signs the attestations
ATTESTATION_SUFFIX = ".publish.attestation"

_LABEL_RE = re.compile(r"^(cpu|cu(\d+))$")
_LEGACY_LABEL_RE = re.compile(r"^pt(\d+)(cpu|cu(\d+)\d)$")  # 0.1: pt214cu130 -> cu13
_TORCH_REQ_RE = re.compile(r"^torch\s*(?:\(|[<>=!~ ]|$)")
_TORCH_PIN_RE = re.compile(r"^torch\s*==\s*(\d+)\.(\d+)\.\*\s*$")


class BadWheelError(Exception):
    """A wheel that cannot go into the index."""


@dataclass(frozen=True)
class Wheel:
    path: Path
    filename: str
    version: str
    variant: str  # cpu / cu12 / cu13
    requires_python: str
    size: int
    sha256: str
    metadata: bytes
    attestation: dict | None  # PEP 740 attestation object

    @property
    def metadata_sha256(self) -> str:
        return hashlib.sha256(self.metadata).hexdigest()


def normalize(name: str) -> str:
    """PEP 503 name normalization."""
    return re.sub(r"[-_.]+", "-", name).lower()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def variant_of(filename: str, label: str, torch_reqs: list[str]) -> str:
    """The index a wheel goes into, from its local version label."""
    if len(torch_reqs) != 1:
        raise BadWheelError(f"{filename}: needs exactly one Requires-Dist on torch, has {torch_reqs}")
    m = _LABEL_RE.match(label)
    if m:
        return label
    legacy = _LEGACY_LABEL_RE.match(label)
    if not legacy:
        raise BadWheelError(f"{filename}: local version label {label!r} is not cpu or cu<major>")
    pin = _TORCH_PIN_RE.match(torch_reqs[0])
    if not pin or legacy[1] != pin[1] + pin[2]:
        raise BadWheelError(f"{filename}: label {label} does not match {torch_reqs[0]!r}")
    return "cpu" if legacy[2] == "cpu" else f"cu{legacy[3]}"


def read_attestation(path: Path, filename: str, sha256: str) -> dict | None:
    """The attestation beside the wheel, if any, checked to be about this wheel."""
    att_path = path.with_name(path.name + ATTESTATION_SUFFIX)
    if not att_path.exists():
        return None
    try:
        att = json.loads(att_path.read_text(encoding="utf-8"))
        statement = json.loads(base64.b64decode(att["envelope"]["statement"], validate=True))
        subjects = [(s["name"], s["digest"]["sha256"]) for s in statement["subject"]]
    except (ValueError, KeyError, TypeError) as e:
        raise BadWheelError(f"{att_path.name}: not a PEP 740 attestation ({e})") from None
    if att.get("version") != 1 or subjects != [(filename, sha256)]:
        raise BadWheelError(f"{att_path.name}: attests {subjects}, not {filename} with sha256 {sha256}")
    return att


def read_wheel(path: Path) -> Wheel:
    filename = path.name
    parts = filename[: -len(".whl")].split("-")
    if len(parts) not in (5, 6):
        raise BadWheelError(f"{filename}: not a wheel file name")
    with zipfile.ZipFile(path) as zf:
        found = [n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
        if len(found) != 1:
            raise BadWheelError(f"{filename}: expected one *.dist-info/METADATA")
        metadata = zf.read(found[0])
    msg = BytesParser().parsebytes(metadata, headersonly=True)
    name, version = msg.get("Name", ""), msg.get("Version", "")
    # GitHub release assets get '+' renamed to '.': accept that spelling, and
    # store the wheel under its real name again.
    if normalize(name) != normalize(parts[0]) or parts[1] not in (version, version.replace("+", ".")):
        raise BadWheelError(f"{filename}: METADATA says {name} {version}")
    filename = "-".join([parts[0], version, *parts[2:]]) + ".whl"
    label = version.partition("+")[2]
    torch_reqs = [r.strip() for r in msg.get_all("Requires-Dist", []) if _TORCH_REQ_RE.match(r.strip())]
    sha256 = sha256_file(path)
    return Wheel(
        path=path,
        filename=filename,
        version=version,
        variant=variant_of(filename, label, torch_reqs),
        requires_python=msg.get("Requires-Python", "") or "",
        size=path.stat().st_size,
        sha256=sha256,
        metadata=metadata,
        attestation=read_attestation(path, filename, sha256),
    )


def _page(title: str, body: list[str]) -> str:
    t = html.escape(title)
    return "\n".join(
        [
            "<!DOCTYPE html>",
            "<html>",
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="pypi:repository-version" content="1.1">',
            f"<title>{t}</title>",
            "</head>",
            "<body>",
            f"<h1>{t}</h1>",
            *body,
            "</body>",
            "</html>",
            "",
        ]
    )


def _json(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def _wheel_anchor(w: Wheel, prefix: str, pep658: bool) -> str:
    href = html.escape(f"{prefix}{quote(w.filename)}#sha256={w.sha256}")
    attrs = [f'href="{href}"']
    if w.requires_python:
        attrs.append(f'data-requires-python="{html.escape(w.requires_python)}"')
    if pep658:
        # PEP 714 renamed the attribute; older pips only know the PEP 658 name.
        attrs.append(f'data-dist-info-metadata="sha256={w.metadata_sha256}"')
        attrs.append(f'data-core-metadata="sha256={w.metadata_sha256}"')
        if w.attestation:
            attrs.append(f'data-provenance="{html.escape(prefix + quote(w.filename) + ".provenance")}"')
    return f"<a {' '.join(attrs)}>{html.escape(w.filename)}</a><br>"


def _wheel_json(w: Wheel, prefix: str) -> dict:
    entry = {
        "filename": w.filename,
        "url": prefix + quote(w.filename),
        "hashes": {"sha256": w.sha256},
        "size": w.size,
        "core-metadata": {"sha256": w.metadata_sha256},
        "dist-info-metadata": {"sha256": w.metadata_sha256},
    }
    if w.requires_python:
        entry["requires-python"] = w.requires_python
    entry["provenance"] = prefix + quote(w.filename) + ".provenance" if w.attestation else None
    return entry


def _version_key(version: str) -> tuple[int, ...]:
    base = version.partition("+")[0]
    return tuple(int(x) if x.isdigit() else -1 for x in base.split("."))


def matrix_variants() -> dict[str, dict]:
    try:
        return json.loads(MATRIX.read_text(encoding="utf-8"))["variants"]
    except (OSError, KeyError, ValueError):
        return {}


def install_commands(base_url: str, variant: str, newest: str, torch_index: str | None) -> list[str]:
    cmds = []
    if torch_index:
        cmds.append(f"pip install torch --index-url {torch_index}   # if torch is not installed yet")
    # fusedops' index alone: never --extra-index-url next to PyPI (dependency confusion).
    cmds.append(f"pip install {PROJECT} --index-url {base_url}/{variant}/simple")
    # -f still searches the other indexes for the name: the exact pin keeps other projects out.
    cmds.append(f'pip install "{PROJECT}=={newest}" -f {base_url}/{variant}.html')
    return cmds


def _collect(wheel_dir: Path) -> dict[str, Wheel]:
    """The project's wheels under wheel_dir by file name; one name with two contents is an error."""
    wheels: dict[str, Wheel] = {}
    for path in sorted(wheel_dir.rglob("*.whl")):
        if normalize(path.name.split("-")[0]) != PROJECT:
            print(f"make_index: skipping {path} (not {PROJECT})", file=sys.stderr)
            continue
        w = read_wheel(path)
        old = wheels.get(w.filename)
        if old and old.sha256 != w.sha256:
            raise BadWheelError(f"{w.filename}: two different files with this name")
        wheels[w.filename] = w
    if not wheels:
        raise BadWheelError(f"no {PROJECT} wheels under {wheel_dir}")
    return wheels


def provenance(w: Wheel, repository: str) -> str:
    """PEP 740 provenance of a wheel: its attestation, published by wheels.yml of repository."""
    publisher = {"kind": "GitHub", "repository": repository, "workflow": WORKFLOW}
    return _json({"version": 1, "attestation_bundles": [{"publisher": publisher, "attestations": [w.attestation]}]})


def _write_variant(out: Path, variant: str, ws: list[Wheel], repository: str | None) -> list[str]:
    """One variant's wheels (+ PEP 658 metadata, PEP 740 provenance), its simple
    index (HTML and JSON) and its find-links page; returns its versions, oldest first."""
    store = out / variant / "wheels"
    store.mkdir(parents=True)
    for w in ws:
        shutil.copyfile(w.path, store / w.filename)
        (store / f"{w.filename}.metadata").write_bytes(w.metadata)
        if w.attestation:
            (store / f"{w.filename}.provenance").write_text(provenance(w, repository), encoding="utf-8")
    simple = out / variant / "simple"
    (simple / PROJECT).mkdir(parents=True)
    (simple / "index.html").write_text(_page("Simple index", [f'<a href="{PROJECT}/">{PROJECT}</a><br>']),
                                       encoding="utf-8")
    (simple / "index.json").write_text(_json({"meta": {"api-version": "1.1"}, "projects": [{"name": PROJECT}]}),
                                       encoding="utf-8")
    (simple / PROJECT / "index.html").write_text(
        _page(f"Links for {PROJECT}", [_wheel_anchor(w, "../../wheels/", True) for w in ws]), encoding="utf-8")
    versions = sorted({w.version for w in ws}, key=_version_key)
    files = [_wheel_json(w, "../../wheels/") for w in ws]
    (simple / PROJECT / "index.json").write_text(
        _json({"meta": {"api-version": "1.1"}, "name": PROJECT, "versions": versions, "files": files}),
        encoding="utf-8")
    (out / f"{variant}.html").write_text(
        _page(f"{PROJECT} wheels: {variant}", [_wheel_anchor(w, f"{variant}/wheels/", False) for w in ws]),
        encoding="utf-8")
    return versions


def _landing_row(base_url: str, variant: str, versions: list[str], spec: dict) -> str:
    """The landing page's row of one variant: what it serves, its versions, links, install commands."""
    cmds = install_commands(base_url, variant, versions[-1], spec.get("torch_index_url"))
    return ("<tr>"
            f"<td>{html.escape(variant)}</td>"
            f"<td>{html.escape(spec.get('serves', ''))}</td>"
            f"<td>{html.escape(', '.join(versions))}</td>"
            f'<td><a href="{html.escape(variant)}/simple/">simple</a> '
            f'<a href="{html.escape(variant)}.html">find-links</a></td>'
            f"<td>{''.join(f'<pre>{html.escape(c)}</pre>' for c in cmds)}</td>"
            "</tr>")


def build(wheel_dir: Path, out: Path, base_url: str, repository: str | None = None) -> list[Wheel]:
    base_url = base_url.rstrip("/")
    wheels = _collect(wheel_dir)
    attested = [w.filename for w in wheels.values() if w.attestation]
    if attested and not repository:
        raise BadWheelError(f"{attested[0]} has an attestation: name its publisher with --github-repository")
    if out.exists() and any(out.iterdir()):
        raise BadWheelError(f"{out} is not empty")
    out.mkdir(parents=True, exist_ok=True)
    # No .nojekyll: Pages deployed from Actions serves the files as uploaded (no
    # Jekyll), and actions/upload-pages-artifact leaves dotfiles out anyway.

    by_variant: dict[str, list[Wheel]] = {}
    for w in sorted(wheels.values(), key=lambda w: (w.variant, _version_key(w.version), w.filename)):
        by_variant.setdefault(w.variant, []).append(w)
    matrix = matrix_variants()
    rows = [_landing_row(base_url, variant, _write_variant(out, variant, ws, repository), matrix.get(variant, {}))
            for variant, ws in sorted(by_variant.items())]
    body = [
        "<p>One index per variant: pick the one of your torch "
        "(<code>python -m fusedops info</code> names it; cpu serves every torch).</p>",
        "<table>",
        "<tr><th>variant</th><th>serves</th><th>versions</th><th>index</th><th>install</th></tr>",
        *rows,
        "</table>",
    ]
    (out / "index.html").write_text(_page(f"{PROJECT} wheels", body), encoding="utf-8")
    return list(wheels.values())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Build the static fusedops wheel index.")
    p.add_argument("wheel_dir", type=Path, help="searched recursively for *.whl")
    p.add_argument("out_dir", type=Path, help="must be missing or empty")
    p.add_argument("--base-url", default=None, help="public URL of OUT_DIR (default: index_base_url of the matrix)")
    p.add_argument("--github-repository", default=None, help="OWNER/NAME whose wheels.yml signed the attestations")
    args = p.parse_args(argv)
    base_url = args.base_url
    if base_url is None:
        base_url = json.loads(MATRIX.read_text(encoding="utf-8"))["index_base_url"]
    try:
        wheels = build(args.wheel_dir, args.out_dir, base_url, args.github_repository)
    except (BadWheelError, OSError, zipfile.BadZipFile) as e:
        print(f"make_index: error: {e}", file=sys.stderr)
        return 1
    variants = sorted({w.variant for w in wheels})
    attested = sum(1 for w in wheels if w.attestation)
    print(f"make_index: {len(wheels)} wheel(s) ({attested} with provenance), variants: {' '.join(variants)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
