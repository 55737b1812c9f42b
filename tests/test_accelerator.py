"""The autograd paths: C++ autograd where the wheel carries the accelerator of
the running torch minor, Python autograd otherwise, with the same results;
errors of a failed allocation name the op."""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from samples import ENTRY_CASES, SAMPLES, outputs

import fusedops
from fusedops import _accelerator, _loader
from fusedops._variant import major_minor

pytestmark = pytest.mark.ops  # the op suite (.ci/run's Python-autograd lane: -m ops)

# Every public op (torch.ops.fusedops.<name> without a leading "_").
PUBLIC_OPS = sorted(name.removeprefix("fusedops::") for name in torch._C._dispatch_get_all_op_names()
                    if name.startswith("fusedops::") and not name.startswith("fusedops::_"))
MINOR = "{}.{}".format(*major_minor(torch.__version__))


def expected_path() -> str:
    """CI names the path each run must take (FUSEDOPS_EXPECT_AUTOGRAD): a
    wheel that silently lost its accelerator fails here. Without it, the path
    the wheel's contents and the environment call for."""
    if "FUSEDOPS_EXPECT_AUTOGRAD" in os.environ:
        return os.environ["FUSEDOPS_EXPECT_AUTOGRAD"]
    withheld = os.environ.get(_accelerator.WITHHOLD) == "0"
    return "C++" if MINOR in fusedops.build_info()["accelerators"] and not withheld else "Python"


