"""End to end: pplxweb's server process (as `manage.py serve` starts it) against the fake
Perplexity, driven by Chromium.

The server shares the test database (SQLite file or PostgreSQL test database) and the data dir
(so the same encryption keys) with the test process; tests that use it take
`django_db(transaction=True)` so what they write is committed and visible to the server.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
]  # fmt: skip


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(proc: subprocess.Popen, port: int, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early:\n{log.read_text()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server did not start:\n{log.read_text()[-3000:]}")


def start(
    app: str, env: dict, log: Path, port: int = 0, tls: tuple[Path, Path] | None = None
) -> tuple[subprocess.Popen, int]:
    """granian serving the ASGI app `app` (the fake Perplexity) on `port` (a free one by
    default; over TLS with `tls`: certificate and key), once it accepts connections."""
    port = port or free_port()
    command = [sys.executable, "-m", "granian", "--interface", "asginl", "--host", "127.0.0.1",
               "--port", str(port), "--http", "1", "--no-ws", "--log-level", "warning"]  # fmt: skip
    if tls:
        command += ["--ssl-certificate", str(tls[0]), "--ssl-keyfile", str(tls[1])]
    proc = subprocess.Popen(
        [*command, app], cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT
    )
    wait_for(proc, port, log)
    return proc, port


def start_pplxweb(env: dict, log: Path, port: int = 0, **options) -> tuple[subprocess.Popen, int]:
    """pplxweb's server as `manage.py serve` becomes it (pplxweb/server.py; `options`: those of
    server.command) on `port` (a free one by default), once it accepts connections."""
    from pplxweb import server

    port = port or free_port()
    argv = server.command("127.0.0.1", port, **options)
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    wait_for(proc, port, log)
    return proc, port


def worker_pid(proc: subprocess.Popen) -> int:
    """The pid of the server's worker process (granian's main process supervises it)."""
    for _ in range(100):
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise RuntimeError("the server has no worker process")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="session")
def fake_perplexity(tmp_path_factory):
    """The fake upstream's base URL (through a relay that can reset connections, see
    tests/fake_perplexity/proxy.py); `control(base, **plan)` steers it (see its docstring)."""
    folder = tmp_path_factory.mktemp("fake")
    proc, port = start("tests.fake_perplexity.app:application", {**os.environ}, folder / "fake.log")
    relay_port = free_port()
    relay = subprocess.Popen(
        [sys.executable, "-m", "tests.fake_perplexity.proxy", str(relay_port), str(port)],
        cwd=ROOT, stdout=(folder / "relay.log").open("w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    wait_for(relay, relay_port, folder / "relay.log")
    yield f"http://127.0.0.1:{relay_port}"
    stop(relay)
    stop(proc)


def control(base: str, **state) -> None:
    request = urllib.request.Request(f"{base}/_control", data=json.dumps(state).encode(), method="POST")  # noqa: S310
    urllib.request.urlopen(request, timeout=5).read()  # noqa: S310 - loopback test server


def seen(base: str) -> list[dict]:
    return json.loads(urllib.request.urlopen(f"{base}/_requests", timeout=5).read())  # noqa: S310


@pytest.fixture(scope="session")
def server_log(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pplxweb") / "server.log"


def server_env(fake_perplexity: str, **extra: str) -> dict:
    """The environment of a pplxweb server on the test database and data dir, against the fake."""
    from django.conf import settings

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.server_settings", "PPLXWEB_PERPLEXITY_URL": fake_perplexity,
           "PPLXWEB_PERPLEXITY_API_URL": fake_perplexity,
           "PPLXWEB_IMPERSONATE": "chrome", "PPLXWEB_DATA_DIR": str(settings.DATA_DIR),
           "PPLXWEB_PERPLEXITY_READ_TIMEOUT": "2", "PPLXWEB_PERPLEXITY_ANSWER_TIMEOUT": "6",
           "PPLXWEB_DATABASE_NAME": str(settings.DATABASES["default"]["NAME"]), **extra}  # fmt: skip
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return env


@pytest.fixture(scope="session")
def pplxweb_server(django_db_setup, django_db_blocker, fake_perplexity, server_log):
    """pplxweb's server on the test database; yields its base URL."""
    proc, port = start_pplxweb(server_env(fake_perplexity), server_log)
    yield f"http://127.0.0.1:{port}"
    stop(proc)
    assert "Traceback" not in server_log.read_text(), server_log.read_text()[-4000:]


@pytest.fixture
async def page(request):
    """A fresh Chromium page (Debian's Chromium, never a downloaded browser); a screenshot is
    saved to test-artifacts/ when the test fails."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        context = await browser.new_context(
            viewport=getattr(request, "param", None) or {"width": 1200, "height": 900}
        )
        page = await context.new_page()
        page.console_errors = []
        page.on("console", lambda m: page.console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: page.console_errors.append(str(e)))
        await page.add_init_script(
            "document.addEventListener('htmx:wsOpen', () => { window.__wsOpen = true; });"
        )
        yield page
        if getattr(request.node, "failed", False):
            ARTIFACTS.mkdir(exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
        await browser.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call" and report.failed:
        item.failed = True
    return report
