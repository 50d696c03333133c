"""The server process: daphne serving pplxweb.asgi on PPLXWEB_BIND.

`manage.py serve` prepares (migrations, static files, the owner), then replaces itself with

    python -m pplxweb.server

(same process id, so signals and service managers see one process). A fresh interpreter keeps
the preparation's modules out of the server's memory: about 5 MB of a 90 MB server.
"""

from __future__ import annotations

import os
import sys


def plain_http_only() -> None:
    """pplxweb serves plain HTTP (TLS is a reverse proxy's, README). Twisted imports pyOpenSSL
    at start only to learn whether it could serve TLS: 6 MB of resident memory, measured. Call
    before Twisted is imported; Twisted then runs without TLS support."""
    sys.modules.setdefault("OpenSSL", None)  # `import OpenSSL` raises ImportError, which Twisted expects


def python_websocket_checks() -> None:
    """autobahn (daphne's websockets) checks incoming frames with C helpers whose interface it
    parses with cffi at import: cffi's C parser stays loaded, 2 MB of the server's memory,
    measured. What a browser sends pplxweb over its socket is a question or a click (a few KB;
    daphne caps a message at 1 MB): autobahn's Python checks take ~0.14 ms per KB. The answers
    going out are not checked either way. Call before autobahn is imported."""
    os.environ.setdefault("AUTOBAHN_USE_NVX", "0")


def use_temp_dir(max_age: float = 86400) -> None:
    """This process's temporary files (Django spools a request's body with tempfile's default)
    go to settings.TEMP_DIR; leftovers of a crash older than a day are removed."""
    import contextlib
    import tempfile
    import time

    from django.conf import settings

    tempfile.tempdir = str(settings.TEMP_DIR)
    for leftover in settings.TEMP_DIR.iterdir():
        with contextlib.suppress(FileNotFoundError):  # another process's, gone meanwhile
            if leftover.is_file() and leftover.stat().st_mtime < time.time() - max_age:
                leftover.unlink()


def _save_runs_on_shutdown() -> None:
    """Before the reactor stops, cancel the running answers; each saves what arrived as interrupted."""
    import asyncio

    from twisted.internet import defer, reactor

    from search.live.runner import shutdown

    def save() -> defer.Deferred:
        return defer.Deferred.fromFuture(asyncio.ensure_future(shutdown()))

    reactor.addSystemEventTrigger("before", "shutdown", save)


def _start_library_keeper() -> None:
    """Library jobs left running by the last stop resume at once, not with the first visit."""
    import asyncio

    from twisted.internet import reactor

    from search.library import keeper

    reactor.callWhenRunning(lambda: asyncio.get_event_loop().call_soon(keeper.ensure_started))


def main() -> None:
    plain_http_only()
    python_websocket_checks()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pplxweb.settings")
    import django

    django.setup()  # INSTALLED_APPS' daphne installs Twisted's asyncio reactor before anything uses it
    from daphne.cli import CommandLineInterface
    from django.conf import settings

    use_temp_dir()
    _save_runs_on_shutdown()
    _start_library_keeper()
    bind = settings.BIND
    CommandLineInterface().run(
        ["-b", bind.host, "-p", str(bind.port), "--access-log", "-", "pplxweb.asgi:application"]
    )


if __name__ == "__main__":
    main()
