"""fusedops.patch on tiny HF Llama/Mistral/Qwen2/Qwen3 and timm ViT models
(2 layers, hidden 64, vocab 1000): the patched model against the unpatched one
(same weights) and a float64 reference of the loss: loss, gradients,
generate(), padding, num_items_in_batch, logits_to_keep, gradient
checkpointing, state dicts, save_pretrained, torch.compile and FSDP2.

transformers and timm are optional dependencies: tools/setup.sh installs the
pinned versions (tools/requirements/models.txt) into the README's test venv,
where these run; a venv without them reports them as skipped.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import subprocess
import sys
import weakref
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import DEVICES

import fusedops

HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
HAS_TIMM = importlib.util.find_spec("timm") is not None
needs_transformers = pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers not installed")
needs_timm = pytest.mark.skipif(not HAS_TIMM, reason="timm not installed")

ARCHS = ["llama", "mistral", "qwen2", "qwen3"]
VOCAB = 1000
# Loss and gradients against the reference (float64: up to the ops' float64
# rounding; float32: the model's float32 rounding through two layers).
TOLERANCE = {torch.float64: dict(rtol=1e-9, atol=1e-11), torch.float32: dict(rtol=2e-4, atol=2e-6)}
DTYPES = pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])


def causal_lm(arch: str, dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    import transformers

    config = transformers.AutoConfig.for_model(arch, vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                               pad_token_id=0)
    return transformers.AutoModelForCausalLM.from_config(config).to(dtype).train()


def float64_norms(model: torch.nn.Module) -> torch.nn.Module:
    """transformers' RMSNorm computes in float32 whatever the dtype: in a float64
    reference model, each computes in float64 here (the rest is the library's)."""
    def forward(norm, x):
        return norm.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon))

    for module in model.modules():
        if type(module).__name__.endswith("RMSNorm") and model.dtype == torch.float64:
            module.forward = forward.__get__(module)
    return model


def patched_copy(model: torch.nn.Module, **options) -> tuple[torch.nn.Module, dict[str, int]]:
    """A copy of `model`, patched; its state dict is the very same before and after."""
    ours = copy.deepcopy(model)
    before = ours.state_dict()
    counts = fusedops.patch(ours, **options)
    assert_same_state(before, ours.state_dict())
    return ours, counts


def tokens(batch: int = 3, seq: int = 11) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Tokens, an attention mask with padding (row 1 on the right, row 2 on the
    left) and labels that ignore the padding (-100)."""
    ids = torch.randint(1, VOCAB, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[1, -4:] = 0
    mask[2, :3] = 0
    return ids, mask, ids.masked_fill(mask == 0, -100)


def reference_loss(model, ids, mask, labels, num_items_in_batch=None) -> torch.Tensor:
    """The unpatched model's logits, and the next-token cross entropy in float64."""
    logits = model(input_ids=ids, attention_mask=mask).logits.double()
    losses = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1), reduction="none")
    if num_items_in_batch is None:
        return losses.sum() / (labels[:, 1:] != -100).sum()
    return losses.sum() / num_items_in_batch


def assert_same_grads(ours: torch.nn.Module, ref: torch.nn.Module, dtype: torch.dtype) -> None:
    tol = TOLERANCE[dtype]
    for (name, p), q in zip(ours.named_parameters(), ref.parameters(), strict=True):
        scale = q.grad.abs().max().item()
        torch.testing.assert_close(p.grad, q.grad, rtol=tol["rtol"], atol=tol["atol"] * max(1.0, scale),
                                   msg=lambda m, name=name: f"{name}: {m}")


