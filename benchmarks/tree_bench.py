"""This tree's `fusedops bench` run against whichever fusedops is importable
(an older build through PYTHONPATH=<a pip --target folder>), so that both
sides of an A/B (benchmarks/ab.py) are timed by the same cases and timer.

    PYTHONPATH=SITE python benchmarks/tree_bench.py [BENCH ARGS]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import fusedops  # the build under test

SOURCE = Path(__file__).resolve().parents[1] / "src" / "fusedops"


def load_tree_module(name: str) -> ModuleType:
    """fusedops.<name> (a module or a package) from this tree's source, in place of the build's own."""
    package = SOURCE / name
    if package.is_dir():
        spec = importlib.util.spec_from_file_location(f"fusedops.{name}", package / "__init__.py",
                                                      submodule_search_locations=[str(package)])
    else:
        spec = importlib.util.spec_from_file_location(f"fusedops.{name}", SOURCE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    setattr(fusedops, name, module)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    load_tree_module("bench_report")
    bench = load_tree_module("bench")
    parser = argparse.ArgumentParser(description="this tree's fusedops bench, of the importable build")
    bench.add_arguments(parser)
    return bench.run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
