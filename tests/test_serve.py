"""`manage.py serve`, the start command: it prepares, then becomes the server (pplxweb/server.py)
in the same process, without the preparation's modules and without Twisted's TLS."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from pplxweb import server
from tests.e2e.conftest import ROOT, free_port, stop, wait_for


def serve_environ(data: Path, port: int) -> dict[str, str]:
    """A fresh install's environment: the defaults (SQLite, the in-memory layer), on `data`."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PPLXWEB_", "DATABASE_", "REDIS_"))}
    environ.pop("DJANGO_SETTINGS_MODULE", None)
    return {**environ, "PPLXWEB_DATA_DIR": str(data), "PPLXWEB_BIND": f"127.0.0.1:{port}"}


def test_serve_prepares_then_becomes_the_server_in_the_same_process(tmp_path):
    port = free_port()
    environ = serve_environ(tmp_path / "data", port)
    log = tmp_path / "serve.log"
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "serve"],
        cwd=tmp_path,  # anywhere: the server finds pplxweb from manage.py's folder
        env=environ,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(proc, port, log)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as response:
            assert response.status == 200
        command = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        assert b"-OO" in command and command[-3:-1] == [b"-m", b"pplxweb.server"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert "setup code:" in text and f"listening on 127.0.0.1:{port}" in text
    assert '"GET /healthz" 200' in text
    assert "Traceback" not in text


def test_the_servers_bytecode_is_compiled_before_it_starts(tmp_path, monkeypatch):
    """The server runs with -OO (docstrings are 4 MB of its memory), whose bytecode pip does not
    write: before it starts, a process of its own compiles it, even where
    PYTHONDONTWRITEBYTECODE is set, and the server then compiles nothing itself (the compiler's
    leftovers would stay in its memory) to serve a page, an error page and its log line."""
    port = free_port()
    data = tmp_path / "data"
    environ = {**serve_environ(data, port), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "manage.py", "serve", "--no-serve"], cwd=ROOT, env=environ, check=True)
    monkeypatch.setattr(server, "_bytecode_dir", lambda data_dir: data_dir / "bytecode")  # a fresh one

    argv, env = server.prepare(data, environ)

    compiled = sorted((data / "bytecode").rglob("*.pyc"))
    assert len(compiled) > 500 and all(p.name.endswith(".opt-2.pyc") for p in compiled)
    assert any(p.match("django/db/models/sql/compiler.*") for p in compiled)  # the first query's
    assert (data / "bytecode").stat().st_mode & 0o777 == 0o700
    assert "-OO" in argv and argv[-2:] == ["-m", "pplxweb.server"]
    log = tmp_path / "server.log"
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        wait_for(proc, port, log)
        for path, status in (("/healthz", 200), ("/setup/", 200), ("/no-such-page/", 404)):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
                    assert response.status == status
            except urllib.error.HTTPError as error:
                assert error.code == status
    finally:
        stop(proc)
    assert sorted((data / "bytecode").rglob("*.pyc")) == compiled


def test_the_bytecode_is_kept_in_the_virtualenv_else_in_the_data_dir(tmp_path, monkeypatch):
    venv = tmp_path / "venv"
    venv.mkdir()
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    assert server._bytecode_dir(tmp_path / "data") == venv / "bytecode"
    monkeypatch.setattr(sys, "base_prefix", str(venv))  # no virtualenv: not the system's folders
    assert server._bytecode_dir(tmp_path / "data") == tmp_path / "data" / "bytecode"


def run(code: str, environ: dict | None = None) -> str:
    """What a fresh interpreter prints running `code`."""
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_server_runs_twisted_without_pyopenssl():
    """pyOpenSSL comes with daphne (twisted[tls]) and Twisted imports it only to know it could
    serve TLS, which pplxweb leaves to a reverse proxy: 6 MB of the server's memory."""
    probe = (
        "import sys; from pplxweb.server import plain_http_only; plain_http_only(); "
        "import daphne.server; "
        "print(sorted(m for m in sys.modules if m.startswith(('OpenSSL', 'service_identity', "
        "'twisted.internet.ssl')) and sys.modules[m] is not None))"
    )

    assert run(probe) == "[]"
    assert "OpenSSL" in run(probe.replace("plain_http_only(); ", ""))  # what the call prevents: it can fail


def test_the_server_checks_websocket_frames_without_cffis_parser():
    """autobahn's C helpers for incoming frames come with cffi's C parser (2 MB of the server's
    memory); its Python checks are enough for what a browser sends."""
    probe = (
        "import sys; from pplxweb.server import python_websocket_checks; python_websocket_checks(); "
        "import daphne.server; "
        "print(sorted(m for m in sys.modules if m.startswith(('pycparser', 'autobahn.nvx._utf8'))))"
    )
    environ = {k: v for k, v in os.environ.items() if k != "AUTOBAHN_USE_NVX"}
    assert run(probe, environ) == "[]"
    assert "pycparser" in run(probe.replace("python_websocket_checks(); ", ""), environ)  # it can fail