def assert_same_state(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> None:
    """The same keys, in order, each the very same tensor (shared, not copied)."""
    assert list(after) == list(before)
    for key, tensor in after.items():
        assert tensor.data_ptr() == before[key].data_ptr() and tensor.shape == before[key].shape, key


def test_import_without_the_model_libraries():
    code = ("import sys; sys.modules['transformers'] = sys.modules['timm'] = None\n"
            "import torch, fusedops\n"
            "try:\n    fusedops.patch(torch.nn.Sequential(torch.nn.Linear(2, 2)))\n"
            "except ValueError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("fusedops.patch: nothing to patch in Sequential: supported are transformers' "
                                  "LlamaForCausalLM")


def test_bad_model():
    with pytest.raises(TypeError, match="fusedops.patch: model must be a torch.nn.Module, got str"):
        fusedops.patch("llama")


@needs_transformers
@pytest.mark.parametrize("arch", ARCHS)
@DTYPES
def test_causal_lm_loss_and_grads(arch, dtype):
    ref = causal_lm(arch, dtype)
    ours, counts = patched_copy(ref)
    float64_norms(ref)
    norms = 5 + (4 if arch == "qwen3" else 0)  # 2 per layer and the final one; Qwen3's q/k norms
    assert counts == {"RMSNorm": norms, "MLP": 2, "rotary": 2, "loss": 1, "Linear+GELU": 0, "qkv": 0,
                      "LayerNorm": 0, "add+LayerNorm": 0}
    ids, mask, labels = tokens()
    out = ours(input_ids=ids, attention_mask=mask, labels=labels)
    assert out.logits is None and out.loss.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    expected = reference_loss(ref, ids, mask, labels)
    torch.testing.assert_close(out.loss.double(), expected, **TOLERANCE[dtype])
    out.loss.backward()
    expected.backward()
    assert_same_grads(ours, ref, dtype)
    # HF's own loss (labels given to the unpatched model): gradient accumulation's
    # normalization, and logits_to_keep with labels of the kept positions.
    hf = ref(input_ids=ids, attention_mask=mask, labels=labels, num_items_in_batch=torch.tensor(7)).loss
    fused = ours(input_ids=ids, attention_mask=mask, labels=labels, num_items_in_batch=torch.tensor(7)).loss
    torch.testing.assert_close(fused.float(), hf, **TOLERANCE[torch.float32])
    torch.testing.assert_close(fused.double(), reference_loss(ref, ids, mask, labels, 7), **TOLERANCE[dtype])
    hf = ref(input_ids=ids, labels=labels[:, -5:], logits_to_keep=5).loss
    torch.testing.assert_close(ours(input_ids=ids, labels=labels[:, -5:], logits_to_keep=5).loss.float(), hf,
                               **TOLERANCE[torch.float32])


def relative_errors(model: torch.nn.Module, reference: torch.nn.Module) -> list[float]:
    """Each parameter's gradient error relative to the float64 reference's (L2)."""
    return [((p.grad.double().cpu() - q.grad).norm() / q.grad.norm()).item()
            for p, q in zip(model.parameters(), reference.parameters(), strict=True)]


@needs_transformers
@pytest.mark.parametrize("device", DEVICES)
def test_bfloat16_step_as_accurate_as_transformers(device):
    """A bfloat16 step, patched and not, against the float64 model: the patched
    loss and every gradient at most twice as far from it as transformers' own."""
    reference = float64_norms(causal_lm("llama", torch.float64))
    eager = copy.deepcopy(reference).to(device, torch.bfloat16)
    ours, _ = patched_copy(eager)
    ids, mask, labels = tokens(batch=4, seq=32)
    expected = reference_loss(reference, ids, mask, labels)
    expected.backward()
    inputs = dict(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device))
    losses = {}
    for name, model in (("eager", eager), ("ours", ours)):
        losses[name] = model(**inputs).loss
        losses[name].backward()
    assert abs(losses["ours"].item() - expected.item()) <= 2 * abs(losses["eager"].item() - expected.item()) + 1e-3
    for ours_error, eager_error in zip(relative_errors(ours, reference), relative_errors(eager, reference),
                                       strict=True):
        assert ours_error <= 2 * eager_error + 1e-3


