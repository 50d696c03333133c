"""The ASGI servers the benchmarks compare, each serving an app on loopback with its own
documented options: granian exactly as `manage.py serve` starts it (pplxweb/server.py), uvicorn
and daphne with the closest options they have (not pplxweb's dependencies: install them into
the virtualenv to compare)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

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


def tree(pid: int) -> list[int]:
    """A server's processes: granian's main process and its worker (or one process)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [pid, *(int(child) for child in children)]


def memory_mb(pid: int, row: str = "VmRSS") -> float:
    """VmRSS (now) or VmHWM (each process's peak) of a server's processes together, in MB."""
    total = 0
    for proc in tree(pid):
        status = Path(f"/proc/{proc}/status").read_text().splitlines()
        total += int(next(line for line in status if line.startswith(row)).split()[1])
    return total / 1024


def cpu_seconds(pid: int) -> float:
    """User and system time of a server's processes (their threads included)."""
    total = 0
    for proc in tree(pid):
        fields = Path(f"/proc/{proc}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def end_cleanly_on_sigterm() -> None:
    """A benchmark told to stop (SIGTERM, as `kill` sends) stops the servers it started: the
    signal raises SystemExit, so its `finally` blocks run."""
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
