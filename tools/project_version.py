#!/usr/bin/env python3
"""The release's version: `base-version` in pyproject.toml, the one place it is written.

    project_version.py            print it
    project_version.py --check    every mention of a release of fusedops in the README, docs,
                                  sources, tools and workflows names this version; else
                                  exit 1, listing each other one (file:line)

The wheels are <base-version>+<variant> (tools/build/fusedops_metadata.py), and
tools/release_preflight.py refuses any tag but v<base-version>. Read with a
pattern rather than tomllib: Python 3.10, the wheels' oldest, has no tomllib,
and the test job collects tests/test_version.py and
tests/test_release_preflight.py there. Standard library only.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_BASE_VERSION = re.compile(r'^base-version = "(\d+\.\d+\.\d+)"$', re.MULTILINE)

# What names a release of fusedops: a version with a variant label (X.Y.Z+cu13,
# X.Y.Z+cpu; torch's own labels have three digits, cu130, and its +cpu versions
# are the matrix's torch releases), a pin or a wheel file (fusedops==X.Y.Z,
# fusedops-X.Y.Z+cpu-...), a release tag (git tag vX.Y.Z, refs/tags/vX.Y.Z).
MENTIONS = re.compile(
    r"\b(\d+\.\d+\.\d+)\+(?:cpu|cu\d\d)\b|\bfusedops(?:==|-)(\d+\.\d+\.\d+)|\btags?[/ ]v(\d+\.\d+\.\d+)\b",
    re.IGNORECASE)
# Where they are checked. Not: benchmarks/ and docs/PERFORMANCE.md (results, each
# of the version it measured) nor tests/ (made-up releases: the index's history).
CHECKED = ("README.md", "pyproject.toml", "CMakeLists.txt", "docs/*.md", "src/**/*.py", "tools/**/*",
           "examples/**/*", ".github/**/*.yml", ".ci/run")
NOT_CHECKED = ("docs/PERFORMANCE.md", "tools/requirements/*", "tools/project_version.py")


def base_version(pyproject: Path = ROOT / "pyproject.toml") -> str:
    found = _BASE_VERSION.findall(pyproject.read_text(encoding="utf-8"))
    if len(found) != 1:
        raise ValueError(f"{pyproject}: expected one line 'base-version = \"X.Y.Z\"', found {len(found)}")
    return found[0]


def checked_files(root: Path = ROOT) -> list[Path]:
    files = {p for pattern in CHECKED for p in root.glob(pattern) if p.is_file()}
    return sorted(p for p in files if not any(p.relative_to(root).match(n) for n in NOT_CHECKED))


def other_versions(root: Path = ROOT) -> list[str]:
    """'file:line: X.Y.Z' for each mention of a release that is not base-version."""
    want = base_version(root / "pyproject.toml")
    matrix = json.loads((root / "tools" / "wheel_matrix.json").read_text(encoding="utf-8"))
    torch_releases = set(matrix["accelerators"].values())
    found = []
    for path in checked_files(root):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # a binary file
        for number, line in enumerate(text.splitlines(), 1):
            for match in MENTIONS.finditer(line):
                version = next(g for g in match.groups() if g)
                if version != want and version not in torch_releases:
                    found.append(f"{path.relative_to(root)}:{number}: {match[0]} (base-version is {want})")
    return found


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        stale = other_versions()
        for line in stale:
            print(f"project_version: {line}", file=sys.stderr)
        return 1 if stale else 0
    if argv:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    print(base_version())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
