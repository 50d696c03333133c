"""ASGI entry point: HTTP through Django, websockets origin-checked and session-authenticated."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pplxweb.settings")
django_asgi_app = get_asgi_application()

# Imported after Django is set up: the routes import models.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from pplxweb import collector, slow_requests, twisted_forms  # noqa: E402
from pplxweb.origin import SameOriginValidator  # noqa: E402
from search.library import keeper  # noqa: E402
from search.live import liveness, runner, warm  # noqa: E402
from search.routing import websocket_urlpatterns  # noqa: E402


def starting(app):
    """The ASGI app, starting the runs' watcher on the first connection the process serves: the
    answers a restart left are rejoined (or swept) then, not only when someone searches."""
    started = False

    async def wrapped(scope, receive, send):
        nonlocal started
        if not started and scope["type"] in ("http", "websocket"):
            started = True
            liveness.keep_watch(runner.RUNS, runner.rejoin_lost)
        return await app(scope, receive, send)

    return wrapped


application = keeper.starting(  # library imports run in the server (search/library/keeper.py)
    starting(
        ProtocolTypeRouter(
            {
                "http": django_asgi_app,
                "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
            }
        )
    )
)

warm.up()  # the first search after a restart should be as quick as the next

collector.configure()  # Python's garbage collector pauses every answer: rarely here (see there)

twisted_forms.configure()  # daphne's Twisted must not hold a whole uploaded form in memory (see there)

slow_requests.configure(settings.UPLOAD_READ_TIMEOUT)  # a stalled upload is given up (see there)