@needs_transformers
@pytest.mark.parametrize("arch", ARCHS)
def test_generate_and_eval_are_transformers_own(arch):
    ref = causal_lm(arch).eval()
    ours, _ = patched_copy(ref)
    ids, mask, labels = tokens(seq=7)
    mask[1, -4:] = 1  # generate() pads on the left
    kwargs = dict(attention_mask=mask, max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert torch.equal(ours.generate(ids, **kwargs), ref.generate(ids, **kwargs))
    # In eval mode a forward with labels is transformers' own: logits and their loss.
    out, hf = (m(input_ids=ids, attention_mask=mask, labels=labels) for m in (ours, ref))
    assert out.logits is not None
    torch.testing.assert_close(out.logits, hf.logits, **TOLERANCE[torch.float32])
    torch.testing.assert_close(out.loss, hf.loss, **TOLERANCE[torch.float32])


@needs_transformers
def test_gradient_checkpointing():
    ref = causal_lm("qwen3", torch.float64)
    ours, _ = patched_copy(ref)
    float64_norms(ref)
    for model in (ref, ours):
        model.gradient_checkpointing_enable()
    ids, mask, labels = tokens()
    loss = ours(input_ids=ids, attention_mask=mask, labels=labels).loss
    expected = reference_loss(ref, ids, mask, labels)
    torch.testing.assert_close(loss, expected, **TOLERANCE[torch.float64])
    loss.backward()
    expected.backward()
    assert_same_grads(ours, ref, torch.float64)


@needs_transformers
def test_state_dicts_and_checkpoints_load_both_ways(tmp_path):
    import transformers
    from transformers.models.llama import modeling_llama

    ref = causal_lm("llama")
    ours, _ = patched_copy(ref)
    ours.save_pretrained(tmp_path / "patched")
    ref.save_pretrained(tmp_path / "plain")
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "patched")
    fusedops.patch(reloaded := transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "plain"))
    for model in (loaded, reloaded):
        for (name, p), q in zip(model.state_dict().items(), ref.state_dict().values(), strict=True):
            assert torch.equal(p, q), name
    # A copy of a patched model is patched, its forwards its own.
    attention = copy.deepcopy(ours).model.layers[0].self_attn
    assert vars(attention)["forward"].__self__ is attention
    # Instances, not the class or the library's module: a new model is transformers' own.
    fresh = causal_lm("llama")
    assert "forward" not in vars(fresh.model.layers[0].self_attn) and "forward" not in vars(fresh)
    assert modeling_llama.apply_rotary_pos_emb.__module__ == modeling_llama.__name__


@needs_transformers
def test_options_choose_what_is_patched():
    ref = causal_lm("llama")
    _, counts = patched_copy(ref, norm=False, rotary=False)
    assert (counts["RMSNorm"], counts["MLP"], counts["rotary"], counts["loss"]) == (0, 2, 0, 1)
    ours, _ = patched_copy(ref, swiglu=False, loss=False)
    assert fusedops.patch(ours) == {**dict.fromkeys(counts, 0), "MLP": 2, "loss": 1}  # only what was left


def loss_holding_mlp_tensors(model, called, **inputs) -> tuple[torch.Tensor, int]:
    """called(**inputs).loss, and how many tensors of [tokens, intermediate]
    its graph holds for the backward."""
    size = inputs["input_ids"].numel() * model.config.intermediate_size
    held = set()

    def pack(t):
        if t.dim() and t.shape[-1] == model.config.intermediate_size and t.numel() == size:
            held.add(t.untyped_storage().data_ptr())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = called(**inputs).loss
    return loss, len(held)


@needs_transformers
@pytest.mark.parametrize("autocast", [False, True], ids=["float32", "bfloat16-autocast"])
def test_mlp_holds_gate_and_up_not_their_product(autocast):
    """The patched MLP holds gate and up for its backward (swiglu's), and
    down_proj's weight gradient recomputes their product: two [tokens,
    intermediate] tensors a layer, not three (transformers' own holds four).
    Under autocast the projection's weight is cast as F.linear casts it, and
    its gradient reaches the float32 weight; a projection with a hook (LoRA's
    wrappers, FSDP's units) is called as it is."""
    ref = causal_lm("llama")
    ours, _ = patched_copy(ref)
    ids, mask, labels = tokens()
    precision = torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast)
    with precision:
        loss, held = loss_holding_mlp_tensors(ours, ours, input_ids=ids, attention_mask=mask, labels=labels)
        expected, held_by_transformers = loss_holding_mlp_tensors(ref, ref, input_ids=ids, attention_mask=mask,
                                                                  labels=labels)
    assert (held, held_by_transformers) == (2 * 2, 4 * 2)
    loss.backward()
    expected.backward()
    if not autocast:
        assert_same_grads(ours, ref, torch.float32)
    else:  # bfloat16 products and gradients: the same up to their rounding
        for (name, p), q in zip(ours.named_parameters(), ref.parameters(), strict=True):
            assert p.grad.dtype == torch.float32
            torch.testing.assert_close(p.grad, q.grad, rtol=0.05, atol=0.02 * q.grad.abs().max().item(),
                                       msg=lambda m, name=name: f"{name}: {m}")
    hooked, _ = patched_copy(ref)
    calls = []
    hooked.model.layers[1].mlp.down_proj.register_forward_hook(lambda *args: calls.append(1))
    with precision:
        _, held = loss_holding_mlp_tensors(hooked, hooked, input_ids=ids, attention_mask=mask, labels=labels)
    assert calls == [1] and held == 2 + 3


