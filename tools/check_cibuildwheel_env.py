#!/usr/bin/env python3
"""Evaluate tools/cibuildwheel.toml's `environment` the way cibuildwheel does, with its
own option reader and parser, in a clean environment (the variant's FUSEDOPS_* / CUDA_*
names only, as wheels.yml passes them), and check what before-all and the build see.

    check_cibuildwheel_env.py before-all     /opt/fusedops-cuda must not exist yet
    check_cibuildwheel_env.py build HOST_CXX /opt/fusedops-cuda/host-cxx holds HOST_CXX
    check_cibuildwheel_env.py repair VARIANT PLATFORM WHEEL DEST_DIR PYTHON_BIN
        run the repair-wheel-command as cibuildwheel runs it for that (variant, platform):
        its placeholders filled by cibuildwheel's own prepare_command, `sh -c` in the
        project, with the `environment` the build sees and PYTHON_BIN (the build
        Python's folder) first on PATH, and REPAIR_TOOLS if set here (where
        repair_wheel.sh keeps its tools); its exit status (.ci/run's release dry run)

cibuildwheel evaluates `environment` before before-all as well as before each build.
Before before-all, tools/install_cuda_toolkit.sh has not written host-cxx yet; any
CUDAHOSTCXX then is taken by it as the caller's choice over the gcc <= 13 that CUDA
12.4 needs (in manylinux_2_28 `g++` is gcc 14), so it must be empty there. In the build
it must be what install_cuda_toolkit.sh chose. Also: every command cibuildwheel runs
through a shell that pipes sets pipefail first (else the pipe's status is its last
command's). Needs cibuildwheel importable (tools/check_cibuildwheel_config.sh runs it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cibuildwheel.errors import FatalError
from cibuildwheel.options import CommandLineArguments, compute_options
from cibuildwheel.util.helpers import prepare_command

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "tools" / "cibuildwheel.toml"
PREFIX = Path("/opt/fusedops-cuda")
IDENTIFIER = "cp310-manylinux_x86_64"  # the build state's checks (the x86_64 image's paths)
# What a manylinux_2_28 container starts with, plus nothing of this machine.
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/root"}


def variants() -> list[str]:
    return sorted(json.loads((ROOT / "tools" / "wheel_matrix.json").read_text())["variants"])


def variant_env(variant: str, platform: str = "x86_64") -> dict[str, str]:
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "wheel_matrix.py"), "--variant", variant,
                          "--platform", platform, "--format", "env"], check=True, capture_output=True, text=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if line)


def build_options(env: dict[str, str], identifier: str = IDENTIFIER):
    args = CommandLineArguments.defaults()
    args = type(args)(**{**vars(args), "platform": "linux", "config_file": str(CONFIG), "package_dir": ROOT})
    return compute_options(platform="linux", command_line_arguments=args, env=env).build_options(identifier)


def repair(variant: str, platform: str, wheel: str, dest_dir: str, python_bin: str) -> int:
    passed = variant_env(variant, platform)
    opts = build_options({**BASE_ENV, **passed}, f"cp310-manylinux_{platform}")
    env = opts.environment.as_dictionary({**BASE_ENV, **passed})
    env["PATH"] = f"{python_bin}:{env['PATH']}"  # cibuildwheel's build venv comes first
    if "REPAIR_TOOLS" in os.environ:
        env["REPAIR_TOOLS"] = os.environ["REPAIR_TOOLS"]
    command = prepare_command(opts.repair_command, wheel=wheel, dest_dir=dest_dir, package=ROOT, project=ROOT)
    print(f"cibuildwheel's repair for {variant} on {platform}: sh -c {command!r}", flush=True)
    return subprocess.run(["sh", "-c", command], env=env, cwd=ROOT, check=False).returncode


def check(stage: str, want_host_cxx: str) -> list[str]:
    errors = []
    for variant in variants():
        passed = variant_env(variant)
        try:
            opts = build_options({**BASE_ENV, **passed})
        except (Exception, FatalError) as e:  # FatalError (ConfigurationError) is a BaseException
            errors.append(f"{variant}: cibuildwheel cannot evaluate the configuration: {e}")
            continue
        # environment-pass: cibuildwheel hands these into the container before evaluating.
        env = opts.environment.as_dictionary({**BASE_ENV, **passed})
        got = env.get("CUDAHOSTCXX", "")
        print(f"{variant} {stage}: CUDAHOSTCXX={got!r} CUDA_HOME={env.get('CUDA_HOME')!r}")
        if got != want_host_cxx:
            errors.append(f"{variant}: {stage} sees CUDAHOSTCXX={got!r}, want {want_host_cxx!r}"
                          + (" (install_cuda_toolkit.sh would take it over its gcc <= 13)" if stage == "before-all" else ""))
        for name in ("before_all", "before_build", "before_test", "test_command", "repair_command"):
            command = getattr(opts, name) or ""
            if "|" in command.replace("||", "") and not command.startswith("set -o pipefail"):
                errors.append(f"{variant}: {name} has a pipe but does not start with 'set -o pipefail'")
    return errors


def main(argv: list[str]) -> int:
    if argv[:1] == ["before-all"] and len(argv) == 1:
        if PREFIX.exists():
            print(f"{PREFIX} exists here: run the before-all check where it does not", file=sys.stderr)
            return 2
        errors = check("before-all", "")
    elif argv[:1] == ["build"] and len(argv) == 2:
        if (PREFIX / "host-cxx").read_text().strip() != argv[1]:
            print(f"{PREFIX}/host-cxx does not hold {argv[1]}", file=sys.stderr)
            return 2
        errors = check("build", argv[1])
    elif argv[:1] == ["repair"] and len(argv) == 6:
        return repair(*argv[1:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for e in errors:
        print(f"check_cibuildwheel_env: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
