#!/usr/bin/env python3
"""Expand tools/wheel_matrix.json: one wheel per (variant, platform): cpu, cu12 and
cu13 for Linux x86_64, cpu and cu13 for Linux aarch64.

    wheel_matrix.py --github                 {"include": [...]}: one build job per (variant, platform)
    wheel_matrix.py --github-tests           {"include": [...]}: one entry per (variant, platform, test torch)
    wheel_matrix.py --list                   human-readable table, every platform
    wheel_matrix.py --variant cu13           shell lines (eval-able) for one (variant, platform)
    wheel_matrix.py --variant cu13 --format env      raw KEY=value (for $GITHUB_ENV)
    --platform x86_64|aarch64|all            with --github, --github-tests, --variant: which
                                             platform (default: this machine's; `all` is not
                                             for --variant)
    wheel_matrix.py --accelerators           the torch release each C++ autograd accelerator
                                             (one per torch minor, in every wheel) is built from
    wheel_matrix.py --pythons                the Pythons the wheels are tested under, oldest first
    wheel_matrix.py --variant cu13 --check-torch [--torch-version V] [--torch-index-url URL]
        the torch installed in this Python is one this variant builds against /
        serves: same CUDA major (None for cpu), a CUDA runtime minor (torch.version.cuda
        and the nvidia-cuda-runtime pin in torch's metadata) >= the toolkit's, and
        the version and local label asked for; exit 1 naming every mismatch

Standard library only: CI runs it before any dependency is installed.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_MATRIX = Path(__file__).with_name("wheel_matrix.json")
VARIANTS = ("cpu", "cu12", "cu13")  # the order every output uses
PLATFORMS = ("x86_64", "aarch64")  # Linux `uname -m`; also the order of the outputs

_TORCH_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
_CUDA_RE = re.compile(r"^(\d+)\.(\d+)$")
_ARCH_RE = re.compile(r"^\d+\.\d+[af]?(\+PTX)?$")
_VARIANT_RE = re.compile(r"^(cpu|cu(\d+))$")
_INDEX_LABEL_RE = re.compile(r"^(cpu|cu\d{3})$")


class MatrixError(ValueError):
    """The matrix file is inconsistent."""


def torch_key(version: str) -> tuple[int, int, int]:
    m = _TORCH_RE.match(version)
    if not m:
        raise MatrixError(f"torch version must be X.Y.Z, got {version!r}")
    return int(m[1]), int(m[2]), int(m[3])


def check_archs(archs: str) -> list[str]:
    items = re.split(r"[;\s]+", archs.strip())
    if not items or not all(_ARCH_RE.match(a) for a in items):
        raise MatrixError(f"bad arch list {archs!r}")
    # Only the newest arch carries PTX: it is the forward-compatibility fallback.
    if not items[-1].endswith("+PTX") or any(a.endswith("+PTX") for a in items[:-1]):
        raise MatrixError(f"arch list {archs!r}: exactly the last arch must be +PTX")
    nums = [tuple(int(x) for x in a.split("+")[0].rstrip("af").split(".")) for a in items]
    if nums != sorted(set(nums)):
        raise MatrixError(f"arch list {archs!r} must be ascending without duplicates")
    return items


def index_label(url: str) -> str:
    """'https://download.pytorch.org/whl/cu128' -> 'cu128': torch's local version label there."""
    label = urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]
    if not _INDEX_LABEL_RE.match(label):
        raise MatrixError(f"torch index URL {url!r} does not end in /cpu or /cuNNN")
    return label


def load(path: Path = DEFAULT_MATRIX) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def this_platform() -> str:
    import platform

    machine = platform.machine()
    return {"arm64": "aarch64", "AMD64": "x86_64"}.get(machine, machine)


