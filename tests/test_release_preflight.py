"""tools/release_preflight.py on recorded shapes of GitHub's REST answers (environments,
deployment branch policies, compare): each misconfiguration fails with its fix."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "release_preflight.py"
_spec = importlib.util.spec_from_file_location("release_preflight", SCRIPT)
rp = importlib.util.module_from_spec(_spec)
sys.modules["release_preflight"] = rp
_spec.loader.exec_module(rp)

TAG = f"v{rp.base_version()}"
SHA = "0" * 40
INDEX_URL = json.loads((rp.ROOT / "tools" / "wheel_matrix.json").read_text())["index_base_url"]
REVIEWERS = {"type": "required_reviewers", "reviewers": [{"type": "User", "reviewer": {"login": "lead"}}]}


def good_api() -> dict:
    api = {f"/compare/main...{SHA}": {"status": "behind"},
           "/pages": {"build_type": "workflow", "html_url": INDEX_URL + "/", "status": "built"}}
    for env in rp.ENVIRONMENTS:
        api[f"/environments/{env}"] = {
            "name": env,
            "deployment_branch_policy": {"protected_branches": False, "custom_branch_policies": True},
            "protection_rules": [REVIEWERS, {"type": "branch_policy"}],
        }
        api[f"/environments/{env}/deployment-branch-policies"] = {
            "total_count": 1, "branch_policies": [{"name": "v*", "type": "tag"}]}
    return api


def run(api: dict, tag: str = TAG, secret_visible: bool = False) -> list[str]:
    return rp.preflight(api.get, tag, SHA, secret_visible)


def test_good_settings_pass():
    assert run(good_api()) == []


def test_pages_default_branch_only_is_the_blocker():
    # GitHub's default for github-pages: a rule for the default branch, no tag rule.
    api = good_api()
    api["/environments/github-pages/deployment-branch-policies"] = {
        "total_count": 1, "branch_policies": [{"name": "main", "type": "branch"}]}
    errors = run(api)
    assert len(errors) == 2
    assert f"no tag rule lets {TAG} deploy" in errors[0] and "add the tag rule v*" in errors[0]
    assert "github-pages: branch rules ['main']" in errors[1]


def test_protected_branches_only_and_all_branches_are_refused():
    api = good_api()
    api["/environments/private-index"]["deployment_branch_policy"] = {
        "protected_branches": True, "custom_branch_policies": False}
    api["/environments/github-pages"]["deployment_branch_policy"] = None
    errors = run(api)
    assert any("private-index" in e and "protected branches only" in e for e in errors)
    assert any("github-pages" in e and "any branch or tag" in e for e in errors)


def test_missing_environment_and_reviewers():
    api = good_api()
    del api["/environments/private-index"]
    api["/environments/github-pages"]["protection_rules"] = [{"type": "required_reviewers", "reviewers": []}]
    errors = run(api)
    assert errors == ["github-pages: no required reviewers: add at least one (Settings > Environments > github-pages)",
                      "environment private-index does not exist: create it (Settings > Environments > private-index)"]


def test_tag_must_be_the_version_and_on_main():
    api = good_api()
    api[f"/compare/main...{SHA}"] = {"status": "diverged"}
    errors = run(api, tag="v9.9.9")
    assert any(e.startswith(f"tag v9.9.9 is not {TAG}") for e in errors)
    assert any("is not on main (diverged)" in e for e in errors)
    # The tag rule v* still lets v9.9.9 deploy: only those two fail.
    assert len(errors) == 2
    del api[f"/compare/main...{SHA}"]
    assert any("unknown commit" in e for e in run(api))


def test_repository_level_index_secret_is_refused():
    errors = run(good_api(), secret_visible=True)
    assert len(errors) == 1 and "readable outside the private-index environment" in errors[0]


def test_pages_must_be_on_built_by_actions_at_the_wheels_url():
    api = good_api()
    api["/pages"] = {"build_type": "legacy", "html_url": "https://fusedops.github.io/fusedops/"}
    errors = run(api)
    assert len(errors) == 2
    assert "source is 'legacy', not 'GitHub Actions'" in errors[0]
    assert errors[1].startswith(f"GitHub Pages serves https://fusedops.github.io/fusedops/, but the wheels name "
                                f"{INDEX_URL} ")
    del api["/pages"]
    assert run(api) == ["GitHub Pages is off: set Source to 'GitHub Actions' (Settings > Pages)"]
