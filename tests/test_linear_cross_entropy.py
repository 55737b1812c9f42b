"""linear_cross_entropy's own semantics: chunk and vocab-slab boundaries (their
sizes forced small through FUSEDOPS_LCE_CHUNK_ROWS and FUSEDOPS_LCE_SLAB_COLS),
all targets ignored, out-of-range targets (an error on the CPU, NaN rows on
CUDA), the same gradient bits every call, the fused (gradients in the forward),
vocab-slab and recomputing backwards and the rule between them, autocast,
CUDA graphs with no host synchronization, peak memory (CPU and CUDA), the nn
module. The generic checks (test_every_op.py, test_cuda_robustness.py) run on
its samples in samples/linear_cross_entropy.py: every reduction, smoothing,
softcap, int32 targets, odd and empty sizes, layouts."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import torch
from conftest import CUDA
from samples.linear_cross_entropy import reference, targets

import fusedops

pytestmark = pytest.mark.ops  # the op suite (.ci/run's Python-autograd lane: -m ops)

OPTIONS = dict(label_smoothing=0.1, softcap=2.0)


def _inputs(device, dtype, n=37, hidden=24, vocab=29, bias=True):
    x = torch.randn(n, hidden, device=device, dtype=dtype, requires_grad=True)
    w = (torch.randn(vocab, hidden, device=device, dtype=dtype) / hidden**0.5).requires_grad_()
    b = torch.randn(vocab, device=device, dtype=dtype, requires_grad=True) if bias else None
    return x, w, targets((n,), vocab, device), b


def _loss_and_grads(x, w, t, b, **options):
    loss = fusedops.linear_cross_entropy(x, w, t, b, **options)
    leaves = [v for v in (x, w, b) if v is not None]
    grads = torch.autograd.grad(loss, leaves, torch.ones_like(loss))
    # Detached: a loss kept with its graph keeps the leaves' AccumulateGrad nodes
    # of the stream it ran on, which a later CUDA graph capture must not wait on.
    return (loss.detach(), *grads)


def _assert_float64_reference(x, w, t, b, reduction, options=OPTIONS, random_grad=False):
    """The loss and gradients (for an incoming gradient of ones, or random in
    [0.5, 1.5): a factor a token where "none") are float64 torch's."""
    loss = fusedops.linear_cross_entropy(x, w, t, b, reduction=reduction, **options)
    grad = torch.rand_like(loss) + 0.5 if random_grad else torch.ones_like(loss)
    got = (loss.detach(), *torch.autograd.grad(loss, [v for v in (x, w, b) if v is not None], grad))
    leaves = [v.detach().double().requires_grad_() for v in (x, w, b) if v is not None]
    ref = reference(*leaves[:2], t, *leaves[2:], reduction=reduction, **options)
    expected = (ref, *torch.autograd.grad(ref, leaves, grad.double()))
    for g, e in zip(got, expected, strict=True):
        # bfloat16: the gradient at the logits is rounded to it for the GEMMs, and the gradients once more
        # (a sum's error up to 1e-3 of its largest element, seen on an H100).
        tol = dict(rtol=1e-5, atol=1e-6) if x.dtype == torch.float32 else dict(rtol=2e-2, atol=4e-3 * e.abs().max().item())
        torch.testing.assert_close(g.double(), e, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("chunk", [1, 5, 36, 37])
def test_every_chunk_size_gives_the_float64_reference(device, dtype, reduction, chunk, monkeypatch):
    """Chunks of one token, a chunk size that leaves a short last chunk, one
    token short of all, all: the loss and the gradients of float64 torch. (In
    bfloat16 on CUDA a chunk's logits come a quarter of its tokens at a time:
    1, 2, 9 and 10 here, the last part of a chunk shorter.)"""
    monkeypatch.setenv("FUSEDOPS_LCE_CHUNK_ROWS", str(chunk))
    x, w, t, b = _inputs(device, dtype)
    _assert_float64_reference(x, w, t, b, reduction)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("slab", [1, 5, 28, 29])
def test_every_slab_width_gives_the_float64_reference(device, dtype, reduction, slab, monkeypatch):
    """The backward by vocab slabs from the forward's log-sum-exp: slabs of
    one class, a width that leaves a narrow last slab, one class short of the
    vocab, all of it; chunks of 8 tokens in the forward. (In bfloat16 on CUDA
    a slab's logits come a quarter of the tokens at a time: 10 here.)"""
    monkeypatch.setenv("FUSEDOPS_LCE_ALGORITHM", "slabs")
    monkeypatch.setenv("FUSEDOPS_LCE_SLAB_COLS", str(slab))
    monkeypatch.setenv("FUSEDOPS_LCE_CHUNK_ROWS", "8")
    x, w, t, b = _inputs(device, dtype)
    _assert_float64_reference(x, w, t, b, reduction)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bfloat16", "float32"])
@pytest.mark.parametrize("reduction", ["mean", "none"])  # "none" goes by vocab slabs
@pytest.mark.parametrize("vocab", [300, 40004])  # on CUDA (sm_90 and newer) 40004 is held by 4 blocks a row
def test_gradients_are_the_same_bits_every_call(device, dtype, reduction, vocab, monkeypatch):
    monkeypatch.setenv("FUSEDOPS_LCE_CHUNK_ROWS", "8")  # weight's gradient summed over 5 chunks
    monkeypatch.setenv("FUSEDOPS_LCE_SLAB_COLS", "128")  # x's summed over 3 or 313 slabs
    x, w, t, b = _inputs(device, dtype, n=37, hidden=40, vocab=vocab)
    first, second = (_loss_and_grads(x, w, t, b, reduction=reduction) for _ in range(2))
    assert all(torch.equal(a, c) for a, c in zip(first, second, strict=True))


def test_all_targets_ignored_give_torchs_nan_mean_and_zero_gradients(device):
    x, w, _, b = _inputs(device, torch.float32, n=6)
    t = torch.full((6,), -100, device=device)
    mean = _loss_and_grads(x, w, t, b)
    assert mean[0].isnan() and all(torch.equal(g, torch.zeros_like(g)) for g in mean[1:])
    for reduction in ("sum", "none"):
        loss, *grads = _loss_and_grads(x, w, t, b, reduction=reduction)
        assert torch.equal(loss, torch.zeros_like(loss)) and all(torch.equal(g, torch.zeros_like(g)) for g in grads)


def test_an_out_of_range_target_on_the_cpu_is_an_error():
    x, w, t, b = _inputs("cpu", torch.float32, n=6, vocab=7)
    for bad in (7, -5):
        t[2] = bad
        with pytest.raises(RuntimeError, match=rf"^fusedops\.linear_cross_entropy: target {bad} is out of bounds: "
                                               r"a target must be in \[0, 7\) or ignore_index \(-100\)"):
            fusedops.linear_cross_entropy(x, w, t, b)


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
@pytest.mark.parametrize("vocab", [7, 8])  # a row's logits one at a time, four at a time
def test_an_out_of_range_target_on_cuda_gives_nan_rows_without_a_fault(vocab):
    """No device assert, no fault, no synchronization: that token's loss and
    gradient rows are NaN, every other token's are what they were."""
    x, w, t, b = _inputs("cuda", torch.float32, n=6, vocab=vocab)
    good = _loss_and_grads(x, w, t, b, reduction="none")
    t[2] = 1 << 40
    loss, grad_x, _, _ = _loss_and_grads(x, w, t, b, reduction="none")
    torch.cuda.synchronize()  # the context is fine
    rows = torch.arange(6, device="cuda") != 2
    assert loss[2].isnan() and grad_x[2].isnan().all()
    torch.testing.assert_close(loss[rows], good[0][rows])
    torch.testing.assert_close(grad_x[rows], good[1][rows])
    assert fusedops.linear_cross_entropy(x, w, t, b).isnan()


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("reduction", ["mean", "none"])
# On sm_90 and newer a row this long is held by a cluster of 1, 2, 4 and 8 blocks (40004's last part shorter,
# 150000's parts over 64 KiB); elsewhere a block reads it twice.
@pytest.mark.parametrize("vocab", [8200, 20000, 40004, 150000])
@pytest.mark.parametrize("plain", [False, True], ids=["bias-options", "plain"])  # plain: a Llama head's loss
def test_long_rows_give_the_float64_reference(dtype, reduction, vocab, plain):
    n = 19
    x, w, _, b = _inputs("cuda", dtype, n=n, hidden=16, vocab=vocab, bias=not plain)
    t = torch.randint(0, vocab, (n,), device="cuda")
    t[3], t[11], t[12] = -100, vocab - 1, 0  # an ignored token, the last class, the first
    _assert_float64_reference(x, w, t, b, reduction, {} if plain else OPTIONS)
    if torch.cuda.get_device_capability() >= (9, 0):  # and it was the cluster kernel that ran
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
            _loss_and_grads(x, w, t, b, reduction=reduction)
            torch.cuda.synchronize()
        assert any("held_rows_kernel" in event.key for event in profile.key_averages())
    t[7] = vocab  # out of range: that token's loss and gradient row NaN, the others' unchanged
    loss, grad_x, *_ = _loss_and_grads(x, w, t, b, reduction="none")
    rows = torch.arange(n, device="cuda") != 7
    assert loss[7].isnan() and grad_x[7].isnan().all() and not grad_x[rows].isnan().any()


# bfloat16 on CUDA only: on the CPU its row math is float32's (opmath), which the first case covers.
_ON_CUDA = pytest.mark.skipif(not CUDA, reason="no CUDA GPU")


@pytest.mark.parametrize(("device", "dtype"), [("cpu", torch.float32), pytest.param("cuda", torch.float32, marks=_ON_CUDA),
                                               pytest.param("cuda", torch.bfloat16, marks=_ON_CUDA)],
                         ids=["cpu-float32", "cuda-float32", "cuda-bfloat16"])
@pytest.mark.parametrize("plain", [False, True], ids=["bias-options", "plain"])
def test_many_long_rows_give_the_float64_reference(device, dtype, plain):
    """1000 rows of 40004 classes (on CUDA sm_90 and newer held by clusters of
    4 blocks: 250 rows a launch in bfloat16, 1000 in float32, several waves of
    clusters), ignored tokens among them, a random incoming gradient: the loss
    and gradients of float64 torch (in float32, where the sums run over 40004
    classes and 1000 tokens, no further from them than twice eager float32
    torch's error: the CPU's sums in float32 were up to 13x); an out-of-range
    token's loss and gradient row NaN on CUDA, the others' unchanged."""
    n, vocab = 1000, 40004
    options = {} if plain else OPTIONS
    x, w, _, b = _inputs(device, dtype, n=n, hidden=16, vocab=vocab, bias=not plain)
    t = torch.randint(0, vocab, (n,), device=device)
    t[::7] = -100
    t[1::97] = vocab - 1
    if dtype == torch.bfloat16:
        _assert_float64_reference(x, w, t, b, "none", options, random_grad=True)
    else:
        leaves = [v for v in (x, w, b) if v is not None]
        loss = fusedops.linear_cross_entropy(x, w, t, b, reduction="none", **options)
        grad = torch.rand_like(loss) + 0.5
        got = (loss, *torch.autograd.grad(loss, leaves, grad))
        eager = reference(x, w, t, b, reduction="none", **options)
        eager = (eager, *torch.autograd.grad(eager, leaves, grad))
        exact = [v.detach().double().requires_grad_() for v in leaves]
        ref = reference(*exact[:2], t, *exact[2:], reduction="none", **options)
        ref = (ref, *torch.autograd.grad(ref, exact, grad.double()))
        for g, e, r in zip(got, eager, ref, strict=True):
            error, eager_error = (g.double() - r).abs().max().item(), (e.double() - r).abs().max().item()
            assert error <= 2 * eager_error + 1e-7, (error, eager_error)
    if device == "cpu":
        return  # an out-of-range target raises there (test_an_out_of_range_target_on_the_cpu_is_an_error)
    loss, grad_x, *_ = _loss_and_grads(x, w, t, b, reduction="none")
    bad = torch.zeros(n, dtype=torch.bool, device=device)
    bad[[2, 500, 999]] = True
    t[bad] = vocab
    loss2, grad_x2, *_ = _loss_and_grads(x, w, t, b, reduction="none")
    assert loss2[bad].isnan().all() and grad_x2[bad].isnan().all()
    assert torch.equal(loss2[~bad], loss[~bad]) and torch.equal(grad_x2[~bad], grad_x[~bad])


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bfloat16", "float16"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("options", [{}, {"bias": True, **OPTIONS}, {"bias": True, "ignore_index": 5}],
                         ids=["plain", "bias-options", "ignore-a-class"])
