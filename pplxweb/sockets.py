"""A person's open sockets follow their sign-in.

A socket reads the person once, at connect. Whatever ends or changes a sign-in (signing out, a
password change, removal from the household, unlinking Perplexity) tells the person's sockets
through the channel group `person-<id>`; each socket then checks its own session again (and
every message it receives does too) and closes, saying why, when it no longer opens.

And they follow the channel layer: when the server loses its connection to Redis, messages meant
for a socket may be gone (pplxweb/redis_layer.py), so the socket says so and closes with code
4012; the page reopens it (static/pplxweb.js) and gets its whole state again.
"""

from __future__ import annotations

import logging
from importlib import import_module
from types import SimpleNamespace

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import get_user, user_logged_out
from django.dispatch import receiver
from django.template.loader import render_to_string

log = logging.getLogger(__name__)
SIGNED_OUT = 4401  # websocket close codes: the page says to sign in again
UNLINKED = 4403
LAYER_LOST = 4012  # pplxweb.redis_layer.LOST_CODE: the page reopens the socket
LAYER_LOST_TEXT = (
    "The server lost its connection to Redis, which carries the live updates, so this page may "
    "have missed some. Reconnecting…"
)


def group(user_id: int) -> str:
    return f"person-{user_id}"


def tell(
    user_id: int, what: str = "session", ended: str | None = None, renamed: tuple[str, str] | None = None
) -> None:
    """Tell user_id's open sockets (any process) that their sign-in changed: `what` is "session"
    (each checks its session; `ended`: a session key that is over whatever the check says;
    `renamed`: (old, new) key of a session that goes on, as a password change leaves it) or
    "unlinked". From synchronous code (views, services); a failure is logged, never raised."""
    message = {"type": "person.changed", "what": what, "ended": ended or "", "renamed": list(renamed or ())}
    try:
        async_to_sync(get_channel_layer().group_send)(group(user_id), message)
    except Exception:  # the sign-out stands; the sockets' own checks on each message remain
        log.exception("could not tell the open sockets of user %s", user_id)


def still_signed_in(session_key: str | None, user_id: int) -> bool:
    """Whether this session still opens as user_id (Django's own check: it exists, the person
    exists and is active, and the password has not changed since)."""
    if not session_key:
        return False
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user = get_user(SimpleNamespace(session=store))
    return user.is_authenticated and user.pk == user_id


@receiver(user_logged_out)
def _signed_out(sender, request, user, **kwargs) -> None:
    if user is not None:
        tell(user.pk, ended=request.session.session_key)


class FollowsLayer:
    """For a websocket consumer: told by the channel layer that messages meant for it may have
    been lost (`layer.lost`, pplxweb.redis_layer), the socket says so and closes with 4012. The
    page reopens it and gets the whole state again; a socket refused at connect is left alone."""

    opened = False

    async def accept(self, *args, **kwargs) -> None:
        await super().accept(*args, **kwargs)
        self.opened = True

    async def layer_lost(self, event: dict) -> None:
        if not self.opened:
            return
        self.opened = False  # told once
        html = render_to_string("search/reconnecting_fragment.html", {"message": LAYER_LOST_TEXT})
        await self.send(text_data=html)
        await self.close(code=LAYER_LOST)
