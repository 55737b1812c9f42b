"""Every fusedops op is registered for every backend, so that no input ever
meets the dispatcher's generic "could not run ..." error: CPU and CUDA kernels
(in a CPU-only build, a CUDA stand-in that names the wheel to install), and a
shape function for meta tensors and torch.compile."""

from __future__ import annotations

import pkgutil

import pytest
import torch

import fusedops

OPS = sorted(name for name in torch._C._dispatch_get_all_op_names() if name.startswith("fusedops::"))


def test_the_public_ops_are_registered():
    """Each op module of the package (fusedops/ops/<op>.py) has its op."""
    modules = [m.name for m in pkgutil.iter_modules(fusedops.ops.__path__) if not m.name.startswith("_")]
    assert modules
    for name in modules:
        assert f"fusedops::{name}" in OPS


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("key", ["CPU", "CUDA", "Meta"])
def test_kernel_for_every_backend(name, key):
    assert torch._C._dispatch_has_kernel_for_dispatch_key(name, key), f"{name} has no {key} kernel"


def _arguments(schema):
    """Some value of the right type for each argument (the stand-in must not
    look at them): (positional, keyword)."""
    values = {"Tensor": torch.randn(2), "Optional[Tensor]": None, "float": 1.0, "Optional[float]": None,
              "Optional[str]": None, "List[bool]": [True, True, True], "int": 0, "str": "mean",
              "ScalarType": torch.float32, "Optional[int]": None, "bool": False}
    args = [values[str(arg.type)] for arg in schema.arguments if not arg.kwarg_only]
    kwargs = {arg.name: values[str(arg.type)] for arg in schema.arguments if arg.kwarg_only}
    return args, kwargs


@pytest.mark.skipif(bool(fusedops.build_info()["cuda"]), reason="this build has CUDA kernels")
@pytest.mark.parametrize("name", OPS)
def test_cpu_only_build_answers_cuda_with_the_wheel_to_install(name):
    op = getattr(torch.ops.fusedops, name.removeprefix("fusedops::")).default
    # Straight to the CUDA kernel, with CPU tensors: the stand-in raises before any use.
    base = fusedops.__version__.split("+")[0]
    with pytest.raises(RuntimeError, match=rf"^fusedops\.\w+: this build of fusedops \(.*\) has no CUDA kernels; "
                                           rf"install .* fusedops=={base}\+cu13 or fusedops=={base}\+cu12 "
                                           r"\(`python -m fusedops info` prints the command"):
        args, kwargs = _arguments(op._schema)
        op.redispatch(torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA), *args, **kwargs)
