"""ASGI entry point: HTTP through Django, websockets origin-checked and session-authenticated,
everything behind the front door's limits (pplxweb/front_door.py)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pplxweb.settings")
django_asgi_app = get_asgi_application()

# Imported after Django is set up: the routes import models.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from pplxweb import collector, server  # noqa: E402
from pplxweb.front_door import FrontDoor  # noqa: E402
from pplxweb.origin import SameOriginValidator  # noqa: E402
from search.library import keeper  # noqa: E402
from search.live import liveness, runner, warm  # noqa: E402
from search.routing import websocket_urlpatterns  # noqa: E402


def start_watching() -> None:
    """The runs' watcher (answers a restart left are rejoined or swept) and the library keeper
    (jobs a stop left are resumed): at the server's start, or else with the first connection."""
    liveness.keep_watch(runner.RUNS, runner.rejoin_lost)
    keeper.ensure_started()


def starting(app):
    """The ASGI app, with the server's start and stop (the lifespan protocol: the running answers
    are saved as interrupted before the process ends) and the watchers started on the first
    connection where no lifespan came (tests, another server)."""
    started = False

    async def wrapped(scope, receive, send):
        nonlocal started
        if scope["type"] == "lifespan":
            await server.lifespan(receive, send, start_watching, runner.shutdown)
            return
        if not started:
            started = True
            start_watching()
        return await app(scope, receive, send)

    return wrapped


application = starting(
    FrontDoor(
        ProtocolTypeRouter(
            {
                "http": django_asgi_app,
                "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
            }
        )
    )
)

server.use_temp_dir()  # uploads and exports are spooled on the data dir's disk (see there)

warm.up()  # the first search after a restart should be as quick as the next

collector.configure()  # Python's garbage collector pauses every answer: rarely here (see there)
