"""add's own semantics: vector tails and misaligned pointers, more dimensions
than the kernels take, NaN and inf, more than 2^31 elements. The generic checks
(test_every_op.py, test_cuda_robustness.py) run on its samples in samples.py."""

import pytest
import torch
from helpers import poison_allocator

import fusedops


@pytest.mark.parametrize("numel", [1, 3, 8, 15, 16, 17, 1023, 4097, 65537, 1_000_003])
def test_vector_tail_and_misaligned_pointers(device, dtype, numel):
    for offset in (0, 1, 3):
        a = torch.randn(numel + offset, dtype=dtype, device=device)[offset:]
        b = torch.randn(numel + 1, dtype=dtype, device=device)[1:]
        poison_allocator(device)
        assert torch.equal(fusedops.add(a, b), torch.add(a, b))


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