@pytest.mark.parametrize("fused", [True, False], ids=["slab-gemm", "unfused"])
def test_slabs_from_the_gemms_epilogue_give_the_float64_reference(dtype, reduction, options, fused, monkeypatch):
    """On sm_90 (with CUTLASS) a slab's gradient at the logits comes straight
    out of our GEMM's epilogue where the layouts allow it (16-byte rows: the
    slabs of 200 classes here, partial tiles along both M and N, not the last
    of 3); FUSEDOPS_LCE_SLAB_GEMM=0 takes the unfused path. Both give float64
    torch's loss and gradients for a random incoming gradient, an ignored
    token's gradient row 0 and an out-of-range one's NaN."""
    monkeypatch.setenv("FUSEDOPS_LCE_ALGORITHM", "slabs")
    monkeypatch.setenv("FUSEDOPS_LCE_SLAB_COLS", "200")
    monkeypatch.setenv("FUSEDOPS_LCE_SLAB_GEMM", "1" if fused else "0")
    options = dict(options)
    n, vocab, bias = 300, 1003, options.pop("bias", False)
    x, w, _, b = _inputs("cuda", dtype, n=n, hidden=128, vocab=vocab, bias=bias)
    t = torch.randint(0, vocab, (n,), device="cuda")
    t[3], t[11], t[12], t[20] = options.get("ignore_index", -100), vocab - 1, 0, 200  # ignored, last, first, a slab's first
    _assert_float64_reference(x, w, t, b, reduction, options, random_grad=True)
    sm90 = torch.cuda.get_device_capability() == (9, 0) and "our sm_90a GEMM" in fusedops.build_info()["cuda_kernels"]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        t[7] = vocab  # out of range: that token's gradient row NaN, the others' finite
        loss, grad_x, *_ = _loss_and_grads(x, w, t, b, reduction=reduction, **options)
        torch.cuda.synchronize()
    # CUTLASS's kernel template (the profiler cuts long names in the middle): ours, cuBLASLt's are not it
    ours = [e.name for e in profile.events() if "cutlass13device_kernel" in e.name and "GemmUniversal" in e.name]
    assert len(ours) == (5 if fused and sm90 else 0)
    rows = torch.arange(n, device="cuda") != 7
    assert grad_x[7].isnan().all() and not grad_x[rows].isnan().any()
    t[7] = options.get("ignore_index", -100)  # ignored: its gradient row 0
    grad_x = _loss_and_grads(x, w, t, b, reduction=reduction, **options)[1]
    assert torch.equal(grad_x[7], torch.zeros_like(grad_x[7]))


