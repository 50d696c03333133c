"""Start pplxweb: migrate, collect static files, set up the owner, then serve with daphne."""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from accounts import services
from pplxweb.env import local_addresses


def _urls(host: str, port: int) -> list[str]:
    if host in ("0.0.0.0", "::"):  # noqa: S104
        addresses = sorted(a for a in local_addresses() if not ipaddress.ip_address(a).is_loopback)
        hosts = ["localhost", *addresses]
    else:
        hosts = [host]
    return [f"http://{f'[{h}]' if ':' in h else h}:{port}/" for h in hosts]


def _save_runs_on_shutdown() -> None:
    """Before the reactor stops, cancel the running answers; each saves what arrived as interrupted."""
    import asyncio

    import daphne.server  # noqa: F401 - installs Twisted's asyncio reactor first
    from twisted.internet import defer, reactor

    from search.live.runner import shutdown

    def save() -> defer.Deferred:
        return defer.Deferred.fromFuture(asyncio.ensure_future(shutdown()))

    reactor.addSystemEventTrigger("before", "shutdown", save)


def _start_library_keeper() -> None:
    """Library jobs left running by the last stop resume at once, not with the first visit."""
    import asyncio

    import daphne.server  # noqa: F401 - installs Twisted's asyncio reactor first
    from twisted.internet import reactor

    from search.library import keeper

    reactor.callWhenRunning(lambda: asyncio.get_event_loop().call_soon(keeper.ensure_started))


def use_temp_dir(max_age: float = 86400) -> None:
    """This process's temporary files (Django spools a request's body with tempfile's default)
    go to settings.TEMP_DIR; leftovers of a crash older than a day are removed."""
    import contextlib
    import tempfile
    import time

    tempfile.tempdir = str(settings.TEMP_DIR)
    for leftover in settings.TEMP_DIR.iterdir():
        with contextlib.suppress(FileNotFoundError):  # another process's, gone meanwhile
            if leftover.is_file() and leftover.stat().st_mtime < time.time() - max_age:
                leftover.unlink()


class Command(BaseCommand):
    help = "Prepare the database and static files, then serve pplxweb on PPLXWEB_BIND."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--no-serve", action="store_true", help="prepare, then exit")

    def handle(self, *args, **options) -> None:
        use_temp_dir()
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        for line in self.prepare():
            self.stdout.write(line)
        if options["no_serve"]:
            return
        from daphne.cli import CommandLineInterface

        _save_runs_on_shutdown()
        _start_library_keeper()
        bind = settings.BIND
        CommandLineInterface().run(
            ["-b", bind.host, "-p", str(bind.port), "--access-log", "-", "pplxweb.asgi:application"]
        )

    def prepare(self) -> list[str]:
        """Owner from the environment, else a setup code; then the addresses to open."""
        from search.live.liveness import sweep_interrupted

        lines = []
        interrupted = sweep_interrupted(at_start=True)
        if interrupted:
            lines.append(f"{interrupted} answer(s) left running by an earlier stop were marked interrupted.")
        from search.history import import_jobs

        if removed := import_jobs.sweep(at_start=True):
            lines.append(f"{removed} import(s) cut short by an earlier stop were removed whole.")
        from search.images import sweep

        sweep()  # the kept images of entries that are gone (a person removed, say)
        created = services.ensure_owner_from_env()
        if created:
            lines.append(f"Owner {created!r} created from PPLXWEB_ADMIN_USER.")
        if services.needs_setup():
            code = services.issue_setup_code()
            lines += [
                "",
                "  First start: create the owner account in a browser with this one-time code:",
                f"      setup code: {code}",
                "",
            ]
        bind = settings.BIND
        lines.append(f"pplxweb {settings.VERSION} listening on {bind.host}:{bind.port}. Open:")
        lines += [f"  {url}" for url in _urls(bind.host, bind.port)]
        lines.append(f"Data dir: {settings.DATA_DIR}")
        return lines