class MostLiveAtOnce(torch.utils._python_dispatch.TorchDispatchMode):
    """The most tensors of `numel` elements, made by ops under this mode, alive at once."""

    def __init__(self, numel: int):
        super().__init__()
        self.numel, self.live, self.most = numel, set(), 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in torch.utils._pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.numel() == self.numel:
                storage = t.untyped_storage()
                if id(storage) not in self.live:
                    self.live.add(id(storage))
                    weakref.finalize(storage, self.live.discard, id(storage))
                    self.most = max(self.most, len(self.live))
        return out


@needs_transformers
def test_mlp_backward_holds_three_of_gates_size_at_once():
    """The MLP's backward, where a step's memory peaks (the last layer's, with
    every activation still held), makes gate's and up's gradients before the
    product it recomputes: three [tokens, intermediate] tensors alive at once
    (the product's gradient is freed first), not four."""
    ref = causal_lm("llama")
    ours, _ = patched_copy(ref)
    ours.model.layers = ours.model.layers[:1]
    ids, mask, labels = tokens()
    loss = ours(input_ids=ids, attention_mask=mask, labels=labels).loss
    count = MostLiveAtOnce(ids.numel() * ours.config.intermediate_size)
    with count:
        loss.backward()
    assert count.most == 3


@needs_transformers
def test_compile_of_the_patched_model():
    ref = causal_lm("llama")
    ours, _ = patched_copy(ref)
    # The whole forward in one graph, and AOTAutograd's backward: where a patched
    # forward could break a graph. (Inductor's own code for the ops is tested per op.)
    compiled = torch.compile(ours, fullgraph=True, backend="aot_eager")
    ids, mask, labels = tokens()
    loss, held = loss_holding_mlp_tensors(ours, compiled, input_ids=ids, attention_mask=mask, labels=labels)
    assert held == 2 * 2  # gate and up (see test_mlp_holds_gate_and_up_not_their_product)
    expected = reference_loss(ref, ids, mask, labels)
    torch.testing.assert_close(loss.double(), expected, **TOLERANCE[torch.float32])
    loss.backward()
    expected.backward()
    assert_same_grads(ours, ref, torch.float32)


def aten_ops_traced(model: torch.nn.Module, *inputs, **kwargs) -> tuple[set[str], object]:
    """The ATen and custom ops of the forward graph torch.compile makes of
    model(*inputs, **kwargs) (AOTAutograd's), and the output."""
    from torch._dynamo.backends.common import aot_autograd

    names: set[str] = set()

    def forward_compiler(gm, _):
        names.update(str(node.target) for node in gm.graph.nodes if node.op == "call_function")
        return gm.forward

    torch._dynamo.reset()
    out = torch.compile(model, fullgraph=True, backend=aot_autograd(fw_compiler=forward_compiler))(*inputs, **kwargs)
    return names, out


def fusedops_ops_run(model: torch.nn.Module, *inputs, **kwargs) -> set[str]:
    """The fusedops ops an eager call model(*inputs, **kwargs) runs, by the
    profiler's names (fusedops::layer_norm, or _layer_norm_forward under
    Python autograd)."""
    with torch.profiler.profile() as prof:
        model(*inputs, **kwargs)
    return {event.key for event in prof.key_averages() if event.key.startswith("fusedops::")}


@needs_transformers
def test_compiled_model_leaves_its_rms_norms_to_the_compiler():
    """Traced by torch.compile, the patched model's RMSNorms are transformers'
    own, which Inductor fuses with the residual add before each; the MLP,
    rotary and the loss stay ours. Eager, the RMSNorms are ours."""
    ref = causal_lm("llama")
    ours, _ = patched_copy(ref)
    ids, mask, labels = tokens()
    names, out = aten_ops_traced(ours, input_ids=ids, attention_mask=mask, labels=labels)
    ops = {name for name in names if name.startswith("fusedops.")}
    assert not any("rms_norm" in name for name in ops), ops
    assert all(any(op in name for name in ops) for op in ("swiglu", "rotary", "linear_cross_entropy")), ops
    torch.testing.assert_close(out.loss.double(), reference_loss(ref, ids, mask, labels), **TOLERANCE[torch.float32])
    assert any("rms_norm" in name for name in fusedops_ops_run(ours, input_ids=ids, attention_mask=mask,
                                                              labels=labels))


