"""python -m fusedops info | check | bench [--model llama|vit]"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import platform
import sys
from collections.abc import Callable

import torch

import fusedops
import fusedops.ops
from fusedops import _loader
from fusedops._variant import WHEELS, install_command, this_platform, variant_for, wheel_exists


def arch_support(archs: str, capability: tuple[int, int]) -> str | None:
    """How a binary with CUDA arch list `archs` runs on a GPU of `capability`:
    its own machine code (same major, lower or equal minor), PTX compiled by the
    driver (any older arch with +PTX), or not at all (None)."""
    major, minor = capability
    entries = [a.strip() for a in archs.replace(" ", ";").split(";") if a.strip()]
    best_ptx = None
    for entry in entries:
        number = entry.removesuffix("+PTX").rstrip("af")
        arch_major, arch_minor = (int(x) for x in number.split("."))
        if arch_major == major and arch_minor <= minor:
            return f"sm_{arch_major}{arch_minor} machine code"
        if entry.endswith("+PTX") and (arch_major, arch_minor) <= capability:
            best_ptx = f"compute_{arch_major}{arch_minor} PTX, compiled by the driver at load"
    return best_ptx


def info() -> int:
    build = fusedops.build_info()
    needed, machine = variant_for(torch.version.cuda), this_platform()
    print(f"fusedops {build['version']}")
    print("built for")
    print(f"  variant        {build['variant']} (one wheel per CUDA major serves every torch >= "
          f"{build['abi_target']}: it uses torch's stable ABI)")
    print(f"  built against  torch {build['torch']}, CUDA {build['cuda'] or 'none'}")
    print(f"  CUDA kernels   {build['cuda_kernels']}")
    print(f"  CUDA archs     {build['cuda_archs'] or '-'}")
    compilers = ", ".join(c for c in (build["compiler"], build["cuda_compiler"]) if c)
    print(f"  compilers      {compilers}")
    print(f"  build type     {build['build_type']}")
    print(f"  C++ autograd   for torch {' '.join(build['accelerators']) or '- (none carried)'}")
    print(f"  index          {build['index_url']}")
    print("this environment")
    print(f"  platform       Linux {machine} (fusedops wheels here: {', '.join(WHEELS.get(machine, ())) or 'none'})")
    print(f"  Python         {platform.python_version()} ({sys.executable})")
    print(f"  torch          {torch.__version__}")
    print(f"  CUDA (torch)   {torch.version.cuda or 'none'}")
    print(f"  CPU threads    {torch.get_num_threads()} (torch's intra-op pool, which the CPU kernels use)")
    print(f"  autograd       {build['autograd']}")
    gpus_ok = True
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            capability = torch.cuda.get_device_capability(index)
            support = arch_support(build["cuda_archs"], capability) if build["cuda_archs"] else None
            name = f"{torch.cuda.get_device_name(index)}, sm_{capability[0]}{capability[1]}"
            print(f"  GPU {index}          {name}: {support or 'NOT SUPPORTED by this build'}")
            gpus_ok = gpus_ok and (support is not None or build["variant"] == "cpu")
    else:
        print("  GPU            none visible")
    print("can it run here")
    print("\n".join(_loader.rule_lines(_loader.rules(build, torch.__version__, torch.version.cuda))))
    exists = wheel_exists(needed, machine)
    print(f"needed variant   {needed}" + ("" if exists else f" (no such wheel exists for {machine})"))
    print(f"install command  {install_command(build['version'].split('+')[0], needed, build['index_url'], machine)}")
    if needed != build["variant"]:
        what = f"the {needed} wheel (the install command above)" if exists else "what the install command above says"
        print(f"\nNOTE: this {build['variant']} wheel runs here, but CUDA tensors need {what}")
    print("\nstatus           " + ("OK" if gpus_ok else "NOT USABLE"))
    return 0 if gpus_ok else 1


def _check_cases(device: str, dtype: torch.dtype) -> list[tuple[str, Callable, Callable, dict, tuple]]:
    """(op, fusedops call, torch reference, inputs, clamp bounds) of every op
    module in fusedops.ops (fusedops/ops/<op>.py for the function fusedops.<op>;
    its `check_case`), on fresh random data."""

    def randn(*shape):
        return torch.randn(*shape, device=device, dtype=dtype)

    cases = []
    for module_info in pkgutil.iter_modules(fusedops.ops.__path__):
        op = module_info.name
        if op.startswith("_"):  # a helper module, not an op
            continue
        inputs, options, reference, bounds = importlib.import_module(f"fusedops.ops.{op}").check_case(randn)
        cases.append((op, _public_call(op, options), reference, inputs, bounds))
    return cases


def _public_call(op: str, options: dict) -> Callable:
    # fusedops.<op> is looked up at each call, so that a test can put a broken op in its place.
    return lambda **tensors: getattr(fusedops, op)(**tensors, **options)


_CHECK_TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 5e-2, torch.float32: 1e-4, torch.float64: 1e-10}


def _outputs(result) -> tuple[torch.Tensor, ...]:
    """An op's result as a tuple of outputs (rotary has two)."""
    return result if isinstance(result, tuple) else (result,)


