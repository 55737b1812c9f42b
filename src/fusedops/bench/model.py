"""python -m fusedops bench --model llama|vit: one training step of a real
model (forward, loss, backward, AdamW; fused on CUDA), as its user would
measure it, for each variant in the same run: eager, fusedops (fusedops.patch),
torch.compile, fusedops + torch.compile, and Liger-Kernel where it is
importable (Llama on CUDA). Random initialization: nothing is downloaded.

Every variant starts from the same weights: the first step's loss, gradient
norm and largest relative gradient difference to eager's are printed beside
the speed (ms per step, tokens or images per second; the variants take turns
in rotated rounds), and, on CUDA, the peak memory of one step above the model
and optimizer state (torch.cuda.max_memory_allocated, each variant in a pass of
its own). `--profile` adds where the time goes: kernel time per step by kind.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import json
import math
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

import fusedops
from fusedops import bench_report

from .core import compiler_allows_many_shapes, measure_impls, progress

MODELS = ("llama", "vit")
GIB = 1 << 30
# The default configurations: the GPU's are the targets' (a Llama 3-style 4-layer
# model with its 128256-token vocabulary; ViT-B/16), the CPU's run in about a minute.
DEFAULTS = {
    ("llama", "cuda"): dict(layers=4, hidden=2048, intermediate=8192, heads=16, kv_heads=4, vocab=128256, batch=4,
                            seq=2048),
    ("llama", "cpu"): dict(layers=2, hidden=256, intermediate=688, heads=4, kv_heads=2, vocab=8192, batch=2, seq=256),
    ("vit", "cuda"): dict(layers=12, hidden=768, heads=12, batch=128, image=224),
    ("vit", "cpu"): dict(layers=2, hidden=192, heads=3, batch=8, image=224),
}
# Kernel (CUDA) or op (CPU) names by kind, for --profile; the first kind whose
# word a name contains takes it, the rest is memory-bound work.
KINDS = {
    "GEMM": ("gemm", "cutlass", "nvjet", "xmma", "matmul", "aten::mm", "aten::addmm", "aten::bmm", "fusedops::linear",
             "fusedops::_linear"),
    "attention": ("flash", "fmha", "attention", "sdpa", "cudnn"),
    "optimizer": ("adam", "multi_tensor", "foreach"),
    "loss": ("cross_entropy", "log_softmax", "logsoftmax", "nll_loss", "lcerows"),  # lcerows: fusedops' loss rows
}
OTHER = "memory-bound"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The model bench's options on the bench command (--device, --json,
    --plot and --no-compile are the op bench's)."""
    parser.add_argument("--model", choices=MODELS, help="time a model's training step instead of the ops")
    for name, help_ in (("layers", "decoder layers / ViT blocks"), ("hidden", "hidden size"),
                        ("intermediate", "MLP size (llama)"), ("heads", "attention heads"),
                        ("kv-heads", "key/value heads (llama)"), ("vocab", "vocabulary (llama)"),
                        ("batch", "sequences / images per step"), ("seq", "tokens per sequence (llama)"),
                        ("image", "image side in pixels (vit)")):
        parser.add_argument(f"--{name}", type=int, help=f"{help_}; default by model and device")
    parser.add_argument("--steps", type=int, help="timed steps per variant (default 20 on CUDA, 5 on the CPU)")
    parser.add_argument("--profile", action="store_true", help="kernel time per step by kind (torch.profiler)")


@dataclass
class Workload:
    """A model to train and how one step's loss is computed from it."""

    model: torch.nn.Module
    loss_of: Callable[[torch.nn.Module], torch.Tensor]
    items: int  # tokens or images per step
    unit: str
    autocast: torch.dtype | None
    description: str