def _check_toolchain(name: str, where: str, spec: dict, archs: str | None, major: str, label: str) -> None:
    """A (variant, platform)'s CUDA fields: null for cpu; for cuNN a CUDA NN.N,
    an exact toolkit release of it, valid archs, and a torch index whose CUDA
    runtime satisfies the loader's rule (same major, minor >= the build's)."""
    cuda, toolkit = spec.get("cuda"), spec.get("toolkit")
    if name == "cpu":
        if cuda or toolkit or archs:
            raise MatrixError("cpu: cuda, toolkit and archs must be null")
        if label != "cpu":
            raise MatrixError(f"cpu: torch index {spec['torch_index_url']} is not PyTorch's CPU index")
        return
    c = _CUDA_RE.match(cuda or "")
    if not c or c[1] != major:
        raise MatrixError(f"{where}: cuda must be {major}.N, got {cuda!r}")
    if not (toolkit or "").startswith(cuda + "."):
        raise MatrixError(f"{where}: toolkit pin must be an exact {cuda}.N release, got {toolkit!r}")
    check_archs(archs or "")
    if not label.startswith(f"cu{major}") or int(label[2 + len(major):]) < int(c[2]):
        raise MatrixError(f"{where}: torch index {label} is not CUDA {major}.x >= {cuda}")


def _check_torches(name: str, build_torch: str, tests: list[str]) -> None:
    """build_torch and test_torch parse; tests are given, distinct and none older than the build's."""
    for v in [build_torch, *tests]:
        torch_key(v)
    if not tests:
        raise MatrixError(f"{name}: test_torch is empty")
    if len(set(tests)) != len(tests):
        raise MatrixError(f"{name}: duplicate test_torch entries")
    if torch_key(min(tests, key=torch_key)) < torch_key(build_torch):
        raise MatrixError(f"{name}: a test torch is older than build_torch {build_torch}")


def expand(data: dict) -> list[dict]:
    """One dict per (variant, platform), in VARIANTS then PLATFORMS order; every
    inconsistency is a MatrixError."""
    variants = data["variants"]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        raise MatrixError(f"unknown variant(s) {unknown}: variants are {', '.join(VARIANTS)}")
    base = data["index_base_url"].rstrip("/")
    entries = []
    for name in (n for n in VARIANTS if n in variants):
        spec = variants[name]
        m = _VARIANT_RE.match(name)
        assert m
        label = index_label(spec["torch_index_url"])
        platforms = spec.get("platforms") or {}
        unknown = sorted(set(platforms) - set(PLATFORMS))
        if unknown or not platforms:
            raise MatrixError(f"{name}: platforms must be some of {', '.join(PLATFORMS)}, got {sorted(platforms)}")
        for platform in (p for p in PLATFORMS if p in platforms):
            entries.append(_entry(data, name, m[2], label, platform, platforms[platform], base))
    if not entries:
        raise MatrixError("no variants")
    return entries


def _entry(data: dict, name: str, major: str, label: str, platform: str, per_platform: dict, base: str) -> dict:
    """The build and test facts of one (variant, platform), checked."""
    spec = data["variants"][name]
    where = f"{name} on {platform}"
    archs = per_platform.get("archs")
    _check_toolchain(name, where, spec, archs, major, label)
    build_torch, tests = spec["build_torch"], per_platform.get("test_torch") or []
    _check_torches(where, build_torch, tests)
    return {
        "variant": name,
        "platform": platform,
        "torch": build_torch,
        "cuda": spec.get("cuda") or "cpu",
        "cuda_major": major or "",
        "cuda_toolkit": spec.get("toolkit") or "",
        "fusedops_cuda": "OFF" if name == "cpu" else "ON",
        "archs": archs or "",
        "torch_index_url": spec["torch_index_url"],
        "torch_label": label,
        "test_torch": sorted(tests, key=torch_key),
        "python": data["python_build"],
        "python_min": data["python_min"],
        "manylinux": data["manylinux"],
        "wheel_platform": f"{data['manylinux']}_{platform}",
        "cibw_build": f"{data['python_build']}-manylinux_{platform}",
        "find_links_page": f"{name}.html",
        "index_url": f"{base}/{name}/simple",
    }


