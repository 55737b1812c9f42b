"""The autograd paths: C++ autograd where the wheel carries the accelerator of
the running torch minor, Python autograd otherwise, with the same results;
errors of a failed allocation name the op."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import CUDA

import fusedops
from fusedops import _accelerator, _loader
from fusedops._variant import major_minor

PUBLIC_OPS = ("add", "geglu", "linear", "scale_bias_clamp", "swiglu")
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
    for op in PUBLIC_OPS:
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


# One training step of every public op on fixed float64 data, printed as JSON:
# run under both paths, the results must agree.
STEP = r"""
import json, torch, fusedops
torch.manual_seed(1)
def leaf(*shape): return torch.randn(*shape, dtype=torch.float64, requires_grad=True)
cases = {
    "add": (fusedops.add, (leaf(5, 1, 7), leaf(3, 1)), {}),
    "scale_bias_clamp": (fusedops.scale_bias_clamp, (leaf(6, 7), leaf(()), leaf(7)), {"min": -0.3, "max": 0.8}),
    "linear": (fusedops.linear, (leaf(2, 5, 9), leaf(4, 9), leaf(4)), {"activation": "gelu", "max": 0.5}),
    "linear+relu": (fusedops.linear, (leaf(5, 9), leaf(4, 9), leaf(4)), {"activation": "relu"}),
    "swiglu": (fusedops.swiglu, (leaf(5, 6), leaf(5, 6)), {}),
    "geglu split": (fusedops.geglu, (leaf(5, 12),), {"approximate": "tanh"}),
}
out = {"path": fusedops.build_info()["autograd"].split(":")[0]}
for name, (fn, inputs, options) in cases.items():
    y = fn(*inputs, **options)
    grads = torch.autograd.grad(y, inputs, torch.randn_like(y))
    out[name] = [y.tolist()] + [g.tolist() for g in grads]
