"""python -m fusedops info | check | bench"""

from __future__ import annotations

import argparse
import platform
import sys

import torch

import fusedops
from fusedops import _loader
from fusedops._variant import install_command, variant_tag


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
    needed = variant_tag(torch.__version__, torch.version.cuda)
    problem = _loader.mismatch(build, torch.__version__, torch.version.cuda)
    print(f"fusedops {build['version']}")
    print("built for")
    print(f"  torch          {build['torch']}")
    print(f"  CUDA           {build['torch_cuda'] or 'none (CPU-only build)'}")
    print(f"  CUDA archs     {build['cuda_archs'] or '-'}")
    compilers = ", ".join(c for c in (build["compiler"], build["cuda_compiler"]) if c)
    print(f"  compilers      {compilers}")
    print(f"  build type     {build['build_type']}")
    print("this environment")
    print(f"  Python         {platform.python_version()} ({sys.executable})")
    print(f"  torch          {torch.__version__}")
    print(f"  CUDA (torch)   {torch.version.cuda or 'none'}")
    parallel = None if fusedops.load_error else getattr(fusedops._C, "intra_op_parallel", None)
    if parallel is not None:
        threads = torch.get_num_threads() if parallel else 1
        print(f"  CPU kernels    on {threads} thread{'s' if threads > 1 else ''}")
    ok = problem is None
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            capability = torch.cuda.get_device_capability(index)
            support = arch_support(build["cuda_archs"], capability) if build["cuda_archs"] else None
            name = f"{torch.cuda.get_device_name(index)}, sm_{capability[0]}{capability[1]}"
            print(f"  GPU {index}          {name}: {support or 'NOT SUPPORTED by this build'}")
            ok = ok and (support is not None or not build["torch_cuda"])
    else:
        print("  GPU            none visible")
    print(f"needed variant   {needed}")
    print(f"install command  {install_command(build['version'].split('+')[0], needed)}")
    if problem:
        print(f"\nMISMATCH: {problem}")
    elif fusedops.load_error:
        print(f"\nLOAD ERROR: {fusedops.load_error}")
        ok = False
    print("\nstatus           " + ("OK" if ok else "NOT USABLE"))
    return 0 if ok else 1


def check() -> int:
    """A self-test on this machine: each op against torch on every device present."""
    if fusedops.load_error:
        raise fusedops.load_error
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    failures = 0
    for device in devices:
        for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            a = torch.randn(257, 33, device=device, dtype=dtype)
            b = torch.randn(33, device=device, dtype=dtype)
            good = torch.equal(fusedops.add(a, b), torch.add(a, b))
            failures += not good
            print(f"add  {device:5} {dtype!s:15} {'ok' if good else 'FAILED'}")
    print("check: " + ("all passed" if not failures else f"{failures} FAILED"))
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fusedops", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("info", help="build facts, this environment, and whether they match")
    commands.add_parser("check", help="a self-test of every op on this machine")
    bench = commands.add_parser("bench", help="benchmarks against eager PyTorch and torch.compile")
    from fusedops import bench as bench_module

    bench_module.add_arguments(bench)
    args = parser.parse_args(argv)
    if args.command == "info":
        return info()
    if args.command == "check":
        return check()
    if fusedops.load_error:
        raise fusedops.load_error
    return bench_module.run(args)


if __name__ == "__main__":
    sys.exit(main())