def test_the_autograd_path_is_the_expected_one():
    path = expected_path()
    info = fusedops.build_info()
    assert _loader.AUTOGRAD.path == path, info["autograd"]
    if path == "C++":
        assert info["autograd"].startswith(f"C++ autograd for torch {MINOR} (torch_")
        assert _loader.AUTOGRAD.ops == frozenset(PUBLIC_OPS)
    else:
        assert info["autograd"].startswith("Python autograd: ") and "same results" in info["autograd"]
    # The backward ops that refuse a double backward go with their public op's path (compiled backward graphs
    # call them directly: the C++ kernel is half the host cost of Python's).
    backward_ops = [f"_{op}_backward" for op in PUBLIC_OPS if op not in ("add", "rotary")]
    for op in [*PUBLIC_OPS, *backward_ops, "_linear_cross_entropy_scale"]:
        name = f"fusedops::{op}"
        # C++ autograd at the device keys, or Python's register_autograd at the
        # Autograd alias: never both.
        for key in ("AutogradCPU", "AutogradCUDA"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(name, key) == (path == "C++"), (op, key)
        assert torch._C._dispatch_has_kernel_for_dispatch_key(name, "Autograd") == (path == "Python"), op


def test_info_names_the_path():
    out = subprocess.run([sys.executable, "-m", "fusedops", "info"], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    assert f"  autograd       {fusedops.build_info()['autograd']}\n" in out


def test_an_accelerator_is_loaded_only_under_its_own_minor(monkeypatch):
    stable = fusedops._C.__file__
    monkeypatch.delenv(_accelerator.WITHHOLD, raising=False)
    monkeypatch.setattr(torch, "__version__", "2.99.0")
    found = _accelerator.activate(stable, ["2.10", "2.99"])  # 2.99's library is not in the wheel
    assert found.path == "Python" and not found.ops
    assert found.reason.startswith("Python autograd: this wheel has no accelerator for torch 2.99 (it has: 2.10, ")
    monkeypatch.setattr(torch, "__version__", "2.9.1")
    assert "no accelerator for torch 2.9 (it has: none)" in _accelerator.activate(stable, []).reason


def test_withholding_it_says_so(monkeypatch):
    monkeypatch.setenv(_accelerator.WITHHOLD, "0")
    found = _accelerator.activate(fusedops._C.__file__, fusedops.build_info()["accelerators"])
    assert found.path == "Python" and f"{_accelerator.WITHHOLD}=0 withholds" in found.reason


# One training step of every main sample (tests/samples) on fixed float64 data,
# printed as JSON: run under both paths, the results must agree.
STEP = r"""
import json, sys, torch, fusedops
sys.path.insert(0, sys.argv[1])
from samples import SAMPLES, forward_backward
torch.manual_seed(1)
out = {"path": fusedops.build_info()["autograd"].split(":")[0]}
for sample in SAMPLES:
    inputs = sample.make("cpu", torch.float64, rows=5, requires_grad=True)
    got = forward_backward(sample, inputs, sample.grad_out(inputs))
    out[sample.id] = [t.tolist() for t in got]
print(json.dumps(out))
"""


def _step(withhold: bool) -> dict:
    env = dict(os.environ)
    env.pop(_accelerator.WITHHOLD, None)
    if withhold:
        env[_accelerator.WITHHOLD] = "0"
    run = subprocess.run([sys.executable, "-c", STEP, str(Path(__file__).parent)], capture_output=True, text=True,
                         timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.mark.skipif(MINOR not in fusedops.build_info()["accelerators"], reason="no accelerator for this torch")
def test_python_fallback_gives_the_same_results():
    cpp, python = _step(withhold=False), _step(withhold=True)
    assert cpp.pop("path").startswith("C++") and python.pop("path") == "Python autograd"
    for name in cpp:
        for ours, theirs in zip(cpp[name], python[name], strict=True):
            torch.testing.assert_close(torch.tensor(ours), torch.tensor(theirs), rtol=1e-12, atol=1e-12)


@pytest.mark.skipif(_loader.AUTOGRAD.path != "C++", reason="the cuBLAS flags reader comes with C++ autograd")
@pytest.mark.parametrize("tf32, fp16, bf16", [(False, True, True), (True, False, True), (True, True, False)])
def test_the_accelerator_reads_the_matmul_flags_as_torch_keeps_them(tf32, fp16, bf16):
    library = ctypes.CDLL(str(Path(fusedops.__file__).parent / "_accel" / f"torch_{MINOR.replace('.', '_')}.so"))
    library.fusedops_accel_matmul_flags.restype = ctypes.c_int64
    matmul = torch.backends.cuda.matmul
    old = (matmul.allow_tf32, matmul.allow_fp16_reduced_precision_reduction,
           matmul.allow_bf16_reduced_precision_reduction)
    try:
        matmul.allow_tf32, matmul.allow_fp16_reduced_precision_reduction = tf32, fp16
        matmul.allow_bf16_reduced_precision_reduction = bf16
        # CublasMath's packing (cpp/linear/linear.h): torch's CuBLASReductionOption
        # is 0 with reduced precision, 1 without (split-K still allowed).
        assert library.fusedops_accel_matmul_flags() == int(tf32) | (int(not fp16) << 1) | (int(not bf16) << 3)
    finally:
        (matmul.allow_tf32, matmul.allow_fp16_reduced_precision_reduction,
         matmul.allow_bf16_reduced_precision_reduction) = old


# ---- the public functions' C entries (accel/common/python.h) ----------------------------

# Each public op's module, the name of its C++ callable there, and its op.
ENTRIES = {op: (importlib.import_module(f"fusedops.ops.{op}"), f"_{op}", getattr(torch.ops.fusedops, op).default)
           for op in PUBLIC_OPS}


@pytest.mark.parametrize("op", ENTRIES)
def test_public_functions_call_the_c_entries(op):
    """With C++ autograd each public function calls its op through the
    accelerator's C entry, which keeps OpOverload._op (its fallback) as its
    self; without, OpOverload._op itself."""
    module, name, overload = ENTRIES[op]
    call = getattr(module, name)
    if _loader.AUTOGRAD.path == "C++":
        assert call is not overload._op and call.__name__ == op and call.__self__ is overload._op
    else:
        assert call is overload._op


@pytest.mark.skipif(_loader.AUTOGRAD.path != "C++", reason="entries come with C++ autograd")
def test_entries_hold_their_fallback_once():
    """An entry holds a reference to its fallback for as long as it lives, and
    an op without an entry gets its fallback back: no reference lost or leaked."""
    def fallback(*args):
        return args

    before = sys.getrefcount(fallback)
    for op in ("add", "no such op"):
        for _ in range(100):
            entry = _loader.AUTOGRAD.entry(op, fallback)
            assert (entry is fallback) == (op != "add")
            del entry
        assert sys.getrefcount(fallback) == before, op


def _outcome(fn, *args):
    """fn(*args)'s result as a list (its type, then its outputs), or its error's type and message."""
    try:
        result = fn(*args)
    except Exception as error:  # noqa: BLE001 - the error is the outcome compared
        return type(error), str(error)
    return [type(result), *outputs(result)]


def test_every_public_op_has_entry_cases():
    assert set(ENTRY_CASES) == set(PUBLIC_OPS)


@pytest.mark.parametrize("op", ENTRIES)
def test_c_entries_agree_with_the_op_on_every_argument_kind(op):
    """Tensors, Parameters, None, bools, ints beyond a double, tensors for
    numbers, strings that are no valid UTF-8, wrong counts: each entry gives
    what OpOverload._op gives (the same values, or the same error)."""
    module, name, overload = ENTRIES[op]
    for args in ENTRY_CASES[op]:
        ours, theirs = _outcome(getattr(module, name), *args), _outcome(overload._op, *args)
        if isinstance(theirs, list):
            assert isinstance(ours, list) and len(ours) == len(theirs) and ours[0] is theirs[0], args
            assert all(torch.equal(o, t) for o, t in zip(ours[1:], theirs[1:], strict=True)), args
        else:
            assert ours == theirs, args


class _Logged(torch.Tensor):
    calls: list = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.calls.append(func)
        return super().__torch_function__(func, types, args, kwargs or {})


class _LoggingMode(torch.overrides.TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls.append(func)
        return func(*args, **(kwargs or {}))


# Each op's first sample (test_every_op.py fails for a public op without samples).
FIRST_SAMPLES = {s.op: s for s in reversed(SAMPLES)}


@pytest.mark.parametrize("op", sorted(FIRST_SAMPLES))
def test_c_entries_hand_subclasses_and_modes_to_the_op(op):
    """A tensor subclass's __torch_function__ and a TorchFunctionMode see the op,
    as they do with OpOverload._op (the Python path calls the ops' no-grad twins
    where no gradient is needed); plain tensors take the C entry."""
    sample = FIRST_SAMPLES[op]
    expected = [getattr(torch.ops.fusedops, op if _loader.AUTOGRAD.path == "C++" else f"_{op}_nograd").default]
    first, *rest = sample.make("cpu", torch.float32)
    _Logged.calls.clear()
    out = sample.call(first.as_subclass(_Logged), *rest)
    assert _fusedops_ops(_Logged.calls) == expected
    plain = sample.call(first, *rest)
    for o, p in zip(outputs(out), outputs(plain), strict=True):
        assert type(o) is _Logged
        torch.testing.assert_close(o.as_subclass(torch.Tensor), p, rtol=0, atol=0)
    with _LoggingMode() as mode:
        out = sample.call(first, *rest)
    assert _fusedops_ops(mode.calls) == expected
    assert all(type(o) is torch.Tensor for o in outputs(out))


def _fusedops_ops(calls):
    return [f for f in calls if isinstance(f, torch._ops.OpOverload) and f.namespace == "fusedops"]
