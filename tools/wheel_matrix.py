#!/usr/bin/env python3
"""Expand tools/wheel_matrix.json into one entry per wheel variant.

    wheel_matrix.py --github             {"include": [...]} for a GitHub Actions matrix
    wheel_matrix.py --list               human-readable table
    wheel_matrix.py --variant pt214cu130 shell lines (eval-able) for one variant
    wheel_matrix.py --variant pt214cu130 --format env   raw KEY=value (for $GITHUB_ENV)

Standard library only: CI runs it before any dependency is installed.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path

DEFAULT_MATRIX = Path(__file__).with_name("wheel_matrix.json")

_TORCH_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
_CUDA_RE = re.compile(r"^(\d+)\.(\d+)$")
_ARCH_RE = re.compile(r"^\d+\.\d+[a-z]?(\+PTX)?$")


class MatrixError(ValueError):
    """The matrix file is inconsistent."""


def variant_tag(torch_version: str, cuda: str) -> str:
    """'2.14.1', '13.0' -> 'pt214cu130'; '2.13.0', 'cpu' -> 'pt213cpu'."""
    m = _TORCH_RE.match(torch_version)
    if not m:
        raise MatrixError(f"torch version must be X.Y.Z, got {torch_version!r}")
    tag = f"pt{m[1]}{m[2]}"
    if cuda == "cpu":
        return tag + "cpu"
    c = _CUDA_RE.match(cuda)
    if not c:
        raise MatrixError(f"CUDA version must be X.Y or 'cpu', got {cuda!r}")
    return f"{tag}cu{c[1]}{c[2]}"


def torch_local_label(torch_version: str, cuda: str) -> str:
    """PyG-style find-links page name: torch-2.14+cu130.html."""
    major_minor = ".".join(torch_version.split(".")[:2])
    local = "cpu" if cuda == "cpu" else "cu" + cuda.replace(".", "")
    return f"torch-{major_minor}+{local}"


def check_archs(archs: str) -> None:
    items = re.split(r"[;\s]+", archs.strip())
    if not items or not all(_ARCH_RE.match(a) for a in items):
        raise MatrixError(f"bad arch list {archs!r}")
    # Only the newest arch carries PTX: it is the forward-compatibility fallback.
    if not items[-1].endswith("+PTX") or any(a.endswith("+PTX") for a in items[:-1]):
        raise MatrixError(f"arch list {archs!r}: exactly the last arch must be +PTX")
    nums = [float(a.split("+")[0].rstrip("abcdefghijklmnopqrstuvwxyz")) for a in items]
    if nums != sorted(set(nums)):
        raise MatrixError(f"arch list {archs!r} must be ascending without duplicates")


def load(path: Path = DEFAULT_MATRIX) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def expand(data: dict) -> list[dict[str, str]]:
    """One dict per variant, newest torch first, in file order otherwise."""
    cudas = data["cuda"]
    base = data["index_base_url"].rstrip("/")
    entries: list[dict[str, str]] = []
    seen: set[str] = set()
    for t in data["torch"]:
        torch_version = t["version"]
        for cuda in t["cuda"]:
            if cuda not in cudas:
                raise MatrixError(f"torch {torch_version}: CUDA {cuda} not in 'cuda'")
            spec = cudas[cuda]
            tag = variant_tag(torch_version, cuda)
            if tag in seen:
                raise MatrixError(f"duplicate variant {tag}")
            seen.add(tag)
            archs = spec.get("archs", "")
            if cuda != "cpu":
                check_archs(archs)
                if not spec.get("toolkit", "").startswith(cuda + "."):
                    raise MatrixError(f"CUDA {cuda}: toolkit pin must be {cuda}.N")
            entries.append(
                {
                    "variant": tag,
                    "torch": torch_version,
                    "cuda": cuda,
                    "cuda_toolkit": spec.get("toolkit", ""),
                    "fusedops_cuda": "OFF" if cuda == "cpu" else "ON",
                    "archs": archs,
                    "torch_index_url": spec["torch_index_url"],
                    "python": data["python_build"],
                    "python_min": data["python_min"],
                    "manylinux": data["manylinux"],
                    "find_links_page": torch_local_label(torch_version, cuda) + ".html",
                    "index_url": f"{base}/{tag}/simple",
                }
            )
    return entries


def env_lines(entry: dict[str, str], quote: bool = True) -> list[str]:
    pairs = {
        "FUSEDOPS_VARIANT": entry["variant"],
        "TORCH_VERSION": entry["torch"],
        "CUDA_VERSION": entry["cuda"],
        "CUDA_TOOLKIT_VERSION": entry["cuda_toolkit"],
        "FUSEDOPS_CUDA": entry["fusedops_cuda"],
        "FUSEDOPS_CUDA_ARCHS": entry["archs"],
        "TORCH_INDEX_URL": entry["torch_index_url"],
    }
    q = shlex.quote if quote else str
    return [f"{k}={q(v)}" for k, v in pairs.items()]


def table(entries: list[dict[str, str]]) -> str:
    cols = ["variant", "torch", "cuda", "cuda_toolkit", "archs"]
    rows = [cols] + [[e[c] or "-" for c in cols] for e in entries]
    widths = [max(len(r[i]) for r in rows) for i in range(len(cols))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--matrix", type=Path, default=DEFAULT_MATRIX)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--github", action="store_true", help="GitHub Actions matrix JSON")
    mode.add_argument("--list", action="store_true", help="human-readable table")
    mode.add_argument("--variant", metavar="TAG", help="env lines for one variant")
    p.add_argument(
        "--format",
        choices=["shell", "env"],
        default="shell",
        help="with --variant: shell-quoted (eval) or raw KEY=value ($GITHUB_ENV)",
    )
    args = p.parse_args(argv)

    try:
        entries = expand(load(args.matrix))
    except (OSError, KeyError, MatrixError, json.JSONDecodeError) as e:
        print(f"wheel_matrix: {args.matrix}: {e!r}", file=sys.stderr)
        return 2

    if args.github:
        print(json.dumps({"include": entries}, separators=(",", ":")))
    elif args.list:
        print(table(entries))
    else:
        found = [e for e in entries if e["variant"] == args.variant]
        if not found:
            known = " ".join(e["variant"] for e in entries)
            print(f"wheel_matrix: unknown variant {args.variant!r}; known: {known}", file=sys.stderr)
            return 2
        print("\n".join(env_lines(found[0], quote=args.format == "shell")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
