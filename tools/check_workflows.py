#!/usr/bin/env python3
"""Project rules for .github/workflows/*.yml that actionlint and zizmor do not check.

    check_workflows.py [WORKFLOW.yml ...]     (default: every workflow)

- every `run:` script starts with `set -euo pipefail` (a failing command, or the
  first command of a pipe, fails the step);
- every actions/upload-artifact step has `if-no-files-found: error`;
- in a job that signs, deploys or holds secrets (an `environment`, `id-token:
  write`, or `secrets.` in it), every `pip install` is `--require-hashes`.
Needs ruamel.yaml (check-jsonschema brings it). Run by .ci/run and ci.yml's lint.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[1]


def privileged(job: dict) -> bool:
    perms = job.get("permissions") or {}
    return bool(job.get("environment")) or (isinstance(perms, dict) and perms.get("id-token") == "write") \
        or "secrets." in str(job)


def check(path: Path) -> list[str]:
    errors = []
    workflow = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    for job_id, job in (workflow.get("jobs") or {}).items():
        for i, step in enumerate(job.get("steps") or []):
            where = f"{path.name}: {job_id}: step {i + 1} ({step.get('name') or step.get('uses') or 'run'})"
            run = step.get("run")
            if run is not None:
                if run.lstrip().splitlines()[0].strip() != "set -euo pipefail":
                    errors.append(f"{where}: run: does not start with 'set -euo pipefail'")
                if privileged(job):
                    for line in re.findall(r"pip install[^\n]*(?:\\\n[^\n]*)*", run):
                        if "--require-hashes" not in line:
                            errors.append(f"{where}: pip install without --require-hashes in a privileged job")
            if str(step.get("uses", "")).startswith("actions/upload-artifact@"):
                if (step.get("with") or {}).get("if-no-files-found") != "error":
                    errors.append(f"{where}: upload-artifact without if-no-files-found: error")
    return errors


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    errors = [e for p in paths for e in check(p)]
    for e in errors:
        print(f"check_workflows: {e}", file=sys.stderr)
    if not errors:
        print(f"check_workflows: {len(paths)} workflow(s) OK")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
