"""`manage.py serve`, the start command: it prepares, then becomes the server (pplxweb/server.py:
granian with its own options) in the same process."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from pplxweb import server
from tests.e2e.conftest import ROOT, free_port, wait_for


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
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/healthz?secret=question", timeout=10
        ) as response:
            assert response.status == 200
        for _ in range(100):  # the access log's line is written once the response is sent
            if "GET /healthz" in log.read_text():
                break
            time.sleep(0.1)
        command = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")[:-1]
        assert [part.decode() for part in command] == server.command("127.0.0.1", port)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert "setup code:" in text and f"listening on 127.0.0.1:{port}" in text
    assert '"GET /healthz HTTP/1.1" 200' in text
    assert "secret" not in text and "question" not in text  # the access log leaves out query strings
    assert "Traceback" not in text


def test_the_servers_options_are_its_own_documented_ones():
    """Plain options of granian's command line, no patches: one worker, HTTP/1.1, 30 s for a
    request line and its headers, a 64 KB read buffer, an access log without query strings."""
    argv = server.command("127.0.0.1", 8000)
    assert argv[:3] == [sys.executable, "-m", "granian"] and argv[-1] == "pplxweb.asgi:application"
    options = dict(itertools.pairwise(argv))
    assert options["--interface"] == "asgi" and options["--workers"] == "1" and options["--http"] == "1"
    assert options["--http1-header-read-timeout"] == "30000"
    assert options["--http1-buffer-size"] == "65536"
    assert "query" not in options["--access-log-fmt"]
    help_text = subprocess.run(
        [sys.executable, "-m", "granian", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for option in argv[3:-1]:
        if option.startswith("--"):
            assert option in help_text, f"granian no longer has {option}"
