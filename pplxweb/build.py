"""Which build of pplxweb a page was made by, so a page never mixes its code with another's.

A page carries its build in its sockets' addresses (`?build=`). A server that comes back from a
restart on other code (an upgrade, an edit) refuses such a socket: it accepts it and closes it at
once with UPDATED, and the page offers a reload (static/live.js) instead of applying fragments
its JavaScript was not written for. The build is a fingerprint of what pages and fragments are
made of: the static files, the templates and the Python code, so it changes with any of them,
also when the version number does not; or the name PPLXWEB_BUILD gives it (a release, a commit).
"""

from __future__ import annotations

import functools
import hashlib

from django.conf import settings
from django.http import QueryDict

UPDATED = 4409  # the websocket close code: this page was made by another build
PARTS = ("static", "templates", "pplxweb", "search", "accounts")
SUFFIXES = {".py", ".html", ".js", ".css", ".svg", ".xml", ".json"}


def build() -> str:
    """PPLXWEB_BUILD, else the version and 12 hex digits of the code's fingerprint, e.g.
    "0.1.0-3f2a9c01b7de"."""
    return settings.BUILD or _fingerprint()


@functools.cache
def _fingerprint() -> str:
    digest = hashlib.sha256()
    root = settings.BASE_DIR
    for part in PARTS:
        for path in sorted((root / part).rglob("*")):
            if path.suffix in SUFFIXES and "migrations" not in path.parts and path.is_file():
                digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return f"{settings.VERSION}-{digest.hexdigest()[:12]}"


def stale(scope: dict) -> bool:
    """Whether a socket's page names a build other than this server's (a page that names none,
    a client of its own, is taken as it is)."""
    named = QueryDict(scope.get("query_string", b"").decode("latin-1")).get("build")
    return bool(named) and named != build()
