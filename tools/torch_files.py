"""Unpack what an accelerator is compiled against from a torch wheel: its C++
headers (torch/include) and the three libraries an accelerator links
(torch/lib/libc10.so, libtorch_cpu.so, libtorch_python.so: its C++ symbols are
the same in every Python's wheel). Nothing else of the wheel (its CUDA
libraries are ~2 GB) is written.

    python tools/torch_files.py WHEEL DEST      # DEST/include, DEST/lib
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

WANTED_LIBS = ("torch/lib/libc10.so", "torch/lib/libtorch_cpu.so", "torch/lib/libtorch_python.so")


def unpack(wheel: Path, dest: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.startswith("torch/include/") or n in WANTED_LIBS]
        missing = [lib for lib in WANTED_LIBS if lib not in names]
        if missing:
            sys.exit(f"torch_files: {wheel} has no {', '.join(missing)}")
        for name in names:
            target = dest / name.removeprefix("torch/")
            if name.endswith("/"):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(name) as source, open(target, "wb") as out:
                while chunk := source.read(1 << 20):
                    out.write(chunk)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    unpack(Path(sys.argv[1]), Path(sys.argv[2]))
