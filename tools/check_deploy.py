#!/usr/bin/env python3
"""After the Pages deploy, before the release is published (wheels.yml, job index): the
index is where the wheels say it is, and serves them.

    check_deploy.py PAGE_URL NEW [--wait SECONDS] [--index-url URL --allow-http-loopback]

PAGE_URL is actions/deploy-pages' page_url; NEW this tag's wheels. Fails unless
PAGE_URL is index_base_url of tools/wheel_matrix.json (up to a trailing slash),
the URL every wheel carries (build_info, `info`, the loader's install command),
and the index there lists every new wheel with its sha256 (Pages may serve the
previous site for a while: read again for up to --wait seconds, default 300).
--index-url stands in for index_base_url (the dry run's loopback server).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("index_no_loss", ROOT / "tools" / "index_no_loss.py")
nl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nl)


def index_base_url() -> str:
    return json.loads((ROOT / "tools" / "wheel_matrix.json").read_text(encoding="utf-8"))["index_base_url"]


def missing(base: str, new_dir: Path) -> list[str]:
    """What the index at base does not serve of new_dir's wheels ([]: all, with their sha256)."""
    errors: list[str] = []
    new = nl.collect(new_dir, errors)
    live = nl.live_index(base, errors)
    served = live[0] if live else {}
    return errors + [f"{name}: not served by {base}/ with sha256 {h}" for name, h in sorted(new.items())
                     if served.get(name) != h]


def check(page_url: str, index_url: str, new_dir: Path, wait: float) -> list[str]:
    base = index_url.rstrip("/")
    if page_url.rstrip("/") != base:
        return [f"Pages deployed to {page_url}, but the wheels name {index_url} (index_base_url in "
                "tools/wheel_matrix.json): fix the Pages site (custom domain, repository name) or the matrix"]
    deadline = time.monotonic() + wait
    while True:
        try:
            errors = missing(base, new_dir)
        except OSError as e:
            errors = [f"cannot read {base}/: {e}"]
        if not errors or time.monotonic() >= deadline:
            return errors
        time.sleep(10)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("page_url")
    p.add_argument("new", type=Path)
    p.add_argument("--wait", type=float, default=300)
    p.add_argument("--index-url", help="instead of index_base_url (with --allow-http-loopback)")
    p.add_argument("--allow-http-loopback", action="store_true")
    args = p.parse_args(argv)
    index_url = args.index_url or index_base_url()
    parts = urllib.parse.urlsplit(index_url)
    loopback = args.allow_http_loopback and parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost")
    if parts.scheme != "https" and not loopback:
        print(f"check_deploy: {index_url} is not https", file=sys.stderr)
        return 1
    errors = check(args.page_url, index_url, args.new, args.wait)
    if errors:
        print("\n".join(["check_deploy: the release stays a draft:", *errors]), file=sys.stderr)
        return 1
    print(f"check_deploy: {index_url} serves the {len(list(args.new.rglob('*.whl')))} new wheel(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
