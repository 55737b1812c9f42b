"""The op samples: what the generic checks of every op run on
(tests/test_every_op.py, tests/test_cuda_robustness.py). Each op's samples are
its module here, tests/samples/<op>.py, collected by name: a new op is covered
by adding its module; tests/test_<op>.py keeps only its own semantics.

An op module defines SAMPLES, its main variants, which go through every
check, and may define MORE_SHAPES and MORE_OPTIONS (bounds, epilogues), which
go through the cheaper ones: forward and gradients against float64 over every
layout and dtype, gradcheck, and for MORE_SHAPES opcheck. Its ENTRY_CASES are
arguments of every kind for the op's C entry (tests/test_accelerator.py). What a sample is:
samples/core.py.
"""

from __future__ import annotations

import importlib
import pkgutil

from samples.core import (  # noqa: F401 (the tests' one import)
    Bad,
    Sample,
    assert_all_close,
    assert_matches_reference,
    forward_backward,
    grads,
    outputs,
)

OP_MODULES = [importlib.import_module(f"samples.{m.name}") for m in pkgutil.iter_modules(__path__)
              if m.name != "core"]
SAMPLES = [s for m in OP_MODULES for s in m.SAMPLES]
MORE_SHAPES = [s for m in OP_MODULES for s in getattr(m, "MORE_SHAPES", [])]
MORE_OPTIONS = [s for m in OP_MODULES for s in getattr(m, "MORE_OPTIONS", [])]
ALL_SAMPLES = SAMPLES + MORE_SHAPES + MORE_OPTIONS
# Each op's arguments of every kind for its C entry (test_accelerator.py).
ENTRY_CASES = {m.__name__.removeprefix("samples."): m.ENTRY_CASES for m in OP_MODULES if hasattr(m, "ENTRY_CASES")}


def ids(samples):
    return [s.id for s in samples]
