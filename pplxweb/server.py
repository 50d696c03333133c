"""The server process: daphne serving pplxweb.asgi on PPLXWEB_BIND.

`manage.py serve` prepares (migrations, static files, the owner), then replaces itself with

    python -OO -X pycache_prefix=BYTECODE -m pplxweb.server

(same process id, so signals and service managers see one process; `prepare()`). A fresh
interpreter keeps the preparation's modules (migrations, collectstatic) out of the server's
memory: 4-5 MB, measured.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def prepare(data_dir: Path, environ: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The server's command line and environment, its bytecode made ready first.

    `-OO` leaves docstrings (and assertions) out: 4 MB of the server's memory, measured, and
    nothing the server runs reads them. pip writes no bytecode for -OO (nor does Debian for its
    standard library), so the server keeps its own in one folder, whatever
    PYTHONDONTWRITEBYTECODE says. Before each start, a process of its own loads what the server
    loads, compiling what is new or changed (everything, the first time: ~2 s), and exits: the
    compiler's leftovers (16 MB, measured) never stay in the server. It costs about 0.7 s."""
    bytecode = _bytecode_dir(data_dir)
    bytecode.mkdir(mode=0o700, exist_ok=True)  # the code the server runs: nobody else writes here
    argv = [sys.executable, "-OO", "-X", f"pycache_prefix={bytecode}", "-m", "pplxweb.server"]
    env = {k: v for k, v in environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([*argv, "--load-only"], env=env, check=False)  # a failure shows again in the server
    return argv, env


def _bytecode_dir(data_dir: Path) -> Path:
    """In the virtualenv, or in the data dir outside one or where it cannot be written."""
    venv = Path(sys.prefix) / "bytecode"
    if sys.prefix != sys.base_prefix and os.access(venv if venv.exists() else venv.parent, os.W_OK):
        return venv
    return data_dir / "bytecode"


def _load() -> None:
    """Import what the server runs (`--load-only`): daphne, the application, and what the first
    page, answer and error page import (views, SQL compiler, sessions, messages, context
    processors, static storage, channel layer, date formats, error views, the log's escaping)."""
    _set_up()
    import encodings.unicode_escape  # noqa: F401

    import daphne.cli  # noqa: F401
    import django.contrib.sessions.serializers
    import django.db.models.sql.compiler
    import django.views.csrf  # noqa: F401
    from channels.layers import get_channel_layer
    from django.conf import settings
    from django.contrib.staticfiles.storage import staticfiles_storage
    from django.template import engines
    from django.urls import get_resolver
    from django.utils import formats
    from django.utils.module_loading import import_string

    import pplxweb.asgi  # noqa: F401

    get_resolver().url_patterns  # noqa: B018
    get_resolver().resolve_error_handler(404)
    engines["django"].engine.template_context_processors  # noqa: B018
    import_string(settings.MESSAGE_STORAGE)
    get_channel_layer()
    staticfiles_storage.base_url  # noqa: B018
    formats.get_format("DATE_FORMAT")


def _set_up() -> None:
    plain_http_only()
    python_websocket_checks()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pplxweb.settings")
    import django

    django.setup()  # INSTALLED_APPS' daphne installs Twisted's asyncio reactor before anything uses it


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
    if sys.argv[1:] == ["--load-only"]:
        _load()
        return
    _set_up()
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
