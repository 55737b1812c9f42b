"""tools/private_index.py against index servers on 127.0.0.1: the credentials never
leave the index's origin (a cross-origin redirect, a foreign link, plain http), and the
comparison itself (identical, missing, different)."""

from __future__ import annotations

import base64
import hashlib
import http.server
import importlib.util
import sys
import threading
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "private_index.py"
_spec = importlib.util.spec_from_file_location("private_index", SCRIPT)
pi = importlib.util.module_from_spec(_spec)
sys.modules["private_index"] = pi
_spec.loader.exec_module(pi)

AUTH = "Basic " + base64.b64encode(b"alice:s3cret").decode()


class Server:
    """A loopback HTTP server answering from a {path: (status, headers, body)} table,
    recording every request's path and Authorization header."""

    def __init__(self):
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.seen: list[tuple[str, str | None]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                outer.seen.append((self.path, self.headers.get("Authorization")))
                status, headers, body = outer.routes.get(self.path, (404, {}, b""))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers():
    index, other = Server(), Server()
    yield index, other
    index.close()
    other.close()


def wheel(d: Path, content: bytes = b"wheel") -> Path:
    d.mkdir(parents=True, exist_ok=True)
    path = d / "fusedops-0.2.0+cpu-cp310-abi3-manylinux_2_28_x86_64.whl"
    path.write_bytes(content)
    return path


def run(monkeypatch, tmp_path, base, *extra):
    monkeypatch.setenv("FUSEDOPS_INDEX_URL", base)
    monkeypatch.setenv("TWINE_USERNAME", "alice")
    monkeypatch.setenv("TWINE_PASSWORD", "s3cret")
    out = tmp_path / "to-upload"
    return pi.main([str(tmp_path / "dist"), str(out), *extra]), out


def page(*links: str) -> bytes:
    return "".join(f'<a href="{link}">x</a>' for link in links).encode()


def test_cross_origin_redirect_is_refused_without_sending_the_password(servers, monkeypatch, tmp_path, capsys):
    index, other = servers
    wheel(tmp_path / "dist")
    index.routes["/cpu/simple/fusedops/"] = (302, {"Location": f"{other.url}/cpu/simple/fusedops/"}, b"")
    other.routes["/cpu/simple/fusedops/"] = (200, {}, page())
    rc, out = run(monkeypatch, tmp_path, index.url, "--allow-http-loopback")
    assert rc == 1 and not out.exists()
    assert "another origin" in capsys.readouterr().err
    assert index.seen == [("/cpu/simple/fusedops/", AUTH)]
    assert other.seen == []  # plain urllib follows, Authorization and all


def test_same_origin_redirect_is_followed_with_credentials(servers, monkeypatch, tmp_path):
    index, _ = servers
    w = wheel(tmp_path / "dist")
    sha = hashlib.sha256(w.read_bytes()).hexdigest()
    index.routes["/cpu/simple/fusedops/"] = (301, {"Location": "/cpu/simple/fusedops/x/"}, b"")
    index.routes["/cpu/simple/fusedops/x/"] = (200, {}, page(f"/cpu/packages/{w.name}#sha256={sha}"))
    rc, out = run(monkeypatch, tmp_path, index.url, "--allow-http-loopback")
    assert rc == 0 and out.read_text() == ""
    assert [a for _, a in index.seen] == [AUTH, AUTH]


def test_link_outside_the_variant_index_is_an_error_and_not_fetched(servers, monkeypatch, tmp_path, capsys):
    index, other = servers
    w = wheel(tmp_path / "dist")
    index.routes["/cpu/simple/fusedops/"] = (200, {}, page(f"{other.url}/cpu/packages/{w.name}"))
    rc, _ = run(monkeypatch, tmp_path, index.url, "--allow-http-loopback")
    assert rc == 1 and "outside" in capsys.readouterr().err
    assert other.seen == []


def test_plain_http_is_refused(servers, monkeypatch, tmp_path, capsys):
    index, _ = servers
    wheel(tmp_path / "dist")
    rc, _ = run(monkeypatch, tmp_path, index.url)  # no --allow-http-loopback
    assert rc == 1 and "not an https URL" in capsys.readouterr().err
    assert index.seen == []
    with pytest.raises(pi.UnsafeIndexError):
        pi.check_base("http://pypi.example.com", allow_http_loopback=True)
    pi.check_base("https://pypi.example.com", allow_http_loopback=False)


def test_identical_missing_and_different(servers, monkeypatch, tmp_path, capsys):
    index, _ = servers
    w = wheel(tmp_path / "dist")
    index.routes["/cpu/simple/fusedops/"] = (404, {}, b"")
    rc, out = run(monkeypatch, tmp_path, index.url, "--allow-http-loopback")
    assert rc == 0 and out.read_text() == f"cpu {w}\n"
    # No #sha256= on the link: the file is downloaded and hashed.
    index.routes["/cpu/simple/fusedops/"] = (200, {}, page(f"../../packages/{w.name}"))
    index.routes[f"/cpu/packages/{w.name}"] = (200, {}, b"other bytes")
    rc, _ = run(monkeypatch, tmp_path, index.url, "--allow-http-loopback")
    assert rc == 1 and "the server has sha256" in capsys.readouterr().err
    index.routes[f"/cpu/packages/{w.name}"] = (200, {}, w.read_bytes())
    rc, out = run(monkeypatch, tmp_path, index.url, "--allow-http-loopback")
    assert rc == 0 and out.read_text() == ""
