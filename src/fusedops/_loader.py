"""Loads the compiled library, after checking that it can run here.

A binary that cannot run would fail deep inside the dynamic loader
("undefined symbol ...", "libcudart.so.12: cannot open shared object file") or,
worse, load and misbehave. The build facts in _build_info.py (written by CMake)
are checked against the running torch first, rule by rule (`rules`), so the user
gets an ImportError that names both sides and the command that fixes it.
"""

from __future__ import annotations

import importlib
from typing import Any, NamedTuple

import torch

from ._accelerator import Autograd, activate
from ._variant import install_command, major_minor, this_platform, variant_for, wheel_exists


def built_for() -> dict[str, Any]:
    from ._build_info import BUILD_INFO

    return dict(BUILD_INFO)


class Rule(NamedTuple):
    name: str
    ok: bool
    reason: str  # why it holds, or what is wrong (naming both sides)


def rules(build: dict[str, Any], torch_version: str, torch_cuda: str | None,
          machine: str | None = None) -> list[Rule]:
    """Each condition under which this binary runs with this torch on `machine`
    (default: this one), with its verdict."""
    target = build["abi_target"]
    found = []
    newer = major_minor(torch_version) >= major_minor(target)
    found.append(Rule("torch version", newer,
                      f"the binary uses torch's stable ABI of {target}, which torch {torch_version} "
                      + ("provides" if newer else "predates")))
    variant = build["variant"]
    if variant == "cpu":
        found.append(Rule("CUDA", True, "a CPU wheel runs under any torch" + _cuda_tensors(torch_cuda, machine)))
        return found
    built = build["cuda"]
    if not torch_cuda:
        found.append(Rule("CUDA major", False,
                          f"the binary needs CUDA {major_minor(built)[0]}, this torch {torch_version} is a CPU build"))
        return found
    same_major = major_minor(torch_cuda)[0] == major_minor(built)[0]
    found.append(Rule("CUDA major", same_major,
                      f"built with CUDA {built}, torch has CUDA {torch_cuda}"))
    if same_major:
        newer_runtime = major_minor(torch_cuda) >= major_minor(built)
        found.append(Rule("CUDA runtime", newer_runtime,
                          f"torch's CUDA runtime {torch_cuda} is "
                          + ("at least" if newer_runtime else "older than") + f" the build's {built}"))
    return found


def _cuda_tensors(torch_cuda: str | None, machine: str | None) -> str:
    """What a CPU wheel's user needs for CUDA tensors under this torch."""
    if not torch_cuda:
        return ""
    needed, machine = variant_for(torch_cuda), machine or this_platform()
    if wheel_exists(needed, machine):
        return f" (CUDA tensors need the {needed} wheel)"
    return f" (CUDA tensors: no {needed} wheel exists for {machine}; see the install command)"


def rule_lines(found: list[Rule]) -> list[str]:
    """The rules as `info` prints them, one a line: name, ok or NO, and the reason."""
    return [f"  {rule.name:14} {'ok' if rule.ok else 'NO'}: {rule.reason}" for rule in found]


def mismatch(build: dict[str, Any], torch_version: str, torch_cuda: str | None,
             machine: str | None = None) -> str | None:
    """Why this binary cannot run with this torch on `machine` (default: this
    one; the failed rules, then every rule as `info` prints it) and how to fix
    it; None if it can."""
    found = rules(build, torch_version, torch_cuda, machine)
    failed = [rule for rule in found if not rule.ok]
    if not failed:
        return None
    base_version = build["version"].split("+")[0]
    why = "; ".join(f"{rule.name}: {rule.reason}" for rule in failed)
    if any(rule.name == "torch version" for rule in failed):
        fix = f'pip install "torch>={build["abi_target"]}"   # fusedops {base_version} needs it'
    else:
        fix = install_command(base_version, variant_for(torch_cuda), build["index_url"], machine)
    return "\n".join([f"fusedops {build['version']} cannot run with torch {torch_version}: {why}.",
                      "compatibility rules:", *rule_lines(found),
                      f"Install what this environment needs:\n    {fix}"])


# How the public ops' autograd runs here (set by load(); see _accelerator.py).
AUTOGRAD: Autograd | None = None


def load() -> None:
    """Import fusedops._C (registering torch.ops.fusedops) or raise a clear
    ImportError, then activate the C++ autograd accelerator where there is one."""
    global AUTOGRAD
    try:
        build = built_for()
    except ImportError as error:
        raise ImportError("fusedops: the package is incomplete (no _build_info); reinstall it") from error
    problem = mismatch(build, torch.__version__, torch.version.cuda)
    if problem:
        raise ImportError(problem)
    try:
        stable = importlib.import_module("fusedops._C")
    except ImportError as error:  # OSError from the loader arrives as ImportError
        needed = variant_for(torch.version.cuda)
        raise ImportError("\n".join([
            f"fusedops {build['version']}: its compiled library failed to load ({error}).",
            f"built for {build['variant']}: torch >= {build['abi_target']}, CUDA {build['cuda'] or 'none'}, "
            f"archs {build['cuda_archs'] or '-'}; this torch {torch.__version__}, CUDA {torch.version.cuda or 'none'}",
            *rule_lines(rules(build, torch.__version__, torch.version.cuda)),
            f"Reinstall the wheel this environment needs ({needed}):",
            f"    {install_command(build['version'].split('+')[0], needed, build['index_url'])}"])) from error
    AUTOGRAD = activate(stable.__file__, build.get("accelerators", []))