def llama(config: dict[str, int], device: torch.device, dtype: torch.dtype | None = None) -> Workload:
    """dtype: the model's, by default bfloat16 on CUDA and float32 on the CPU."""
    import transformers

    hf_config = transformers.LlamaConfig(
        vocab_size=config["vocab"], hidden_size=config["hidden"], intermediate_size=config["intermediate"],
        num_hidden_layers=config["layers"], num_attention_heads=config["heads"],
        num_key_value_heads=config["kv_heads"], max_position_embeddings=config["seq"])
    dtype = dtype or (torch.bfloat16 if device.type == "cuda" else torch.float32)
    with torch.device(device):
        model = transformers.LlamaForCausalLM(hf_config).train()
    if model.dtype != dtype:  # made in dtype already: as is (a fake model's tensors cannot be swapped)
        model = model.to(dtype)
    ids = torch.randint(0, config["vocab"], (config["batch"], config["seq"]), device=device)
    return Workload(model, lambda m: m(input_ids=ids, labels=ids).loss, ids.numel(), "tokens", None,
                    f"HF LlamaForCausalLM, {config['layers']} layers, hidden {config['hidden']}, intermediate "
                    f"{config['intermediate']}, {config['heads']}/{config['kv_heads']} heads, vocab {config['vocab']}"
                    f", batch {config['batch']} x {config['seq']} tokens, {str(dtype).removeprefix('torch.')}")


def vit(config: dict[str, int], device: torch.device) -> Workload:
    from timm.models.vision_transformer import VisionTransformer

    with torch.device(device):
        model = VisionTransformer(img_size=config["image"], patch_size=16, embed_dim=config["hidden"],
                                  depth=config["layers"], num_heads=config["heads"], num_classes=1000).train()
    images = torch.randn(config["batch"], 3, config["image"], config["image"], device=device)
    classes = torch.randint(0, 1000, (config["batch"],), device=device)
    autocast = torch.bfloat16 if device.type == "cuda" else None
    precision = "bfloat16 autocast" if autocast else "float32"
    return Workload(model, lambda m: F.cross_entropy(m(images), classes), config["batch"], "images", autocast,
                    f"timm VisionTransformer, {config['layers']} blocks, hidden {config['hidden']}, "
                    f"{config['heads']} heads, patch 16, batch {config['batch']} x {config['image']}^2, {precision}")


@dataclass
class Variant:
    model: torch.nn.Module  # the one the optimizer holds
    step: Callable[[], torch.Tensor]  # zero_grad, forward, loss, backward, optimizer step
    optimizer: torch.optim.Optimizer


def variants(work: Workload, device: torch.device, compile_too: bool, model_name: str) -> dict[str, Variant]:
    """Each variant on its own model, all with the same weights (eager takes the original)."""
    made: dict[str, Variant] = {}
    for name in ("eager", "fusedops", "compile", "fusedops+compile", "liger"):
        if "compile" in name and not compile_too:
            continue
        if name == "liger" and not liger_available(model_name, device):
            continue
        model = work.model if name == "eager" else copy.deepcopy(work.model)
        loss_of = work.loss_of
        if name.startswith("fusedops"):
            fusedops.patch(model)
        if name == "liger":
            loss_of = with_liger(model, loss_of)
        called = torch.compile(model) if name.endswith("compile") else model
        made[name] = make_variant(model, called, loss_of, work.autocast, device)
    return made


def make_variant(model, called, loss_of, autocast, device) -> Variant:
    on_gpu = device.type == "cuda"
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=on_gpu, foreach=not on_gpu)
    precision = torch.autocast(device.type, dtype=autocast) if autocast else contextlib.nullcontext()

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with precision:
            loss = loss_of(called)
        loss.backward()
        optimizer.step()
        return loss

    return Variant(model, step, optimizer)


def liger_available(model_name: str, device: torch.device) -> bool:
    return model_name == "llama" and device.type == "cuda" and importlib.util.find_spec("liger_kernel") is not None