@pytest.fixture
def sdpa_masks(monkeypatch) -> list:
    """The attention masks transformers' SDPA attention is called with (at
    trace time under torch.compile)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    sdpa, masks = ALL_ATTENTION_FUNCTIONS["sdpa"], []

    def recording(module, query, key, value, attention_mask, **kwargs):
        masks.append(attention_mask)
        return sdpa(module, query, key, value, attention_mask, **kwargs)

    monkeypatch.setitem(ALL_ATTENTION_FUNCTIONS._global_mapping, "sdpa", recording)
    return masks


@needs_transformers
def test_compiled_causal_attention_needs_no_mask(sdpa_masks):
    """With no padding mask, positions or cache, transformers' eager forward
    gives SDPA no mask but is_causal; compiled (use_cache=False: it cannot read
    the positions for packed sequences) it builds a [B, 1, S, S] mask. The
    patched model's attentions get none either way."""
    ref = causal_lm("llama")
    ours, _ = patched_copy(ref)
    ids = torch.randint(1, VOCAB, (2, 11))
    loss = torch.compile(ours, fullgraph=True, backend="aot_eager")(input_ids=ids, labels=ids, use_cache=False).loss
    assert len(sdpa_masks) == 2 and all(mask is None for mask in sdpa_masks)
    expected = reference_loss(ref, ids, torch.ones_like(ids), ids)
    torch.testing.assert_close(loss.double(), expected, **TOLERANCE[torch.float32])
    loss.backward()
    expected.backward()
    assert_same_grads(ours, ref, torch.float32)


@needs_transformers
@pytest.mark.parametrize("case", ["packed positions", "sliding window"])
def test_masks_beyond_causal_are_kept(case, sdpa_masks):
    """Packed sequences (positions restarting) and a sliding window shorter
    than the sequence mask more than causality: the patched attentions get
    transformers' mask, and the loss and gradients are the unpatched model's."""
    ref = causal_lm("mistral", torch.float64)
    ref.config.sliding_window = 4 if case == "sliding window" else None
    ours, _ = patched_copy(ref)
    float64_norms(ref)
    ids = torch.randint(1, VOCAB, (2, 11))
    positions = torch.cat([torch.arange(6), torch.arange(5)])[None] if case == "packed positions" else None
    loss = ours(input_ids=ids, position_ids=positions, labels=ids, use_cache=False).loss
    logits = ref(input_ids=ids, position_ids=positions, use_cache=False).logits
    assert len(sdpa_masks) == 4 and all(mask is not None and mask.shape[-2:] == (11, 11) for mask in sdpa_masks)
    expected = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
    torch.testing.assert_close(loss, expected, **TOLERANCE[torch.float64])
    loss.backward()
    expected.backward()
    assert_same_grads(ours, ref, torch.float64)


@needs_transformers
@pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                    reason="torch.distributed with gloo is not available")
def test_fsdp2_follows_single_process(tmp_path):
    script = Path(__file__).with_name("patched_fsdp.py")
    sys.path.insert(0, str(script.parent))
    try:
        import patched_fsdp
    finally:
        sys.path.remove(str(script.parent))
    single = patched_fsdp.train(rank=0, world=1)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script)]
    done = subprocess.run(command, cwd=tmp_path, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    record = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("{")))
    assert record["world_size"] == 2 and single[-1] < single[0]
    torch.testing.assert_close(record["losses"], single, rtol=1e-5, atol=1e-6)