def accelerator_torches(data: dict) -> list[str]:
    """The torch releases the accelerators are built from ("accelerators":
    minor -> release, tools/build_accelerators.sh), checked: each release is of
    its minor, and every minor a wheel is tested under has one."""
    found = data["accelerators"]
    for minor, version in found.items():
        if not _TORCH_RE.match(version) or ".".join(version.split(".")[:2]) != minor:
            raise MatrixError(f"accelerators: {minor!r} -> {version!r}: not a release of torch {minor}")
    for name, spec in data["variants"].items():
        for platform, per_platform in spec["platforms"].items():
            for version in per_platform["test_torch"]:
                if ".".join(version.split(".")[:2]) not in found:
                    raise MatrixError(f"{name} on {platform}: tested under torch {version}, "
                                      "but no accelerator is built for its minor")
    return sorted(found.values(), key=torch_key)


def pythons(data: dict) -> list[str]:
    """The Pythons ("pythons"), checked: X.Y, ascending, from python_min, which python_build is."""
    found = data["pythons"]
    keys = [tuple(int(x) for x in p.split(".")) if re.fullmatch(r"3\.\d+", p) else None for p in found]
    if not found or None in keys or keys != sorted(set(keys)) or found[0] != data["python_min"]:
        raise MatrixError(f"pythons {found}: must be 3.N, ascending, the first python_min {data['python_min']}")
    if data["python_build"] != "cp" + data["python_min"].replace(".", ""):
        raise MatrixError(f"python_build {data['python_build']} is not python_min {data['python_min']}")
    return found


def test_entries(entries: list[dict]) -> list[dict]:
    """One entry per (variant, platform, torch it is tested under)."""
    return [
        {
            "variant": e["variant"],
            "platform": e["platform"],
            "torch": t,
            "cuda": e["cuda"],
            "torch_index_url": e["torch_index_url"],
            "torch_label": e["torch_label"],
        }
        for e in entries
        for t in e["test_torch"]
    ]


def env_lines(entry: dict, quote: bool = True) -> list[str]:
    pairs = {
        "FUSEDOPS_VARIANT": entry["variant"],
        "FUSEDOPS_PLATFORM": entry["platform"],
        "TORCH_VERSION": entry["torch"],
        "TORCH_INDEX_URL": entry["torch_index_url"],
        "CUDA_VERSION": entry["cuda"],
        "CUDA_TOOLKIT_VERSION": entry["cuda_toolkit"],
        "FUSEDOPS_CUDA": entry["fusedops_cuda"],
        "FUSEDOPS_CUDA_ARCHS": entry["archs"],
        "TEST_TORCH_VERSIONS": " ".join(entry["test_torch"]),
    }
    q = shlex.quote if quote else str
    return [f"{k}={q(v)}" for k, v in pairs.items()]


