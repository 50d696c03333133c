"""The server process: granian serving pplxweb.asgi on PPLXWEB_BIND.

`manage.py serve` prepares (migrations, static files, the owner), then replaces itself with the
command line `command()` returns (same process id, so signals and service managers see one
process; a fresh interpreter keeps the preparation's modules out of the server's memory).
granian was chosen by a measured comparison with daphne and uvicorn (docs/measurements-2026-12.md,
"The server"): with its own options and pplxweb's front door (pplxweb/front_door.py) it is the one
that closes a connection trickling its request line, refuses a huge header block, and hands the
application a body as it arrives, so a body's cap and a stalled upload are judged in front of
Django through the ASGI interface alone.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable

from django.conf import settings

log = logging.getLogger(__name__)
HEADER_TIMEOUT_MS = 30_000  # a request line and headers must all come within this (slow clients)
HEADER_BYTES = 64 * 1024  # granian's read buffer: a header block over this is refused (431)
# the access log: no query string (a question asked with /?q= is the person's own business)
ACCESS_LOG = '[%(time)s] %(addr)s "%(method)s %(path)s %(protocol)s" %(status)d %(dt_ms).1fms'


def command(
    host: str, port: int, header_timeout_ms: int = HEADER_TIMEOUT_MS, app: str = "pplxweb.asgi:application"
) -> list[str]:
    """The server's command line: granian's own options, one worker process (a household's
    server: its runs live in that process), HTTP/1.1 only (TLS and HTTP/2 are a reverse proxy's).
    A connection is closed when its request line and headers have not all come within
    `header_timeout_ms`, also while it waits idle for its next request."""
    return [
        sys.executable, "-m", "granian",
        "--interface", "asgi",
        "--host", host, "--port", str(port),
        "--workers", "1",
        "--http", "1",
        "--http1-header-read-timeout", str(header_timeout_ms),
        "--http1-buffer-size", str(HEADER_BYTES),
        "--log-level", "info",
        "--access-log", "--access-log-fmt", ACCESS_LOG,
        "--workers-kill-timeout", "30",
        app,
    ]  # fmt: skip


async def lifespan(
    receive: Callable[[], Awaitable[dict]],
    send: Callable[[dict], Awaitable[None]],
    startup: Callable[[], None],
    shutdown: Callable[[], Awaitable[None]],
) -> None:
    """The ASGI lifespan protocol: `startup()` when the server starts, `await shutdown()` before it
    stops (the running answers are saved as interrupted)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            startup()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            try:
                await shutdown()
            finally:
                await send({"type": "lifespan.shutdown.complete"})
            return


def use_temp_dir(max_age: float = 86400) -> None:
    """This process's temporary files (Django spools a request's body with tempfile's default)
    go to settings.TEMP_DIR; leftovers of a crash older than a day are removed."""
    tempfile.tempdir = str(settings.TEMP_DIR)
    for leftover in settings.TEMP_DIR.iterdir():
        with contextlib.suppress(FileNotFoundError):  # another process's, gone meanwhile
            if leftover.is_file() and leftover.stat().st_mtime < time.time() - max_age:
                leftover.unlink()