def vit(dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    from timm.models.vision_transformer import VisionTransformer

    return VisionTransformer(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=4,
                             num_classes=10).to(dtype).train()


@needs_timm
@DTYPES
def test_vit_loss_and_grads(dtype):
    ref = vit(dtype)
    ours, counts = patched_copy(ref)
    assert counts == {"RMSNorm": 0, "MLP": 0, "rotary": 0, "loss": 0, "Linear+GELU": 2, "qkv": 2, "LayerNorm": 5,
                      "add+LayerNorm": 2}
    images, classes = torch.randn(3, 3, 32, 32, dtype=dtype), torch.randint(0, 10, (3,))
    loss = F.cross_entropy(ours(images), classes)
    expected = F.cross_entropy(ref(images), classes)
    torch.testing.assert_close(loss, expected, **TOLERANCE[dtype])
    loss.backward()
    expected.backward()
    assert_same_grads(ours, ref, dtype)
    assert fusedops.patch(ours) == dict.fromkeys(counts, 0)


@needs_timm
@pytest.mark.parametrize("device", DEVICES)
def test_vit_under_autocast(device):
    """bfloat16 autocast: the blocks' residual stream is float32, their branches
    bfloat16; the fused add promotes as eager's add does. The blocks' norm1 and
    norm2 hand qkv and fc1 bfloat16 (autocast_output), not float32 to be cast;
    the final norm, which feeds the head, stays float32."""
    ref = vit().to(device)
    ours, _ = patched_copy(ref)
    assert all(b.norm1.autocast_output and b.norm2.autocast_output for b in ours.blocks)
    assert not ours.norm.autocast_output
    inputs = []
    for block in ours.blocks:
        for linear in (block.attn.qkv, block.mlp.fc1):
            linear.register_forward_hook(lambda module, args, out: inputs.append(args[0].dtype))
    images, classes = torch.randn(4, 3, 32, 32, device=device), torch.randint(0, 10, (4,), device=device)
    with torch.autocast(device, dtype=torch.bfloat16):
        loss = F.cross_entropy(ours(images), classes)
        expected = F.cross_entropy(ref(images), classes)
    assert inputs == [torch.bfloat16] * 4
    torch.testing.assert_close(loss, expected, rtol=2e-2, atol=2e-2)
    loss.backward()
    expected.backward()
    for p, q in zip(ours.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=5e-2, atol=5e-2 * q.grad.abs().max().item())


@needs_timm
def test_vit_options():
    ours, counts = patched_copy(vit(), norm=False)
    assert (counts["Linear+GELU"], counts["qkv"], counts["LayerNorm"], counts["add+LayerNorm"]) == (2, 2, 0, 0)
    assert type(ours.blocks[0].norm2) is not fusedops.nn.LayerNorm
    _, counts = patched_copy(vit(), linear=False)
    assert (counts["Linear+GELU"], counts["qkv"], counts["LayerNorm"]) == (0, 0, 5)


@needs_timm
def test_compile_of_the_patched_vit():
    """The patched blocks and attentions in one graph (fullgraph), AOTAutograd's backward."""
    ref = vit()
    ours, _ = patched_copy(ref)
    compiled = torch.compile(ours, fullgraph=True, backend="aot_eager")
    images, classes = torch.randn(2, 3, 32, 32), torch.randint(0, 10, (2,))
    loss, expected = F.cross_entropy(compiled(images), classes), F.cross_entropy(ref(images), classes)
    torch.testing.assert_close(loss, expected, **TOLERANCE[torch.float32])
    loss.backward()
    expected.backward()
    assert_same_grads(ours, ref, torch.float32)


@needs_timm
def test_compiled_vit_leaves_its_layer_norms_to_the_compiler():
    """Traced by torch.compile, the patched ViT's LayerNorms (and each block's
    residual add before norm2) are F.layer_norm's, which Inductor fuses with
    the adds and casts around them; fc1 + GELU stays ours. Eager, they are ours."""
    ref = vit()
    ours, _ = patched_copy(ref)
    images = torch.randn(2, 3, 32, 32)
    names, out = aten_ops_traced(ours, images)
    assert "aten.native_layer_norm.default" in names
    assert not any(name.startswith("fusedops.") and "layer_norm" in name for name in names), names
    assert any(name.startswith("fusedops.") and "linear" in name for name in names), names
    torch.testing.assert_close(out, ref(images), **TOLERANCE[torch.float32])
    norms = {name for name in fusedops_ops_run(ours, images) if "layer_norm" in name}
    assert any("add_layer_norm" in key for key in norms) and any("add" not in key for key in norms), norms


@needs_timm
def test_vit_attention_without_sdpa_is_left_alone():
    """An Attention on timm's manual path (fused_attn off) keeps timm's forward;
    the other block's is patched, and the model still matches."""
    ref = vit()
    ref.blocks[0].attn.fused_attn = False
    ours, counts = patched_copy(ref)
    assert counts["qkv"] == 1 and "forward" not in vars(ours.blocks[0].attn)
    images, classes = torch.randn(2, 3, 32, 32), torch.randint(0, 10, (2,))
    loss, expected = (F.cross_entropy(m(images), classes) for m in (ours, ref))
    torch.testing.assert_close(loss, expected, **TOLERANCE[torch.float32])
    loss.backward()
    expected.backward()
    assert_same_grads(ours, ref, torch.float32)