@pytest.mark.parametrize("vocab", [300, 20000])  # on CUDA 20000 is a long row (sm_90 and newer: held)
def test_infinite_and_nan_logits_give_torchs_losses(device, vocab):
    """Rows of infinite logits (+inf and -inf, several at +inf), of +inf
    only, of -inf only, and with a NaN: each token's loss is torch's (inf or
    NaN), the other tokens' finite."""
    x, w, t, _ = _inputs(device, torch.float32, n=7, hidden=16, vocab=vocab, bias=False)
    with torch.no_grad():
        w[:, 1] = w[:, 1].abs() + 0.1
        x[1:4] = 0.0
        x[1, 0] = x[2, 1] = float("inf")  # x[1]: w[:, 0]'s signs; x[2]: every logit +inf
        x[3, 1] = -float("inf")  # every logit -inf
        x[5, 2] = float("nan")
    loss = fusedops.linear_cross_entropy(x, w, t, reduction="none")
    expected = reference(x.detach().double(), w.detach().double(), t, reduction="none")
    torch.testing.assert_close(loss.double(), expected, equal_nan=True, rtol=1e-5, atol=1e-6)


def test_the_fused_the_slab_and_the_recomputing_backward_agree(device, monkeypatch):
    """"sum" computes the gradients in the forward; "none" (summed here), and
    "sum" where chosen, goes by vocab slabs in the backward; create_graph
    recomputes each chunk's logits."""
    x, w, t, b = _inputs(device, torch.float32)
    fused = _loss_and_grads(x, w, t, b, reduction="sum", **OPTIONS)
    loss = fusedops.linear_cross_entropy(x, w, t, b, reduction="none", **OPTIONS).sum()
    by_slabs = (loss, *torch.autograd.grad(loss, (x, w, b)))
    loss = fusedops.linear_cross_entropy(x, w, t, b, reduction="sum", **OPTIONS)
    under_create_graph = (loss, *torch.autograd.grad(loss, (x, w, b), create_graph=True))
    monkeypatch.setenv("FUSEDOPS_LCE_ALGORITHM", "slabs")
    sum_by_slabs = _loss_and_grads(x, w, t, b, reduction="sum", **OPTIONS)
    for f, s, c, ss in zip(fused, by_slabs, under_create_graph, sum_by_slabs, strict=True):
        torch.testing.assert_close(f, s, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(f, c.detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(f, ss, rtol=1e-5, atol=1e-6)


class _OpsCalled(torch.utils._python_dispatch.TorchDispatchMode):
    """The fusedops ops called below autograd."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "fusedops":
            self.names.append(func._opname)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("vocab, hidden, reduction, expected", [
    (29, 24, "mean", ["_linear_cross_entropy_forward", "_linear_cross_entropy_scale"]),
    (29, 24, "none", ["_linear_cross_entropy_lse", "_linear_cross_entropy_backward"]),
    # weight's float32 gradient would be 1 GiB + 4 bytes a row: by slabs
    (1 << 14, (1 << 14) + 1, "mean", ["_linear_cross_entropy_lse", "_linear_cross_entropy_backward"]),
    (1 << 14, 1 << 14, "sum", ["_linear_cross_entropy_forward", "_linear_cross_entropy_scale"]),
])
def test_the_rule_between_the_fused_and_the_slab_backward(vocab, hidden, reduction, expected):
    """Which ops a loss and its backward run, on fake tensors (the ops' fake
    kernels: no memory)."""
    with torch._subclasses.FakeTensorMode():
        x = torch.empty(4, hidden, requires_grad=True)
        w = torch.empty(vocab, hidden, requires_grad=True)
        t = torch.zeros(4, dtype=torch.int64)
    with _OpsCalled() as called:
        loss = fusedops.linear_cross_entropy(x, w, t, reduction=reduction)
        torch.autograd.grad(loss, (x, w), torch.ones_like(loss))
    assert list(dict.fromkeys(n for n in called.names if n.startswith("_linear"))) == expected


def test_the_sum_scaled_by_the_items_of_a_batch_is_hfs_loss(device):
    """HF's gradient accumulation divides the "sum" by num_items_in_batch."""
    x, w, t, b = _inputs(device, torch.float64)
    n = 3 * int((t != -100).sum())  # the items of three micro-batches
    ours = fusedops.linear_cross_entropy(x, w, t, b, reduction="sum") / n
    theirs = reference(x, w, t, b, reduction="sum") / n
    torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(torch.autograd.grad(ours, x)[0], torch.autograd.grad(theirs, x)[0])


def test_autocast_casts_like_linear(device):
    x, w, t, b = _inputs(device, torch.float32)
    with torch.autocast(device, dtype=torch.bfloat16):
        loss, *grads = _loss_and_grads(x, w, t, b)
    expected = _loss_and_grads(x.bfloat16(), w.bfloat16(), t, b.bfloat16())
    assert loss.dtype == torch.float32 and torch.equal(loss, expected[0])
    for g, e in zip(grads, expected[1:], strict=True):  # cast back to float32 by autocast's backward
        assert g.dtype == torch.float32 and torch.equal(g, e.float())


@pytest.mark.parametrize("variable, value, expected", [
    ("FUSEDOPS_LCE_CHUNK_ROWS", "0", "unset or a positive integer"),
    ("FUSEDOPS_LCE_SLAB_COLS", "x", "unset or a positive integer"),
    ("FUSEDOPS_LCE_ALGORITHM", "vocab", 'unset, "chunks" or "slabs"'),
])
def test_the_environment_variables_are_checked(variable, value, expected, monkeypatch):
    monkeypatch.setenv(variable, value)
    x, w, t, b = _inputs("cpu", torch.float32, n=4)
    with pytest.raises(RuntimeError, match=rf"^fusedops\.linear_cross_entropy: the environment variable "
                                           rf"{variable} must be {re.escape(expected)}, got \"{value}\""):
        loss = fusedops.linear_cross_entropy(x, w, t, b, reduction="none")
        loss.sum().backward()


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
def test_the_slab_gemm_variable_is_checked_on_cuda(monkeypatch):
    monkeypatch.setenv("FUSEDOPS_LCE_ALGORITHM", "slabs")
    monkeypatch.setenv("FUSEDOPS_LCE_SLAB_GEMM", "yes")
    x, w, t, b = _inputs("cuda", torch.bfloat16, n=4)
    with pytest.raises(RuntimeError, match=r"^fusedops\.linear_cross_entropy: the environment variable "
                                           r"FUSEDOPS_LCE_SLAB_GEMM must be unset, 0 or 1, got \"yes\""):
        fusedops.linear_cross_entropy(x, w, t, b).backward()


def test_the_forward_op_takes_mean_or_sum_only():
    x, w, t, b = _inputs("cpu", torch.float32, n=4)
    with pytest.raises(RuntimeError, match=r'^fusedops\.linear_cross_entropy: _linear_cross_entropy_forward '
                                           r'takes reduction "mean" or "sum"'):
        torch.ops.fusedops._linear_cross_entropy_forward(x, w, t, b, -100, "none", 0.0, None, [True] * 3)


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize("vocab", [1000, 20000])  # a row a block; (sm_90 and newer) a cluster of 2 blocks
def test_cuda_graph_capture_with_no_host_synchronization(reduction, vocab):
    """Forward and backward run under torch's sync debug mode "error" (any
    synchronizing call raises) and replay from a CUDA graph."""
    x, w, t, b = _inputs("cuda", torch.bfloat16, n=300, hidden=64, vocab=vocab)
    torch.cuda.set_sync_debug_mode("error")
    try:
        expected = _loss_and_grads(x, w, t, b, reduction=reduction)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up (plans, workspaces) off the capture
        _loss_and_grads(x, w, t, b, reduction=reduction)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = _loss_and_grads(x, w, t, b, reduction=reduction)
    graph.replay()
    torch.cuda.synchronize()
    assert all(torch.equal(c, e) for c, e in zip(captured, expected, strict=True))


def _cuda_peak_above_inputs_and_gradients(x, w, t) -> int:
    """Bytes a loss and its gradients peak at above the inputs and gradients."""
    _loss_and_grads(x, w, t, None)  # warm-up
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    grads = _loss_and_grads(x, w, t, None)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base - sum(g.numel() * g.element_size() for g in grads)


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
def test_peak_memory_is_a_chunk_of_logits_not_all(monkeypatch):
    """32768 tokens x 8192 classes: the logits would be 1 GiB in float32;
    chunks of 256 tokens hold 8 MiB (beside them: the gradient at a chunk's
    logits, float32 accumulators of x's and weight's gradients, 10 MiB, and
    cuBLASLt's workspace, at most 32 MiB)."""
    monkeypatch.setenv("FUSEDOPS_LCE_CHUNK_ROWS", "256")
    x, w, t, _ = _inputs("cuda", torch.bfloat16, n=32768, hidden=64, vocab=8192, bias=False)
    extra = _cuda_peak_above_inputs_and_gradients(x, w, t)
    assert extra < 64 << 20, f"{extra / 2**20:.1f} MiB above the inputs and gradients"


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
def test_peak_memory_by_slabs_holds_no_accumulator_of_weights_gradient(monkeypatch):
    """4096 tokens x 131072 classes x 256: weight's float32 gradient
    accumulator would be 128 MiB. By slabs of 1024 classes the backward holds
    a slab's gradient at the logits (8 MiB), its float32 logits a quarter of the
    tokens at a time (4 MiB), weight's gradient of the slab (1 MiB) and x's
    float32 accumulator (4 MiB); the forward a chunk of 64 tokens' logits
    (32 MiB); beside them cuBLASLt's workspace, at most 32 MiB."""
    monkeypatch.setenv("FUSEDOPS_LCE_ALGORITHM", "slabs")
    monkeypatch.setenv("FUSEDOPS_LCE_SLAB_COLS", "1024")
    monkeypatch.setenv("FUSEDOPS_LCE_CHUNK_ROWS", "64")
    x, w, t, _ = _inputs("cuda", torch.bfloat16, n=4096, hidden=256, vocab=1 << 17, bias=False)
    extra = _cuda_peak_above_inputs_and_gradients(x, w, t)
    assert extra < 96 << 20, f"{extra / 2**20:.1f} MiB above the inputs and gradients"


# One fwd+bwd in a fresh process: its peak resident memory above what it held before.
PEAK_RSS = r"""
import gc, resource, torch, fusedops
torch.manual_seed(0)
n, h, v = 2048, 16, 16384
x = torch.randn(n, h, requires_grad=True)
w = (torch.randn(v, h) / 4).requires_grad_()
t = torch.randint(0, v, (n,))
torch.autograd.grad(fusedops.linear_cross_entropy(x[:8], w[:64], t[:8] % 64), (x, w))  # load, warm up
gc.collect()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
grads = torch.autograd.grad(fusedops.linear_cross_entropy(x, w, t), (x, w))
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


@pytest.mark.parametrize("algorithm", ["chunks", "slabs"])
def test_peak_memory_on_the_cpu_is_a_chunk_of_logits_not_all(algorithm):
    """2048 tokens x 16384 classes: 128 MiB of float32 logits (all at once, the
    peak grows by 137 MB); chunks of 128 tokens hold 8 MiB (beside them: the
    gradients' float32 accumulators, 1.2 MiB), and so do slabs of 1024 classes.
    Measured as the growth of a fresh process's peak resident memory."""
    env = dict(os.environ, FUSEDOPS_LCE_CHUNK_ROWS="128", FUSEDOPS_LCE_SLAB_COLS="1024",
               FUSEDOPS_LCE_ALGORITHM=algorithm, OMP_NUM_THREADS="2")
    run = subprocess.run([sys.executable, "-c", PEAK_RSS], capture_output=True, text=True, timeout=300, env=env,
                         check=True)
    extra = int(run.stdout.split()[-1])
    assert extra < 48 << 20, f"the peak grew by {extra / 2**20:.1f} MiB"


def test_the_module_shares_a_linear_heads_parameters(device):
    head = torch.nn.Linear(24, 29, device=device)
    loss_fn = fusedops.nn.LinearCrossEntropy.from_linear(head, label_smoothing=0.1)
    assert loss_fn.weight is head.weight and loss_fn.bias is head.bias
    x = torch.randn(5, 24, device=device)
    t = targets((5,), 29, device)
    torch.testing.assert_close(loss_fn(x, t), reference(x, head.weight, t, head.bias, label_smoothing=0.1))
    loss_fn(x, t).backward()
    assert head.weight.grad is not None and head.bias.grad is not None
    fresh = fusedops.nn.LinearCrossEntropy(24, 29, bias=True, device=device)
    fresh.load_state_dict(head.state_dict())
    head.load_state_dict(fresh.state_dict())
    assert "reduction='mean'" in repr(fresh)