def _check_one(ours: Callable, reference: Callable, inputs: dict, bounds: tuple) -> tuple[bool, bool]:
    """(forward matches, backward matches) of `ours` against `reference` computed
    in float64 from the same inputs, output by output. Gradients are compared
    away from the clamp `bounds`, where rounding may legitimately put an element
    on either side."""
    dtype = next(iter(inputs.values())).dtype
    tol = _CHECK_TOLERANCE[dtype]
    leaves = {k: v.detach().clone().requires_grad_() for k, v in inputs.items()}
    ref_leaves = {k: v.detach().double().requires_grad_() for k, v in inputs.items()}
    outs = _outputs(ours(**leaves))
    expected = _outputs(reference(**ref_leaves))
    # Each result is of the inputs' dtype, or of the reference's in the inputs'
    # dtype (a loss is float32 for the half types; rotary's float32 tables
    # promote its reference, not fusedops.rotary).
    with torch.no_grad():
        result_dtypes = [(dtype, r.dtype) for r in _outputs(reference(**inputs))]
    forward_ok = len(outs) == len(expected) and all(
        out.dtype in d and torch.allclose(out.double(), e, rtol=tol, atol=tol)
        for out, e, d in zip(outs, expected, result_dtypes, strict=True))
    grad_outs = []
    for e in expected:
        # Where the result is a clamp bound, the reference's gradient is decided in
        # float64 and ours in `dtype`: leave elements near a bound out.
        free = torch.ones_like(e, dtype=torch.bool)
        for bound in bounds:
            free &= (e.detach() - bound).abs() > 4 * tol
        # Both sides get the same incoming gradient, rounded to `dtype` once: a sum of
        # thousands of unrounded values differs from ours by more than `tol` at times.
        grad_outs.append((torch.randn_like(e) * free).to(dtype))
    grads = torch.autograd.grad(outs, list(leaves.values()), grad_outs)
    ref_grads = torch.autograd.grad(expected, list(ref_leaves.values()), [g.double() for g in grad_outs])
    backward_ok = all(g.shape == r.shape and torch.allclose(
        g.double(), r, rtol=tol, atol=tol * max(1.0, r.abs().max().item())) for g, r in zip(grads, ref_grads, strict=True))
    return bool(forward_ok), bool(backward_ok)


def check() -> int:
    """A self-test on this machine: every op, forward and backward, against
    PyTorch in float64, in every floating dtype, on every device present."""
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    failures = 0
    ops = set()
    for device in devices:
        for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            for op, ours, reference, inputs, bounds in _check_cases(device, dtype):
                ops.add(op)
                try:
                    forward_ok, backward_ok = _check_one(ours, reference, inputs, bounds)
                    verdict = " ".join(f"{name} {'ok' if good else 'FAILED'}"
                                       for name, good in (("forward", forward_ok), ("backward", backward_ok)))
                    failed = not (forward_ok and backward_ok)
                except Exception as error:  # an op that raises has failed the check too
                    verdict, failed = f"FAILED: {type(error).__name__}: {error}", True
                failures += failed
                print(f"{op:17} {device:5} {str(dtype).removeprefix('torch.'):9} {verdict}")
    summary = f"{len(ops)} ops ({', '.join(sorted(ops))}) x 4 dtypes, forward and backward, on {' and '.join(devices)}"
    if not torch.cuda.is_available():
        summary += " (no CUDA GPU visible)"
    print(f"check: {summary}: " + ("all passed" if not failures else f"{failures} FAILED"))
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fusedops", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("info", help="build facts, this environment, the compatibility rules and the install command")
    commands.add_parser("check", help="a self-test of every op on this machine")
    bench = commands.add_parser("bench", help="benchmarks against eager PyTorch and torch.compile")
    from fusedops import bench as bench_module
    from fusedops.bench import model as bench_model

    bench_module.add_arguments(bench)
    bench_model.add_arguments(bench)
    args = parser.parse_args(argv)
    if args.command == "info":
        return info()
    if args.command == "check":
        return check()
    return bench_model.run(args) if args.model else bench_module.run(args)


if __name__ == "__main__":
    sys.exit(main())
