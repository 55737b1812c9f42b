"""add's own semantics: vector tails and misaligned pointers, more dimensions
than the kernels take, NaN and inf, more than 2^31 elements; and, through add,
how an out-of-memory error names the op on every call path. The generic checks
(test_every_op.py, test_cuda_robustness.py) run on its samples in samples/add.py."""

import pytest
import torch
from conftest import CUDA
from helpers import poison_allocator

import fusedops
from fusedops import _loader
from fusedops._variant import major_minor

pytestmark = pytest.mark.ops  # the op suite (.ci/run's Python-autograd lane: -m ops)


@pytest.mark.parametrize("numel", [1, 3, 8, 15, 16, 17, 1023, 4097, 65537, 1_000_003])
def test_vector_tail_and_misaligned_pointers(device, dtype, numel):
    for offset in (0, 1, 3):
        a = torch.randn(numel + offset, dtype=dtype, device=device)[offset:]
        b = torch.randn(numel + 1, dtype=dtype, device=device)[1:]
        poison_allocator(device)
        assert torch.equal(fusedops.add(a, b), torch.add(a, b))


@pytest.mark.parametrize("b", [0.0, -0.5, 1.0, 2**-24, 2**-14, 2048.0, 65504.0])
def test_float16_rounding_of_every_value(device, b):
    """Every float16 through the float32 math and back (F16C's conversions on
    x86-64 CPUs): torch's bits, subnormals, ties, overflow and signed zeros
    included; NaN stays NaN."""
    a = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(torch.float16).to(device)
    b = torch.full_like(a, b)
    ours, theirs = fusedops.add(a, b), torch.add(a, b)
    nan = theirs.isnan()
    assert torch.equal(ours.isnan(), nan)
    assert torch.equal(ours[~nan].view(torch.int16), theirs[~nan].view(torch.int16))


def test_many_dims_and_expanded_inputs(device):
    # 10 non-mergeable dims exceed the kernels' 8: the glue falls back to copies.
    a = torch.randn([2] * 10, device=device).permute(*reversed(range(10)))
    b = torch.randn(2, 1, 2, device=device).expand(2, 5, 2)
    assert torch.equal(fusedops.add(a, torch.ones((), device=device)), a + 1)
    assert torch.equal(fusedops.add(b, b), b + b)


def test_nan_and_inf_propagate(device):
    a = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0], device=device)
    b = torch.tensor([1.0, -float("inf"), 2.0, float("nan")], device=device)
    torch.testing.assert_close(fusedops.add(a, b), a + b, equal_nan=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_cuda_more_than_2_31_elements():
    if torch.cuda.get_device_properties(0).total_memory < 40 * 2**30:
        pytest.skip("needs a GPU with 40 GiB")
    n = 2**31 + 3
    a = torch.randn(n, dtype=torch.float16, device="cuda")
    b = torch.ones(1, dtype=torch.float16, device="cuda")
    out = fusedops.add(a, b.expand(n))  # strided path (stride 0) over > 2^31 elements
    assert torch.equal(out[-1000:], a[-1000:] + 1) and torch.equal(out[:1000], a[:1000] + 1)
    del out
    out = fusedops.add(a, a)  # vectorized path
    assert torch.equal(out[-1000:], a[-1000:] * 2) and torch.equal(out[:1000], a[:1000] * 2)


# ---- out of memory, through add: the error names the op on every path ----------------------------

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