def with_liger(model: torch.nn.Module, loss_of: Callable) -> Callable:
    """Liger-Kernel's apply_liger_kernel_to_llama on this instance. It also
    swaps modeling_llama's globals (the rotary function, the RMSNorm and MLP
    classes) for every model: those are put back at once, and Liger's rotary
    function is the global only while this variant's forward runs."""
    from liger_kernel.transformers import apply_liger_kernel_to_llama
    from transformers.models.llama import modeling_llama

    saved = {name: getattr(modeling_llama, name) for name in ("apply_rotary_pos_emb", "LlamaRMSNorm", "LlamaMLP")}
    apply_liger_kernel_to_llama(model=model)
    rope = modeling_llama.apply_rotary_pos_emb
    for name, value in saved.items():
        setattr(modeling_llama, name, value)

    def liger_loss(m: torch.nn.Module) -> torch.Tensor:
        modeling_llama.apply_rotary_pos_emb = rope
        try:
            return loss_of(m)
        finally:
            modeling_llama.apply_rotary_pos_emb = saved["apply_rotary_pos_emb"]

    return liger_loss


def first_steps(made: dict[str, Variant]) -> dict[str, dict[str, float]]:
    """The first step of each variant, all from the same weights: its loss, its
    gradients' norm and their largest relative difference (L2, parameter by
    parameter) to eager's."""
    stats: dict[str, dict[str, float]] = {}
    eager: dict[str, torch.Tensor] = {}
    for name, variant in list(made.items()):
        try:
            loss = variant.step().item()
        except Exception as error:  # Liger's patching against a transformers it does not know
            if name != "liger":
                raise
            print(f"fusedops bench: liger left out, its first step failed: {type(error).__name__}: {error}",
                  file=sys.stderr)
            del made[name]
            continue
        grads = {key: p.grad for key, p in variant.model.named_parameters() if p.grad is not None}
        if name == "eager":
            eager = {key: g.clone() for key, g in grads.items()}
        norm = math.sqrt(sum(g.float().square().sum().item() for g in grads.values()))
        diff = max((((g.float() - eager[key].float()).norm() / eager[key].float().norm().clamp_min(1e-30)).item()
                    for key, g in grads.items()), default=float("nan"))
        stats[name] = {"loss": loss, "grad_norm": norm, "grad_rel_diff": diff}
    return stats


def peak_gib(variant: Variant, made: dict[str, Variant], device: torch.device) -> float | None:
    """One step's peak memory above what is allocated before it (every
    variant's model and optimizer state, no gradients), in GiB; None on the CPU."""
    if device.type != "cuda":
        return None
    for other in made.values():
        other.optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    variant.step()
    torch.cuda.synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - before) / GIB


