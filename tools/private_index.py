#!/usr/bin/env python3
"""Compare wheels with what the private index serves, before uploading them.

    private_index.py DIST_DIR TO_UPLOAD [--allow-http-loopback]

Env: FUSEDOPS_INDEX_URL (the server's base: <base>/<variant>/simple/ is a variant's
PEP 503 index), TWINE_USERNAME, TWINE_PASSWORD. For each wheel in DIST_DIR, reads
<base>/<variant>/simple/fusedops/ (authenticated): a wheel the server has must have
the same sha256 (from its #sha256= link, else by downloading it); any difference
fails. Writes "VARIANT PATH" lines for the wheels to upload into TO_UPLOAD.

The credentials go to the index's own origin only: the base must be https (plain
http only for 127.0.0.1/localhost with --allow-http-loopback, the local tests), a
redirect to another origin is refused rather than followed (urllib would send the
Authorization header along), and a link on the page outside <base>/<variant>/ is an
error, never fetched.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

MATRIX = Path(__file__).with_name("wheel_matrix.json")


class UnsafeIndexError(Exception):
    """The index cannot be compared with safely."""


def origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, parts.netloc


def check_base(base: str, allow_http_loopback: bool) -> None:
    parts = urllib.parse.urlsplit(base)
    if parts.scheme == "https" and parts.hostname:
        return
    if allow_http_loopback and parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost"):
        return
    raise UnsafeIndexError(f"FUSEDOPS_INDEX_URL {base!r} is not an https URL: the password would travel in clear")


class SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only within the index's origin (scheme, host, port)."""

    def __init__(self, base: str):
        self.origin = origin(base)

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if origin(newurl) != self.origin:
            raise UnsafeIndexError(f"{req.full_url} redirects to {newurl}, another origin: refusing to follow")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def opener(base: str, user: str, password: str):
    auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    built = urllib.request.build_opener(SameOriginRedirects(base))

    def fetch(url: str) -> bytes | None:
        if origin(url) != origin(base):
            raise UnsafeIndexError(f"{url}: not on the index's origin")
        req = urllib.request.Request(url, headers={"Authorization": auth})
        try:
            with built.open(req, timeout=300) as r:
                return r.read()
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise UnsafeIndexError(f"{url}: HTTP {e.code}") from None

    return fetch


def remote_files(fetch, base: str, variant: str) -> tuple[dict[str, tuple[str, str]], bool]:
    """{filename: (url, fragment)} of the variant's project page; False if it is missing."""
    page_url = f"{base}/{variant}/simple/fusedops/"
    page = fetch(page_url)
    files = {}
    for href in re.findall(r'href="([^"]+)"', (page or b"").decode("utf-8")):
        url, _, frag = urllib.parse.urljoin(page_url, html.unescape(href)).partition("#")
        if not url.startswith(f"{base}/{variant}/"):
            raise UnsafeIndexError(f"{page_url} links to {url}, outside {base}/{variant}/")
        files[urllib.parse.unquote(url.rsplit("/", 1)[-1])] = (url, frag)
    return files, page is not None


def compare(dist: Path, base: str, fetch) -> tuple[list[str], list[str]]:
    variants = json.loads(MATRIX.read_text(encoding="utf-8"))["variants"]
    errors, upload, pages = [], [], {}
    for wheel in sorted(dist.glob("*.whl")):
        variant = wheel.name.split("-")[1].partition("+")[2]
        if variant not in variants:
            errors.append(f"{wheel.name}: no variant label of tools/wheel_matrix.json")
            continue
        if variant not in pages:
            pages[variant] = remote_files(fetch, base, variant)
            files, found = pages[variant]
            print(f"{base}/{variant}/simple/fusedops/: {str(len(files)) + ' file(s)' if found else 'missing'}")
        files = pages[variant][0]
        local = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if wheel.name not in files:
            upload.append(f"{variant} {wheel}")
            continue
        url, frag = files[wheel.name]
        theirs = frag[7:] if frag.startswith("sha256=") else hashlib.sha256(fetch(url) or b"").hexdigest()
        if theirs == local:
            print(f"on the server already, identical: {wheel.name}")
        else:
            errors.append(f"{wheel.name}: the server has sha256 {theirs}, this build {local}")
    return errors, upload


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dist", type=Path)
    p.add_argument("to_upload", type=Path)
    p.add_argument("--allow-http-loopback", action="store_true")
    args = p.parse_args(argv)
    for var in ("FUSEDOPS_INDEX_URL", "TWINE_USERNAME", "TWINE_PASSWORD"):
        if not os.environ.get(var):
            print(f"private_index: {var} is empty: set it in the environment private-index "
                  "(docs/publishing.md)", file=sys.stderr)
            return 1
    base = os.environ["FUSEDOPS_INDEX_URL"].rstrip("/")
    try:
        check_base(base, args.allow_http_loopback)
        errors, upload = compare(args.dist, base, opener(base, os.environ["TWINE_USERNAME"],
                                                         os.environ["TWINE_PASSWORD"]))
    except (UnsafeIndexError, OSError) as e:
        print(f"private_index: refusing to upload: {e}", file=sys.stderr)
        return 1
    if errors:
        print("\n".join(["private_index: refusing to upload:", *errors]), file=sys.stderr)
        return 1
    args.to_upload.write_text("".join(f"{u}\n" for u in upload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