print(json.dumps(out))
"""


def _step(withhold: bool) -> dict:
    env = dict(os.environ)
    env.pop(_accelerator.WITHHOLD, None)
    if withhold:
        env[_accelerator.WITHHOLD] = "0"
    run = subprocess.run([sys.executable, "-c", STEP], capture_output=True, text=True, timeout=300, env=env)
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


# Out of memory: an output of 2^45 float32 elements (128 TiB) on the device.
def _too_large(device):
    return torch.randn(1 << 20, 1, device=device), torch.randn(1, 1 << 25, device=device)


@pytest.mark.parametrize("call", ["public", "public, grad", "torch.ops", "inference_mode"])
def test_out_of_memory_on_the_cpu_is_torchs_error_naming_the_op(call):
    a, b = _too_large("cpu")
    with pytest.raises(RuntimeError) as raised:
        _call_add(call, a, b)
    assert not isinstance(raised.value, torch.OutOfMemoryError)  # torch's CPU allocator raises RuntimeError
    assert str(raised.value).startswith("fusedops.add: out of memory: cannot allocate a float32 tensor of shape "
                                        "[1048576, 33554432] (140737488355328 bytes, 131072.00 GiB) on cpu")


def _call_add(call, a, b):
    if call == "public, grad":
        a.requires_grad_()
    if call == "torch.ops":
        return torch.ops.fusedops.add(a, b)
    if call == "inference_mode":
        with torch.inference_mode():
            return fusedops.add(a, b)
    return fusedops.add(a, b)


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
@pytest.mark.parametrize("call", ["public", "public, grad", "torch.ops", "inference_mode"])
def test_cuda_out_of_memory_is_torchs_out_of_memory_error(call, capfd):
    if call == "torch.ops" and _loader.AUTOGRAD.path != "C++":
        pytest.skip("a direct torch.ops call gets torch.OutOfMemoryError from the C++ autograd kernel")
    a, b = _too_large("cuda")
    with pytest.raises(torch.OutOfMemoryError, match=r"^fusedops\.add: CUDA out of memory: cannot allocate a "
                                                     r"float32 tensor of shape \[1048576, 33554432\]"):
        _call_add(call, a, b)
    if major_minor(torch.__version__) >= (2, 13):  # 2.10-2.12's C shim logs the error itself
        assert capfd.readouterr().err == ""


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
def test_cuda_out_of_memory_in_the_backward_is_torchs_out_of_memory_error():
    """The backward's allocation fails inside autograd's engine: between the
    forward and the backward, torch's allocator is capped at what it holds plus
    64 MiB (a cap, not a filled GPU: other test processes share the device)."""
    x = torch.randn(1 << 26, device="cuda", requires_grad=True)  # 256 MiB, as the backward's grad_x
    y = fusedops.scale_bias_clamp(x, 1.5, 0.5, -1.0, 1.0)
    grad = torch.randn_like(y)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(x.device).total_memory
    torch.cuda.set_per_process_memory_fraction((torch.cuda.memory_reserved() + (64 << 20)) / total)
    try:
        with pytest.raises(torch.OutOfMemoryError, match=r"^fusedops\.scale_bias_clamp: CUDA out of memory"):
            y.backward(grad)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)


# ---- the public functions' C entries (accel/common/python.h) ----------------------------

ENTRIES = {"add": (fusedops.ops.add, "_add", torch.ops.fusedops.add.default),
           "linear": (fusedops.ops.linear, "_linear", torch.ops.fusedops.linear.default),
           "scale_bias_clamp": (fusedops.ops.scale_bias_clamp, "_sbc", torch.ops.fusedops.scale_bias_clamp.default),
           "swiglu": (fusedops.ops.swiglu, "_swiglu", torch.ops.fusedops.swiglu.default),
           "geglu": (fusedops.ops.geglu, "_geglu", torch.ops.fusedops.geglu.default)}


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
    """fn(*args)'s result, or its error's type and message."""
    try:
        return fn(*args)
    except Exception as error:  # noqa: BLE001 - the error is the outcome compared
        return type(error), str(error)


def _entry_cases():
    x, w, b = torch.randn(5, 8, dtype=torch.float64), torch.randn(3, 8, dtype=torch.float64), torch.randn(3)
    p = torch.nn.Parameter(torch.randn(8, dtype=torch.float64))
    t = torch.randn(5, 8, dtype=torch.float64)
    return {
        "add": [(t, x), (t, p), (p, t[1:, :]), (t, 1.5), (t, None), (t,), (t, x, x), (t, torch.randn(3))],
        "linear": [(x, w, b.double(), "gelu", -0.5, 0.5), (x, w, None, None, None, None), (x, w, None, "relu", 0, 2), (x, w, None, None, -1, 1),
                   (x, w, None, None, True, None), (x, w, None, None, -(1 << 70), None),
                   (x, w, None, None, torch.tensor(0.5), None), (x, w, None, "tanh", None, None),
                   (x, w, None, 3, None, None), (x, w, None, "gel\ud800u", None, None), (x, w, [1.0], None, None, None),
                   (x, w.float(), None, None, None, None), (p.view(1, 8), w, None, None, None, None), (x, w)],
        "scale_bias_clamp": [(t, None, None, 2.0, 0.5, -1.0, 1.0), (t, torch.tensor(2.0, dtype=torch.float64), p,
                                                                     1.0, 0.0, None, 0.5),
                             (t, None, None, 2, 1, -1, None), (t, None, None, True, 0.5, None, None),
                             (t, None, None, 2.0, 0.5, "low", None), (t, None, None, 2.0)],
        "swiglu": [(t, x), (t, None), (p, t[1:, :]), (t, p.view(1, 8)), (t, 1.5), (t,), (t, x, x), (t, x.float())],
        "geglu": [(t, x, "none"), (t, None, "tanh"), (p.view(1, 8), None, "none"), (t, x, "erf"), (t, x, None),
                  (t, x, "gel\ud800u"), (t, x), (t, 1.5, "none"), (t, x.float(), "tanh")],
    }


@pytest.mark.parametrize("op", ENTRIES)
def test_c_entries_agree_with_the_op_on_every_argument_kind(op):
    """Tensors, Parameters, None, bools, ints beyond a double, tensors for
    numbers, strings that are no valid UTF-8, wrong counts: each entry gives
    what OpOverload._op gives (the same values, or the same error)."""
    module, name, overload = ENTRIES[op]
    for args in _entry_cases()[op]:
        ours, theirs = _outcome(getattr(module, name), *args), _outcome(overload._op, *args)
        if isinstance(theirs, torch.Tensor):
            assert isinstance(ours, torch.Tensor) and torch.equal(ours, theirs), args
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


def test_c_entries_hand_subclasses_and_modes_to_the_op():
    """A tensor subclass's __torch_function__ and a TorchFunctionMode see the op,
    as they do with OpOverload._op (the Python path calls the ops' no-grad twins
    where no gradient is needed); plain tensors take the C entry."""
    cpp = _loader.AUTOGRAD.path == "C++"
    ops = torch.ops.fusedops
    a, b, w = torch.randn(4, 3), torch.randn(3), torch.randn(2, 3)
    _Logged.calls.clear()
    out = fusedops.add(a.as_subclass(_Logged), b)
    assert _fusedops_ops(_Logged.calls) == [ops.add.default if cpp else ops._add_nograd.default]
    assert type(out) is _Logged
    torch.testing.assert_close(out.as_subclass(torch.Tensor), a + b, rtol=0, atol=0)
    with _LoggingMode() as mode:
        out = fusedops.linear(a, w, None, activation="relu")
    assert _fusedops_ops(mode.calls) == [ops.linear.default if cpp else ops._linear_nograd.default]
    assert type(out) is torch.Tensor


def _fusedops_ops(calls):
    return [f for f in calls if isinstance(f, torch._ops.OpOverload) and f.namespace == "fusedops"]
