"""C++ autograd for the running torch minor, where the wheel carries it.

The stable-ABI library (fusedops._C) runs on every torch from its ABI target
on, but the stable ABI has no C++ autograd, and Python autograd costs tens of
microseconds of host time a call. So the wheel also carries one small
*accelerator* per torch minor (fusedops/_accel/torch_<major>_<minor>.so, built
from accel/ against that minor's full C++ API): it registers C++ autograd (and
linear's autocast) for the public ops, which call the stable library's ops
through the dispatcher. It is loaded only under exactly the minor it was built
for (torch's C++ API changes with every minor: a library of another minor may
load and misbehave), and only when the loader asks: loading registers nothing.
Without one (a torch newer than the wheel) the op modules register today's
Python autograd, with the same results.

FUSEDOPS_CPP_AUTOGRAD=0 withholds the accelerator (the fallback's tests, A/B
runs).
"""

from __future__ import annotations

import ctypes
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import torch

from ._variant import major_minor

WITHHOLD = "FUSEDOPS_CPP_AUTOGRAD"


class Autograd(NamedTuple):
    ops: frozenset[str]  # the public ops with C++ autograd
    path: str  # "C++" or "Python"
    reason: str  # which accelerator, or why none
    # entry(op, fallback): the accelerator's C entry for public op `op`, a drop-in
    # for positional calls of `fallback` (its OpOverload._op); `fallback` itself
    # where it has none
    entry: Callable[[str, Callable], Callable] | None = None


def _library_name(minor: tuple[int, int]) -> str:
    return f"torch_{minor[0]}_{minor[1]}.so"


def _python(why: str) -> Autograd:
    return Autograd(frozenset(), "Python", f"Python autograd: {why}; same results, more host time a call")


def activate(stable_library: str, carried: list[str]) -> Autograd:
    """Loads and activates the accelerator of the running torch minor, if the
    wheel carries it (`carried`: build_info's accelerators), and installs its
    reader of the cuBLAS math flags into the stable library."""
    minor = major_minor(torch.__version__)
    version = f"{minor[0]}.{minor[1]}"
    if os.environ.get(WITHHOLD) == "0":
        return _python(f"{WITHHOLD}=0 withholds the C++ accelerator for torch {version}")
    path = Path(__file__).parent / "_accel" / _library_name(minor)
    if version not in carried or not path.is_file():
        has = ", ".join(carried) or "none"
        return _python(f"this wheel has no accelerator for torch {version} (it has: {has})")
    try:
        accelerator = ctypes.CDLL(str(path))
        accelerator.fusedops_accel_activate.restype = ctypes.c_char_p
        error = accelerator.fusedops_accel_activate()
        if error:
            raise OSError(error.decode())
        accelerator.fusedops_accel_ops.restype = ctypes.c_char_p
        ops = frozenset(accelerator.fusedops_accel_ops().decode().split(","))
        reader = ctypes.cast(accelerator.fusedops_accel_matmul_flags, ctypes.c_void_p)
        stable = ctypes.CDLL(stable_library)
        stable.fusedops_set_cublas_math_reader.argtypes = [ctypes.c_void_p]
        stable.fusedops_set_cublas_math_reader(reader)
        # PyDLL: called with the GIL held, as it makes Python objects.
        entry = ctypes.PyDLL(str(path)).fusedops_accel_entry
        entry.restype = ctypes.py_object
        entry.argtypes = [ctypes.c_char_p, ctypes.py_object]
    except (OSError, AttributeError) as error:
        warnings.warn(f"fusedops: the C++ autograd accelerator for torch {version} failed to load ({error}); "
                      "using Python autograd (same results, more host time)", RuntimeWarning, stacklevel=3)
        return _python(f"the accelerator for torch {version} failed to load ({error})")

    def entry_of(op: str, fallback: Callable) -> Callable:
        try:
            return entry(op.encode(), fallback)
        except ValueError:  # a NULL result: this process's interpreter does not export its C API
            return fallback

    return Autograd(ops, "C++", f"C++ autograd for torch {version} ({path.name}: {', '.join(sorted(ops))})",
                    entry_of)
