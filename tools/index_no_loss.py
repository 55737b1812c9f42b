#!/usr/bin/env python3
"""Refuse to publish an index that loses or changes anything published (wheels.yml, job index).

    index_no_loss.py LIVE_URL OLD NEW SITE [--allow-http-loopback]

LIVE_URL is the index as served now (index_base_url of tools/wheel_matrix.json), OLD
the wheels (and .publish.attestation files) of every release, NEW this tag's, SITE
what tools/make_index.py built from both. Fails unless:

- a new wheel reusing a released name has the same bytes (else: bump base-version);
- every new wheel has a provenance file in SITE (signed by the attest job);
- every wheel the live index lists (name and sha256 from its PEP 503 pages) is on a
  release with those bytes, and every live, released or new wheel is in SITE with
  them;
- every provenance file the live index links (data-provenance) is in SITE with the
  same bytes, and every released attestation is served.
The first deploy (LIVE_URL answers 404) is allowed only while no release has wheels.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ATTESTATION = ".publish.attestation"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def real_name(name: str) -> str:
    """A wheel's name with GitHub's release-asset renaming ('+' -> '.') undone."""
    return re.sub(r"^(fusedops-[0-9.]+)\.(cpu|cu\d+|pt\d+\w+)-", r"\1+\2-", name)


def collect(root: Path, errors: list[str]) -> dict[str, str]:
    """{wheel name: sha256} under root."""
    found = {}
    for p in sorted(root.rglob("*.whl")):
        name = real_name(p.name)
        h = sha256(p)
        if found.setdefault(name, h) != h:
            errors.append(f"{name}: two different files under {root}")
    return found


def fetch(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=120) as r:
            return r.read()
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise


def live_index(base: str, errors: list[str]) -> tuple[dict[str, str], dict[str, bytes]] | None:
    """({wheel: sha256}, {wheel: provenance bytes}) the live index serves; None if it does not exist."""
    top = fetch(base + "/")
    if top is None:
        return None
    wheels, provenance = {}, {}
    variants = sorted(set(re.findall(r'href="([A-Za-z0-9_.-]+)/simple/"', top.decode())))
    if not variants:
        errors.append(f"{base}/ lists no variants")
    for v in variants:
        page_url = f"{base}/{v}/simple/fusedops/"
        page = fetch(page_url)
        if page is None:
            errors.append(f"{page_url} is missing")
            continue
        for anchor in re.findall(r"<a [^>]*>", page.decode()):
            href = html.unescape(re.search(r'href="([^"]+)"', anchor)[1])
            path, _, frag = href.partition("#")
            name = urllib.parse.unquote(path.rsplit("/", 1)[-1])
            if not frag.startswith("sha256="):
                errors.append(f"{v}: {name} has no sha256 in the live index")
            elif wheels.setdefault(name, frag[7:]) != frag[7:]:
                errors.append(f"{name}: two sha256 in the live index")
            prov = re.search(r'data-provenance="([^"]+)"', anchor)
            if prov:
                data = fetch(urllib.parse.urljoin(page_url, html.unescape(prov[1])))
                if data is None:
                    errors.append(f"{name}: the live index links a provenance file it does not serve")
                else:
                    provenance[name] = data
    return wheels, provenance


def check(base: str, old_dir: Path, new_dir: Path, site_dir: Path) -> list[str]:
    errors: list[str] = []
    old, new, site = collect(old_dir, errors), collect(new_dir, errors), collect(site_dir, errors)
    for name in sorted(new.keys() & old.keys()):
        if new[name] != old[name]:
            errors.append(f"{name}: released before with other content; bump base-version in pyproject.toml")
    served = {p.name[: -len(".provenance")] for p in site_dir.rglob("*.whl.provenance")}
    for name in sorted(new.keys() - served):
        errors.append(f"{name}: a new wheel without provenance in the site (no attestation from the attest job)")
    attested = {real_name(p.name[: -len(ATTESTATION)]) for p in old_dir.rglob(f"*.whl{ATTESTATION}")}
    for name in sorted(attested - served):
        errors.append(f"{name}: its release has an attestation that the site does not serve")

    live = live_index(base, errors)
    if live is None:
        print(f"{base}/ does not exist: first deploy")
        if old:
            errors.append(f"{base}/ is missing although releases have wheels: restore it first")
        live = {}, {}
    published, provenance = live
    print(f"live index: {len(published)} wheel(s), {len(provenance)} with provenance; "
          f"releases: {len(old)}; new: {len(new)}; site: {len(site)}")
    for name, h in sorted(published.items()):
        released = old.get(name) or new.get(name)
        if released is None:
            errors.append(f"{name}: served by the live index but on no release (deleted asset?)")
        elif released != h:
            errors.append(f"{name}: the live index has sha256 {h}, the release {released}")
    for name, h in sorted({**published, **old, **new}.items()):
        if site.get(name) != h:
            errors.append(f"{name}: not in the new site with sha256 {h}")
    site_prov = {p.name[: -len(".provenance")]: p.read_bytes() for p in site_dir.rglob("*.whl.provenance")}
    for name, data in sorted(provenance.items()):
        if site_prov.get(name) != data:
            errors.append(f"{name}: its live provenance is {'changed' if name in site_prov else 'missing'} in the new site")
    return errors


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("live_url")
    for d in ("old", "new", "site"):
        p.add_argument(d, type=Path)
    p.add_argument("--allow-http-loopback", action="store_true")
    args = p.parse_args(argv)
    parts = urllib.parse.urlsplit(args.live_url)
    loopback = args.allow_http_loopback and parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost")
    if parts.scheme != "https" and not loopback:
        print(f"index_no_loss: {args.live_url} is not https", file=sys.stderr)
        return 1
    try:
        errors = check(args.live_url.rstrip("/"), args.old, args.new, args.site)
    except OSError as e:
        errors = [f"cannot read the live index: {e}"]
    if errors:
        print("\n".join(["index_no_loss: refusing to publish:", *errors]), file=sys.stderr)
        return 1
    print("index_no_loss: nothing published is lost or changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
