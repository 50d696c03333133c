"""The ASGI servers the benchmarks compare, each serving an app on loopback with its own
documented options: granian exactly as `manage.py serve` starts it (pplxweb/server.py), uvicorn
and daphne with the closest options they have (not pplxweb's dependencies: install them into
the virtualenv to compare)."""

from __future__ import annotations

import sys

MB = 1024 * 1024
APP = "pplxweb.asgi:application"
SERVERS = ("granian", "uvicorn", "daphne")


def command(server: str, port: int, app: str = APP) -> list[str]:
    """The server's command line serving `app` on loopback with its own options."""
    if server == "granian":
        from pplxweb import server as pplxweb_server

        return pplxweb_server.command("127.0.0.1", port, app=app)
    if server == "uvicorn":
        return [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port), "--lifespan", "on",
                "--timeout-keep-alive", "30", "--h11-max-incomplete-event-size", "65536",
                "--ws-max-size", str(16 * MB), app]  # fmt: skip
    return [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "--http-timeout", "30", app]
