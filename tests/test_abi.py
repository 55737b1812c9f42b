"""The binary talks to torch only through its stable C ABI: it imports no C++
symbol of at::, c10:: or torch:: (those change with every torch release), so
one build runs on every torch from its ABI target on."""

from __future__ import annotations

import re
import shutil
import subprocess

import fusedops._C
import pytest


def imported_symbols(library: str) -> list[str]:
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) not installed")
    out = subprocess.run([nm, "-D", "--undefined-only", library], capture_output=True, text=True, check=True)
    return [line.split()[-1] for line in out.stdout.splitlines() if line.strip()]


def demangle(symbols: list[str]) -> list[str]:
    cxxfilt = shutil.which("c++filt")
    if cxxfilt is None:
        pytest.skip("c++filt (binutils) not installed")
    return subprocess.run([cxxfilt], input="\n".join(symbols), capture_output=True, text=True,
                          check=True).stdout.splitlines()


def test_no_torch_cxx_symbols_are_imported():
    symbols = imported_symbols(fusedops._C.__file__)
    torch_cxx = [s for s in demangle(symbols) if re.search(r"\b(at|c10|torch|caffe2)::", s)]
    assert not torch_cxx, torch_cxx[:20]
    # What it does import from torch is the C shim.
    assert any(s.startswith(("aoti_torch_", "torch_")) for s in symbols)