def profile_ms(variant: Variant, device: torch.device, steps: int = 3) -> dict[str, float]:
    """Time per step by kind (KINDS): of the CUDA kernels on a GPU, of the
    operators (their own time) on the CPU."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    on_gpu = device.type == "cuda"
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])) as prof:
        for _ in range(steps):
            variant.step()
        if on_gpu:
            torch.cuda.synchronize(device)
    kinds = dict.fromkeys([*KINDS, OTHER], 0.0)
    for event in prof.key_averages():
        if on_gpu and event.device_type == DeviceType.CUDA:
            kinds[kind_of(event.key)] += event.self_device_time_total / 1e3 / steps
        elif not on_gpu and "::" in event.key:  # an operator, not a Python range
            kinds[kind_of(event.key)] += event.self_cpu_time_total / 1e3 / steps
    return kinds


def kind_of(name: str) -> str:
    lowered = name.lower()
    return next((kind for kind, words in KINDS.items() if any(w in lowered for w in words)), OTHER)


def run(args: argparse.Namespace) -> int:
    hint = bench_report.matplotlib_missing() if args.plot else None
    if hint:
        print(hint, file=sys.stderr)
        return 2
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          "cpu" if args.device == "auto" else args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("fusedops bench: --device cuda, but torch sees no CUDA GPU", file=sys.stderr)
        return 2
    library = "transformers" if args.model == "llama" else "timm"
    if importlib.util.find_spec(library) is None:
        print(f"fusedops bench --model {args.model}: needs {library} (pip install -r "
              "tools/requirements/models.txt, or the versions the README names)", file=sys.stderr)
        return 2
    config = {key: getattr(args, key) if getattr(args, key, None) is not None else value
              for key, value in DEFAULTS[args.model, device.type].items()}
    work = (llama if args.model == "llama" else vit)(config, device)
    steps = args.steps or (20 if device.type == "cuda" else 5)
    compiler_allows_many_shapes()
    made = variants(work, device, compile_too=not args.no_compile, model_name=args.model)
    print(f"fusedops bench --model {args.model} on {device_name(device)} (torch {torch.__version__}): "
          f"{work.description}; AdamW{' (fused)' if device.type == 'cuda' else ''}; {steps} steps per variant",
          flush=True)

    progress.begin(f"{args.model}: first steps (compiles)")
    stats = first_steps(made)
    progress.end()
    progress.begin(f"{args.model}: timed steps, variants in rotated rounds")
    times = measure_impls({name: v.step for name, v in made.items()}, device, steps)
    progress.end()
    rows = []
    for name, variant in made.items():
        row = {"variant": name, "ms": times[name], "per_s": work.items / times[name] * 1e3, "unit": work.unit,
               "peak_gib": peak_gib(variant, made, device), **stats[name]}
        if args.profile:
            row["profile_ms"] = profile_ms(variant, device)
        rows.append(row)
    result = {"env": environment(device, args), "model": args.model, "config": config,
              "description": work.description, "rows": rows}
    print_table(result)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=1)
        print(f"wrote {args.json}")
    if args.plot:
        plot(result, args.plot)
        print(f"wrote {args.plot}")
    return 0


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def environment(device: torch.device, args: argparse.Namespace) -> dict[str, Any]:
    return {"fusedops": fusedops.__version__, "torch": torch.__version__, "device": device_name(device),
            "cuda": torch.version.cuda if device.type == "cuda" else None, "threads": torch.get_num_threads(),
            "command": " ".join(["python -m fusedops"] + sys.argv[1:])}


def print_table(result: dict[str, Any]) -> None:
    rows = result["rows"]
    eager = next(r for r in rows if r["variant"] == "eager")
    unit = rows[0]["unit"]
    print(f"\n{'variant':18} {'ms/step':>9} {unit + '/s':>12} {'vs eager':>8} {'peak GiB':>9} {'first loss':>11} "
          f"{'grad norm':>10} {'grad diff':>10}")
    for r in rows:
        peak = "-" if r["peak_gib"] is None else f"{r['peak_gib']:.2f}"
        diff = "-" if r is eager else f"{r['grad_rel_diff']:.2e}"
        print(f"{r['variant']:18} {r['ms']:9.2f} {r['per_s']:12,.0f} {eager['ms'] / r['ms']:7.3f}x {peak:>9} "
              f"{r['loss']:11.5f} {r['grad_norm']:10.4g} {diff:>10}")
    print("(peak: one step's memory above the models and optimizer states; grad diff: the largest relative L2 "
          "difference of a parameter's first gradient to eager's)")
    if "profile_ms" in eager:
        kinds = list(eager["profile_ms"])
        where = "GPU kernel" if result["env"]["cuda"] else "CPU operator"
        print(f"\n{where} time per step by kind (ms):")
        print(f"{'variant':18} {'total':>8} " + " ".join(f"{k:>12}" for k in kinds))
        for r in rows:
            total = sum(r["profile_ms"].values())
            print(f"{r['variant']:18} {total:8.2f} " + " ".join(f"{r['profile_ms'][k]:12.2f}" for k in kinds))


def plot(result: dict[str, Any], path: str) -> None:
    """Throughput and peak memory per variant, side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"][::-1]
    names = [r["variant"] for r in rows]
    panels = [("per_s", f"{rows[0]['unit']} per second")]
    if rows[0]["peak_gib"] is not None:
        panels.append(("peak_gib", "peak GiB above model + optimizer state"))
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 0.5 * len(rows) + 1.8), squeeze=False)
    for ax, (key, label) in zip(axes[0], panels, strict=True):
        bars = ax.barh(names, [r[key] for r in rows], color="#4c72b0")
        ax.bar_label(bars, fmt="{:,.2f}" if key == "peak_gib" else "{:,.0f}", fontsize=8, padding=2)
        ax.set_xlabel(label)
    fig.suptitle(textwrap.fill(result["description"], 60 * len(panels)), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