def table(entries: list[dict]) -> str:
    cols = ["variant", "platform", "torch", "cuda_toolkit", "torch_label", "archs", "test_torch"]
    rows = [["variant", "platform", "build torch", "toolkit", "torch index", "archs", "tested under"]]
    for e in entries:
        rows.append([" ".join(e[c]) if isinstance(e[c], list) else (e[c] or "-") for c in cols])
    widths = [max(len(r[i]) for r in rows) for i in range(len(cols))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def torch_mismatches(
    entry: dict,
    torch_version: str,
    torch_cuda: str | None,
    requires: list[str],
    want_version: str | None = None,
    want_label: str | None = None,
    machine: str | None = None,
) -> list[str]:
    """Why this torch is not one `entry`'s wheel is built against or serves ([] if it is)."""
    errors = []
    if machine is not None and machine != entry["platform"]:
        errors.append(f"this machine is {machine}, the wheel is for {entry['platform']}")
    base, _, label = torch_version.partition("+")
    if want_version and base != want_version:
        errors.append(f"torch is {torch_version}, the variant needs {want_version}")
    if want_label and label != want_label:
        errors.append(f"torch is {torch_version}, not a +{want_label} build (from the variant's index only)")
    if entry["variant"] == "cpu":
        if want_label == "cpu" and torch_cuda is not None:
            errors.append(f"torch.version.cuda is {torch_cuda}, the cpu variant builds against a CPU torch")
        return errors
    major, minor = (int(x) for x in entry["cuda"].split("."))
    if torch_cuda is None:
        return [*errors, f"torch has no CUDA, the {entry['variant']} variant needs CUDA {major}.x"]
    t = [int(x) for x in torch_cuda.split(".")[:2]]
    if t[0] != major or t[1] < minor:
        errors.append(f"torch.version.cuda is {torch_cuda}, the {entry['variant']} variant needs {major}.x >= {major}.{minor}")
    # The CUDA runtime torch's metadata pins (nvidia-cuda-runtime-cu12==12.8.90,
    # nvidia-cuda-runtime==13.0.96 or cuda-toolkit[...]==13.0.2): where there is
    # one, it must agree with torch.version.cuda's rule too.
    for req in requires:
        pin = re.match(r"^(?:nvidia-cuda-runtime(?:-cu\d+)?|cuda-toolkit(?:\[[^]]*\])?)\s*==\s*(\d+)\.(\d+)", req)
        if pin and (int(pin[1]) != major or int(pin[2]) < minor):
            errors.append(f"torch's metadata requires {req.split(';')[0].strip()}: not CUDA {major}.x >= {major}.{minor}")
    return errors


def check_installed_torch(entry: dict, want_version: str | None, index_url: str | None) -> int:
    import importlib.metadata

    import torch  # the Python running this script must have it

    requires = importlib.metadata.requires("torch") or []
    want_label = index_label(index_url) if index_url else None
    print(f"torch {torch.__version__} CUDA {torch.version.cuda} at {torch.__file__}")
    errors = torch_mismatches(entry, torch.__version__, torch.version.cuda, requires, want_version, want_label,
                              this_platform())
    for e in errors:
        print(f"wheel_matrix: {entry['variant']}: {e}", file=sys.stderr)
    return 1 if errors else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--matrix", type=Path, default=DEFAULT_MATRIX)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--github", action="store_true", help="GitHub Actions build matrix JSON")
    mode.add_argument("--github-tests", action="store_true", help="GitHub Actions test matrix JSON")
    mode.add_argument("--list", action="store_true", help="human-readable table")
    mode.add_argument("--accelerators", action="store_true", help="torch releases the accelerators are built from")
    mode.add_argument("--pythons", action="store_true", help="the Pythons the wheels are tested under")
    mode.add_argument("--variant", metavar="NAME", help="one variant: cpu, cu12, cu13")
    p.add_argument("--platform", choices=[*PLATFORMS, "all"],
                   help="with --github, --github-tests, --variant: the platform (default: this machine's)")
    p.add_argument(
        "--format",
        choices=["shell", "env"],
        default="shell",
        help="with --variant: shell-quoted (eval) or raw KEY=value ($GITHUB_ENV)",
    )
    p.add_argument("--check-torch", action="store_true", help="with --variant: check the installed torch")
    p.add_argument("--torch-version", help="with --check-torch: the X.Y.Z torch must be")
    p.add_argument("--torch-index-url", help="with --check-torch: torch must carry this index's local label")
    args = p.parse_args(argv)
    if (args.check_torch or args.torch_version or args.torch_index_url) and not args.variant:
        p.error("--check-torch needs --variant")
    platform = args.platform or this_platform()
    if args.variant and platform == "all":
        p.error("--variant takes one platform")

    try:
        data = load(args.matrix)
        entries = expand(data)
        accelerators = accelerator_torches(data)
        python_list = pythons(data)
    except (OSError, KeyError, TypeError, MatrixError, json.JSONDecodeError) as e:
        print(f"wheel_matrix: {args.matrix}: {e!r}", file=sys.stderr)
        return 2

    on_platform = [e for e in entries if platform in ("all", e["platform"])]
    if args.github:
        print(json.dumps({"include": on_platform}, separators=(",", ":")))
    elif args.github_tests:
        print(json.dumps({"include": test_entries(on_platform)}, separators=(",", ":")))
    elif args.list:
        print(table(entries))
    elif args.accelerators:
        print(" ".join(accelerators))
    elif args.pythons:
        print(" ".join(python_list))
    else:
        found = [e for e in on_platform if e["variant"] == args.variant]
        if not found:
            known = " ".join(e["variant"] for e in on_platform)
            print(f"wheel_matrix: no variant {args.variant!r} on {platform}; {platform} has: {known}", file=sys.stderr)
            return 2
        if args.check_torch:
            return check_installed_torch(found[0], args.torch_version, args.torch_index_url)
        print("\n".join(env_lines(found[0], quote=args.format == "shell")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
