"""Fetch the CUTLASS headers that linear's sm_90a GEMM is built with.

    python3 tools/get_cutlass.py [DEST]          (default: third_party/cutlass)
    python3 tools/get_cutlass.py --wheel FILE    (a wheel already downloaded)

Downloads the PyPI wheel nvidia-cutlass==4.2.0.0 with pip (--no-deps
--require-hashes: none of its Python dependencies, and only the pinned file),
checks its sha256 again, and extracts cutlass_library/source/include/{cutlass,cute}
to DEST/include. CMake finds them there (cmake/cutlass.cmake); without them a
CUDA build is cuBLASLt-only. Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PIN = "nvidia-cutlass==4.2.0.0"
WHEEL = "nvidia_cutlass-4.2.0.0-py3-none-any.whl"
SHA256 = "f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6"
PREFIX = "cutlass_library/source/include/"
ROOT = Path(__file__).resolve().parents[1]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(tmp: Path) -> Path:
    requirements = tmp / "requirements.txt"
    requirements.write_text(f"{PIN} --hash=sha256:{SHA256}\n")
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--require-hashes",
                    "--only-binary=:all:", "-r", str(requirements), "-d", str(tmp)], check=True)
    return tmp / WHEEL


def extract(wheel: Path, dest: Path) -> int:
    include = dest / "include"
    shutil.rmtree(include, ignore_errors=True)
    count = 0
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            relative = name[len(PREFIX):]
            if not name.startswith(PREFIX) or name.endswith("/") or relative.split("/")[0] not in ("cutlass", "cute"):
                continue
            target = include / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(name))
            count += 1
    (dest / "VERSION").write_text(f"{PIN} sha256={SHA256}\n")
    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", nargs="?", type=Path, default=ROOT / "third_party" / "cutlass")
    parser.add_argument("--wheel", type=Path, help=f"use this {WHEEL} instead of downloading it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or download(Path(tmp))
        if sha256_of(wheel) != SHA256:
            sys.exit(f"get_cutlass: {wheel} has sha256 {sha256_of(wheel)}, expected {SHA256} ({PIN})")
        count = extract(wheel, args.dest)
    print(f"get_cutlass: {count} headers of {PIN} in {args.dest / 'include'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
