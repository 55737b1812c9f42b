"""tools/index_no_loss.py against a live index served on 127.0.0.1 (a site make_index
built before): a deploy may add wheels, never lose or change a wheel or a provenance."""

from __future__ import annotations

import functools
import http.server
import importlib.util
import shutil
import threading
from pathlib import Path

import pytest
from test_make_index import fake_attestation, fake_wheel, mi

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "index_no_loss.py"
_spec = importlib.util.spec_from_file_location("index_no_loss", SCRIPT)
nl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nl)


@pytest.fixture
def live(tmp_path):
    """(url, directory): a static server on 127.0.0.1 over directory (missing: 404s)."""
    root = tmp_path / "live"
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", root
    httpd.shutdown()
    httpd.server_close()


def release(d: Path, version: str) -> Path:
    w = fake_wheel(d, version, "torch>=2.10")
    fake_attestation(w)
    return w


def deploy(tmp_path: Path, old: Path, new: Path) -> Path:
    site = tmp_path / f"site-{len(list(tmp_path.glob('site-*')))}"
    both = tmp_path / "both"
    shutil.rmtree(both, ignore_errors=True)
    for d in (old, new):
        if d.exists():
            shutil.copytree(d, both / d.name)
    assert mi.main([str(both), str(site), "--github-repository", "o/r"]) == 0
    return site


def run(url, old, new, site):
    return nl.main([url, str(old), str(new), str(site), "--allow-http-loopback"])


def test_first_then_second_release(live, tmp_path, capsys):
    url, root = live
    old, new = tmp_path / "old", tmp_path / "new"
    release(new / "v0.2.0", "0.2.0+cpu")
    site = deploy(tmp_path, old, new)
    assert run(url, old, new, site) == 0
    assert "first deploy" in capsys.readouterr().out
    shutil.copytree(site, root)  # it is live; v0.2.0 is now a release
    shutil.move(new / "v0.2.0", old / "v0.2.0")
    release(new / "v0.3.0", "0.3.0+cpu")
    site = deploy(tmp_path, old, new)
    assert run(url, old, new, site) == 0
    assert "live index: 1 wheel(s), 1 with provenance" in capsys.readouterr().out


def test_losses_are_refused(live, tmp_path, capsys):
    url, root = live
    old, new = tmp_path / "old", tmp_path / "new"
    w = release(old / "v0.2.0", "0.2.0+cpu")
    site = deploy(tmp_path, old, tmp_path / "none")
    shutil.copytree(site, root)
    release(new / "v0.3.0", "0.3.0+cpu")
    good = deploy(tmp_path, old, new)
    assert run(url, old, new, good) == 0
    capsys.readouterr()

    # The provenance of a published wheel changed (or gone) in the new site.
    (next(good.rglob(f"{w.name}.provenance"))).write_text("{}")
    assert run(url, old, new, good) == 1
    assert f"{w.name}: its live provenance is changed" in capsys.readouterr().err
    next(good.rglob(f"{w.name}.provenance")).unlink()
    assert run(url, old, new, good) == 1
    assert "its release has an attestation that the site does not serve" in capsys.readouterr().err

    # A new wheel without an attestation.
    next(new.rglob("*.publish.attestation")).unlink()
    assert run(url, old, new, deploy(tmp_path, old, new)) == 1
    assert "a new wheel without provenance" in capsys.readouterr().err

    # The release asset of a live wheel was deleted.
    shutil.rmtree(old)
    old.mkdir()
    release(new / "v0.3.0", "0.3.0+cpu")
    assert run(url, old, new, deploy(tmp_path, old, new)) == 1
    assert "served by the live index but on no release" in capsys.readouterr().err


def test_rebuilt_with_other_bytes_and_missing_live_index(live, tmp_path, capsys):
    url, root = live
    old, new = tmp_path / "old", tmp_path / "new"
    release(old / "v0.2.0", "0.2.0+cpu")
    w = release(new / "v0.2.0", "0.2.0+cpu")
    w.write_bytes(w.read_bytes() + b"\0")  # same name, other bytes
    fake_attestation(w)
    site = tmp_path / "site-x"
    site.mkdir()
    assert run(url, old, new, site) == 1
    err = capsys.readouterr().err
    assert "released before with other content" in err
    assert "is missing although releases have wheels" in err
    assert run(url.replace("http:", "ftp:"), old, new, site) == 1
    assert "is not https" in capsys.readouterr().err


_spec_deploy = importlib.util.spec_from_file_location(
    "check_deploy", Path(__file__).resolve().parents[1] / "tools" / "check_deploy.py")
cd = importlib.util.module_from_spec(_spec_deploy)
_spec_deploy.loader.exec_module(cd)


def test_check_deploy_wants_the_wheels_url_serving_the_new_wheels(live, tmp_path):
    # tools/check_deploy.py: the release leaves draft only when Pages is where the wheels
    # point and serves them.
    url, root = live
    new = tmp_path / "new"
    wheel = release(new / "v0.4.0", "0.4.0+cpu")
    # Nothing deployed yet (404): the wheel is not served.
    assert cd.check(url + "/", url, new, wait=0) == [
        f"{wheel.name}: not served by {url}/ with sha256 {nl.sha256(wheel)}"]
    shutil.copytree(deploy(tmp_path, tmp_path / "old", new), root)
    assert cd.check(url + "/", url, new, wait=0) == []
    assert cd.main([url + "/", str(new), "--index-url", url, "--allow-http-loopback", "--wait", "0"]) == 0
    moved = cd.check("https://o.github.io/r/", url, new, wait=0)
    assert len(moved) == 1 and moved[0].startswith("Pages deployed to https://o.github.io/r/, but the wheels name")
    assert cd.main([url + "/", str(new), "--index-url", url, "--wait", "0"]) == 1  # http: loopback only when asked
