"""Start pplxweb: migrate, collect static files, set up the owner, then become the server
(pplxweb/server.py: granian in a fresh interpreter)."""

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


def become_the_server() -> None:
    """Replace this process with the server (pplxweb/server.py): same process id, a fresh
    interpreter without the preparation's modules."""
    import os
    import sys

    from django.db import connections

    from pplxweb import server

    connections.close_all()
    root = str(settings.BASE_DIR)  # where `pplxweb` is imported from, whatever the working directory
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    sys.stdout.flush()  # before the server writes to the same output
    sys.stderr.flush()
    argv = server.command(settings.BIND.host, settings.BIND.port)
    os.execve(sys.executable, argv, {**os.environ, "PYTHONPATH": path})  # noqa: S606 - our own interpreter


class Command(BaseCommand):
    help = "Prepare the database and static files, then serve pplxweb on PPLXWEB_BIND."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--no-serve", action="store_true", help="prepare, then exit")

    def handle(self, *args, **options) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        for line in self.prepare():
            self.stdout.write(line)
        if options["no_serve"]:
            return
        become_the_server()

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
