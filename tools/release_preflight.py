#!/usr/bin/env python3
"""Checks a release tag can publish, before anything is built (wheels.yml, job preflight).

    release_preflight.py --repo OWNER/NAME --tag vX.Y.Z --sha COMMIT

Env: GH_TOKEN (the job's token: contents, actions and pages read), GITHUB_API_URL,
INDEX_SECRET_VISIBLE ("true" when the job, which has no environment, can read
secrets.FUSEDOPS_INDEX_PASSWORD). Fails, with the fix in the message, unless:

- the tag is v<base-version> of pyproject.toml (the wheels' version comes from there);
- the tagged commit is on main (a v* tag on an unmerged commit publishes nothing);
- each publishing environment exists, lets this tag deploy through a tag rule
  (GitHub's default for github-pages is the default branch only: "Tag vX is not
  allowed to deploy"), lets no branch deploy, and has required reviewers;
- the index password is not readable outside the private-index environment;
- GitHub Pages is on, built by GitHub Actions (its source; a branch source would
  serve the branch, not the index job's deploy), at index_base_url of
  tools/wheel_matrix.json, the URL every wheel carries.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from project_version import base_version  # noqa: E402  (no tomllib: Python 3.10 runs the tests)

ENVIRONMENTS = ("github-pages", "private-index")
SETTINGS = "Settings > Environments > {env}"


def github_get(repo: str):
    api = os.environ.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
    headers = {"Accept": "application/vnd.github+json", "Authorization": f"Bearer {os.environ['GH_TOKEN']}",
               "X-GitHub-Api-Version": "2022-11-28"}

    def get(path: str):
        req = urllib.request.Request(f"{api}/repos/{repo}{path}", headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise

    return get


def check_environment(get, env: str, tag: str) -> list[str]:
    where = SETTINGS.format(env=env)
    info = get(f"/environments/{env}")
    if info is None:
        return [f"environment {env} does not exist: create it ({where})"]
    errors = []
    policy = info.get("deployment_branch_policy")
    if not policy or not policy.get("custom_branch_policies"):
        kind = "any branch or tag" if not policy else "protected branches only (no tag)"
        errors.append(f"{env}: deployment branches and tags is '{kind}': choose 'Selected branches and tags' "
                      f"and add the tag rule v* ({where})")
    else:
        rules = (get(f"/environments/{env}/deployment-branch-policies") or {}).get("branch_policies", [])
        tags = [r["name"] for r in rules if r.get("type") == "tag"]
        branches = [r["name"] for r in rules if r.get("type", "branch") == "branch"]
        if not any(fnmatch.fnmatchcase(tag, t) for t in tags):
            errors.append(f"{env}: no tag rule lets {tag} deploy (tag rules: {tags or 'none'}): add the tag "
                          f"rule v* ({where}); else the job fails with 'Tag {tag} is not allowed to deploy'")
        if branches:
            errors.append(f"{env}: branch rules {branches} let a branch deploy (and read its secrets): "
                          f"remove them, keep the tag rule v* only ({where})")
    reviewers = [r for r in info.get("protection_rules", []) if r.get("type") == "required_reviewers"]
    if not any(r.get("reviewers") for r in reviewers):
        errors.append(f"{env}: no required reviewers: add at least one ({where})")
    return errors


def check_pages(get) -> list[str]:
    where = "Settings > Pages"
    pages = get("/pages")
    if pages is None:
        return [f"GitHub Pages is off: set Source to 'GitHub Actions' ({where})"]
    errors = []
    if pages.get("build_type") != "workflow":
        errors.append(f"GitHub Pages' source is {pages.get('build_type')!r}, not 'GitHub Actions': the index job's "
                      f"deploy would not be what is served ({where}: Build and deployment, Source)")
    with open(ROOT / "tools" / "wheel_matrix.json", encoding="utf-8") as f:
        want = json.load(f)["index_base_url"]
    if (pages.get("html_url") or "").rstrip("/") != want.rstrip("/"):
        errors.append(f"GitHub Pages serves {pages.get('html_url')}, but the wheels name {want} (index_base_url in "
                      f"tools/wheel_matrix.json): change one of them ({where}, custom domain; or the matrix)")
    return errors


def preflight(get, tag: str, sha: str, secret_visible: bool) -> list[str]:
    errors = []
    want = f"v{base_version()}"
    if tag != want:
        errors.append(f"tag {tag} is not {want} (base-version in pyproject.toml): bump base-version on main "
                      "and tag that commit, or delete the tag")
    compare = get(f"/compare/main...{sha}")
    if compare is None or compare.get("status") not in ("identical", "behind"):
        status = compare.get("status") if compare else "unknown commit"
        errors.append(f"{tag} ({sha}) is not on main ({status}): merge first, then tag a commit of main")
    for env in ENVIRONMENTS:
        errors += check_environment(get, env, tag)
    errors += check_pages(get)
    if secret_visible:
        errors.append("secrets.FUSEDOPS_INDEX_PASSWORD is readable outside the private-index environment: "
                      "delete the repository/organization secrets FUSEDOPS_INDEX_USER and "
                      "FUSEDOPS_INDEX_PASSWORD and set them in Settings > Environments > private-index")
    return errors


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repo", required=True)
    p.add_argument("--tag", required=True)
    p.add_argument("--sha", required=True)
    args = p.parse_args(argv)
    visible = os.environ.get("INDEX_SECRET_VISIBLE", "")
    if visible not in ("true", "false"):
        print("release_preflight: INDEX_SECRET_VISIBLE must be true or false", file=sys.stderr)
        return 1
    errors = preflight(github_get(args.repo), args.tag, args.sha, visible == "true")
    for e in errors:
        print(f"::error::{e}")
    if not errors:
        print(f"release_preflight: {args.tag} ({args.sha}) may publish")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
