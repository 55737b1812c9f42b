#!/usr/bin/env python3
"""Build the static wheel index (GitHub Pages) from a directory of wheels.

    make_index.py WHEEL_DIR OUT_DIR [--base-url URL]

Output (all links relative, so the tree works from any host or file://):

    OUT/index.html                          variants and their install commands
    OUT/wheels/<wheel>                      every wheel, stored once
    OUT/wheels/<wheel>.metadata             its METADATA (PEP 658 / PEP 714)
    OUT/<variant>/simple/index.html         PEP 503 root, one per variant
    OUT/<variant>/simple/fusedops/index.html
    OUT/torch-<X.Y>+<cpu|cuNNN>.html        PyG-style find-links page per variant

The variant is the wheel's local version label (0.1.0+pt214cu130 -> pt214cu130);
the torch minor comes from the wheel's `Requires-Dist: torch==X.Y.*`.
Output depends only on the wheels: no timestamps, sorted everywhere.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import re
import shutil
import sys
import zipfile
from dataclasses import dataclass
from email.parser import BytesParser
from pathlib import Path
from urllib.parse import quote

PROJECT = "fusedops"
DEFAULT_BASE_URL = "https://fusedops.github.io/whl"
TORCH_INDEX = "https://download.pytorch.org/whl"

_LABEL_RE = re.compile(r"^pt(\d+)(cpu|cu\d+)$")
_TORCH_PIN_RE = re.compile(r"^torch\s*==\s*(\d+)\.(\d+)\.\*\s*$")


class BadWheelError(Exception):
    """A wheel that cannot go into the index."""


@dataclass(frozen=True)
class Wheel:
    path: Path
    filename: str
    version: str
    variant: str  # pt214cu130
    device: str  # cu130 / cpu
    torch_minor: str  # 2.14
    requires_python: str
    sha256: str
    metadata: bytes

    @property
    def metadata_sha256(self) -> str:
        return hashlib.sha256(self.metadata).hexdigest()

    @property
    def find_links_page(self) -> str:
        return f"torch-{self.torch_minor}+{self.device}.html"


def normalize(name: str) -> str:
    """PEP 503 name normalization."""
    return re.sub(r"[-_.]+", "-", name).lower()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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
    _, _, label = version.partition("+")
    m = _LABEL_RE.match(label)
    if not m:
        raise BadWheelError(f"{filename}: local version label {label!r} is not pt<NN>cpu|cu<NNN>")
    pins = [_TORCH_PIN_RE.match(r) for r in msg.get_all("Requires-Dist", [])]
    pins = [p for p in pins if p]
    if len(pins) != 1:
        raise BadWheelError(f"{filename}: needs exactly one Requires-Dist torch==X.Y.*")
    major, minor = pins[0].groups()
    if m[1] != major + minor:
        raise BadWheelError(f"{filename}: label {label} does not match torch=={major}.{minor}.*")
    return Wheel(
        path=path,
        filename=filename,
        version=version,
        variant=label,
        device=m[2],
        torch_minor=f"{major}.{minor}",
        requires_python=msg.get("Requires-Python", "") or "",
        sha256=sha256_file(path),
        metadata=metadata,
    )


def _page(title: str, body: list[str]) -> str:
    t = html.escape(title)
    return "\n".join(
        [
            "<!DOCTYPE html>",
            "<html>",
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="pypi:repository-version" content="1.0">',
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


def _wheel_anchor(w: Wheel, prefix: str, pep658: bool) -> str:
    href = html.escape(f"{prefix}{quote(w.filename)}#sha256={w.sha256}")
    attrs = [f'href="{href}"']
    if w.requires_python:
        attrs.append(f'data-requires-python="{html.escape(w.requires_python)}"')
    if pep658:
        # PEP 714 renamed the attribute; older pips only know the PEP 658 name.
        attrs.append(f'data-dist-info-metadata="sha256={w.metadata_sha256}"')
        attrs.append(f'data-core-metadata="sha256={w.metadata_sha256}"')
    return f"<a {' '.join(attrs)}>{html.escape(w.filename)}</a><br>"


def _version_key(version: str) -> tuple[int, ...]:
    base = version.partition("+")[0]
    return tuple(int(x) if x.isdigit() else -1 for x in base.split("."))


def install_commands(base_url: str, variant: str, device: str, page: str, newest: str) -> list[str]:
    # torch itself comes from PyTorch's index for the same device: its
    # +cu130/+cpu local label sorts above PyPI's plain release of that version.
    torch_index = f"{TORCH_INDEX}/{device}"
    return [
        (
            f"pip install {PROJECT} --index-url {base_url}/{variant}/simple"
            f" --extra-index-url {torch_index}"
        ),
        # -f still searches PyPI for the name: the exact pin keeps other projects out.
        f'pip install "{PROJECT}=={newest}" -f {base_url}/{page} --extra-index-url {torch_index}',
    ]


def build(wheel_dir: Path, out: Path, base_url: str) -> list[Wheel]:
    base_url = base_url.rstrip("/")
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

    if out.exists() and any(out.iterdir()):
        raise BadWheelError(f"{out} is not empty")
    (out / "wheels").mkdir(parents=True, exist_ok=True)
    (out / ".nojekyll").write_bytes(b"")  # GitHub Pages: serve files as they are

    by_variant: dict[str, list[Wheel]] = {}
    for w in sorted(wheels.values(), key=lambda w: (w.variant, w.filename)):
        shutil.copyfile(w.path, out / "wheels" / w.filename)
        (out / "wheels" / f"{w.filename}.metadata").write_bytes(w.metadata)
        by_variant.setdefault(w.variant, []).append(w)

    rows = []
    for variant, ws in sorted(by_variant.items()):
        first = ws[0]
        if {(w.torch_minor, w.device) for w in ws} != {(first.torch_minor, first.device)}:
            raise BadWheelError(f"{variant}: wheels disagree on torch/device")
        simple = out / variant / "simple"
        (simple / PROJECT).mkdir(parents=True)
        (simple / "index.html").write_text(
            _page("Simple index", [f'<a href="{PROJECT}/">{PROJECT}</a><br>']), encoding="utf-8"
        )
        (simple / PROJECT / "index.html").write_text(
            _page(f"Links for {PROJECT}", [_wheel_anchor(w, "../../../wheels/", True) for w in ws]),
            encoding="utf-8",
        )
        page = first.find_links_page
        (out / page).write_text(
            _page(
                f"{PROJECT} wheels for torch {first.torch_minor} ({first.device})",
                [_wheel_anchor(w, "wheels/", False) for w in ws],
            ),
            encoding="utf-8",
        )
        newest = max((w.version for w in ws), key=_version_key)
        cmds = install_commands(base_url, variant, first.device, page, newest)
        versions = ", ".join(sorted({w.version.partition("+")[0] for w in ws}))
        rows.append(
            "<tr>"
            f"<td>{html.escape(variant)}</td>"
            f"<td>torch {html.escape(first.torch_minor)}</td>"
            f"<td>{html.escape(first.device)}</td>"
            f"<td>{html.escape(versions)}</td>"
            f'<td><a href="{html.escape(variant)}/simple/">simple</a> '
            f'<a href="{html.escape(quote(page))}">find-links</a></td>'
            f"<td><pre>{html.escape(cmds[0])}</pre><pre>{html.escape(cmds[1])}</pre></td>"
            "</tr>"
        )
    body = [
        "<p>Pick the variant matching your torch (<code>python -m fusedops info</code>).</p>",
        "<table>",
        (
            "<tr><th>variant</th><th>torch</th><th>device</th><th>versions</th>"
            "<th>index</th><th>install</th></tr>"
        ),
        *rows,
        "</table>",
    ]
    (out / "index.html").write_text(_page(f"{PROJECT} wheels", body), encoding="utf-8")
    return list(wheels.values())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Build the static fusedops wheel index.")
    p.add_argument("wheel_dir", type=Path, help="searched recursively for *.whl")
    p.add_argument("out_dir", type=Path, help="must be missing or empty")
    p.add_argument("--base-url", default=DEFAULT_BASE_URL, help="public URL of OUT_DIR")
    args = p.parse_args(argv)
    try:
        wheels = build(args.wheel_dir, args.out_dir, args.base_url)
    except (BadWheelError, OSError, zipfile.BadZipFile) as e:
        print(f"make_index: error: {e}", file=sys.stderr)
        return 1
    variants = sorted({w.variant for w in wheels})
    print(f"make_index: {len(wheels)} wheel(s), variants: {' '.join(variants)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
