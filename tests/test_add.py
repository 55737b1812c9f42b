import pytest
import torch
from helpers import LAYOUTS, assert_close, make_input, poison_allocator
from torch.library import opcheck

import fusedops

# (shape of a, shape of b): same shape, trailing-dim broadcast, broadcast both
# ways, 0-dim, odd and empty sizes.
SHAPES = [
    ((7,), (7,)),
    ((37, 129), (37, 129)),
    ((37, 129), (129,)),
    ((5, 1, 33), (3, 1)),
    ((2, 3, 5, 7), (1, 3, 1, 7)),
    ((11, 13), ()),
    ((), ()),
    ((0, 5), (5,)),
    ((4, 0), (4, 1)),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape_a, shape_b", SHAPES)
def test_matches_float64_reference(device, dtype, shape_a, shape_b, layout):
    a = make_input(shape_a, dtype, device, layout)
    b = make_input(shape_b, dtype, device, layout)
    a_before, b_before = a.clone(), b.clone()
    poison_allocator(device)
    out = fusedops.add(a, b)
    expected = torch.add(a.double(), b.double())
    assert out.shape == expected.shape and out.dtype == dtype and out.device == a.device
    assert_close(out, expected, dtype)
    # Same float32 op-math as torch for the half types: bitwise equal to torch.add.
    assert torch.equal(out, torch.add(a, b))
    assert torch.equal(a, a_before) and torch.equal(b, b_before)


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


@pytest.mark.parametrize("shape_a, shape_b", [((4, 3), (3,)), ((2, 1, 5), (3, 1)), ((6,), ())])
def test_gradcheck(device, shape_a, shape_b):
    a = torch.randn(shape_a, dtype=torch.float64, device=device, requires_grad=True)
    b = torch.randn(shape_b, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(fusedops.add, (a, b))
    assert torch.autograd.gradgradcheck(fusedops.add, (a, b))


def test_grads_reduced_to_input_shapes(device, dtype):
    a = make_input((5, 1, 33), dtype, device, requires_grad=True)
    b = make_input((3, 1), dtype, device, requires_grad=True)
    grad = torch.randn(5, 3, 33, dtype=dtype, device=device)
    ga, gb = torch.autograd.grad(fusedops.add(a, b), (a, b), grad)
    ra, rb = (t.detach().double().requires_grad_() for t in (a, b))
    ea, eb = torch.autograd.grad(torch.add(ra, rb), (ra, rb), grad.double())
    assert ga.shape == a.shape and gb.shape == b.shape
    assert_close(ga, ea, dtype)
    assert_close(gb, eb, torch.float32 if dtype == torch.float64 else dtype)


def test_only_needed_grads(device):
    a = torch.randn(4, 3, device=device, requires_grad=True)
    b = torch.randn(3, device=device)
    fusedops.add(a, b).sum().backward()
    assert b.grad is None and torch.equal(a.grad, torch.ones_like(a))


@pytest.mark.parametrize("shape_a, shape_b", [((7, 5), (5,)), ((3, 1, 4), (2, 1)), ((0, 3), (3,))])
def test_opcheck(device, shape_a, shape_b):
    for requires_grad in (False, True):
        a = torch.randn(shape_a, device=device, requires_grad=requires_grad)
        b = torch.randn(shape_b, device=device, requires_grad=requires_grad)
        opcheck(torch.ops.fusedops.add.default, (a, b))
        opcheck(torch.ops.fusedops._add_nograd.default, (a.detach(), b.detach()))


def test_compile_fullgraph_forward_backward(device):
    def f(a, b):
        return (fusedops.add(a, b) * 2).sum()

    compiled = torch.compile(f, fullgraph=True, dynamic=True)
    for rows in (5, 9):  # a second shape exercises the dynamic graph
        a = torch.randn(rows, 17, device=device, requires_grad=True)
        b = torch.randn(17, device=device, requires_grad=True)
        got = torch.autograd.grad(compiled(a, b), (a, b))
        expected = torch.autograd.grad(f(a, b), (a, b))
        for g, e in zip(got, expected, strict=True):
            torch.testing.assert_close(g, e)


def test_error_messages(device):
    a = torch.randn(4, 3, device=device)
    cases = [
        ((a, a.double()), "b must have the same dtype as a"),
        ((a, torch.randn(4, device=device)), r"a of shape \[4, 3\] and b of shape \[4\] do not broadcast"),
        ((a.int(), a.int()), "a must have a floating dtype"),
        ((a, torch.randn(3, device="meta")), "b must be on the same device as a"),
    ]
    for args, message in cases:
        with pytest.raises(RuntimeError, match="^fusedops.add: " + message):
            fusedops.add(*args)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_cuda_and_cpu_inputs_mixed():
    with pytest.raises(RuntimeError, match="^fusedops.add: b must be on the same device as a"):
        fusedops.add(torch.randn(3, device="cuda"), torch.randn(3))


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
