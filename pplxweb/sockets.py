"""A person's open sockets follow their sign-in, and the channel layer.

A socket reads the person once, at connect. Whatever ends or changes a sign-in (signing out, a
password change, removal from the household, unlinking Perplexity) tells the person's sockets
through the channel group `person-<id>`; each socket then checks its own session again (and
every message it receives does too) and closes, saying why, when it no longer opens.

With REDIS_URL the live updates travel through Redis pub/sub (channels-redis's
RedisPubSubChannelLayer, as it ships), which keeps nothing for later: what is sent while the
connection is down is gone. So each server process asks Redis every PING_EVERY seconds
(`watch_layer`); when it does not answer, every open socket of the process says so and closes
with code 4012, and the page reopens it (static/pplxweb.js) and gets its whole state again. A
socket that cannot join the layer at all (Redis away as it opens) is accepted, told the same and
closed. A lost message without an outage is healed by the page itself: every update of an
answer carries a sequence number, and a page that sees a gap asks for the whole state
(search/live/consumers.py `catch_up`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import weakref
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
LAYER_LOST = 4012  # the websocket close code that makes the page reopen (static/pplxweb.js)
PING_EVERY = 5.0  # seconds between checks that Redis answers (1 s while it does not)
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


try:
    from redis.exceptions import RedisError
except ImportError:  # no Redis client installed: the in-memory layer, which never fails
    RedisError = OSError
LAYER_FAULTS = (RedisError, OSError, TimeoutError)  # what a channel layer on Redis raises when it is away
_open: weakref.WeakSet[FollowsLayer] = weakref.WeakSet()  # this process's open sockets
_watchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task] = weakref.WeakKeyDictionary()
layer_down = False  # this process's last word from Redis: it did not answer


def watch_layer() -> None:
    """With REDIS_URL, make sure this event loop's watcher asks Redis whether it answers."""
    if not settings.REDIS_URL:
        return
    loop = asyncio.get_running_loop()
    task = _watchers.get(loop)
    if task is None or task.done():
        _watchers[loop] = loop.create_task(_watch(), name="layer-watch", context=contextvars.Context())


async def _watch() -> None:
    global layer_down
    from redis import asyncio as aioredis

    client = aioredis.from_url(
        settings.REDIS_URL, socket_timeout=PING_EVERY, socket_connect_timeout=PING_EVERY
    )
    try:
        while True:
            try:
                await client.ping()
            except LAYER_FAULTS as error:
                if not layer_down:
                    layer_down = True
                    log.warning("the connection to Redis is lost (%s); the open sockets are told", error)
                await tell_open_sockets()
            else:
                if layer_down:
                    layer_down = False
                    log.warning("the connection to Redis is back")
            await asyncio.sleep(1.0 if layer_down else PING_EVERY)
    finally:
        with contextlib.suppress(*LAYER_FAULTS):
            await client.aclose()


async def publish(send, to: str, message: dict) -> bool:
    """`await send(to, message)` through the channel layer (its `send` or `group_send`), unless
    Redis is away: then nothing is sent (the pages are told of the outage and get the whole
    state when they reopen) and the caller goes on. Whether it was sent."""
    if layer_down:
        return False
    try:
        await send(to, message)
    except LAYER_FAULTS as error:
        log.warning("a live update was not sent (%s)", error)
        return False
    return True


async def leave(layer, groups: list[str], channel: str) -> None:
    """A closing socket leaves its groups. Best effort: when Redis is away or just back, the
    layer can fail here (channels-redis reconnecting raised RuntimeError "readuntil() called
    while another coroutine is already waiting"); that is logged and the socket closes all the
    same (its pub/sub channel is dropped as the consumer ends)."""
    for name in groups:
        try:
            await layer.group_discard(name, channel)
        except (*LAYER_FAULTS, RuntimeError) as error:
            log.warning("a closing socket could not leave %s (%s)", name, error)


async def tell_open_sockets() -> None:
    """Every open socket of this process may have missed messages: each says so and closes."""
    for socket in list(_open):
        with contextlib.suppress(Exception):  # one socket's fault is not the others'
            await socket.layer_lost({})


class FollowsLayer:
    """For a websocket consumer: told that messages meant for it may have been lost (Redis did not
    answer, `watch_layer`), the socket says so and closes with 4012. The page reopens it and gets
    the whole state again. A socket that cannot join the layer as it opens is told the same."""

    opened = False

    async def __call__(self, scope, receive, send) -> None:
        watch_layer()
        try:
            await super().__call__(scope, receive, send)
        except LAYER_FAULTS as error:  # the layer failed under the socket (Redis away)
            log.warning("a socket lost the channel layer (%s); told to reopen later", error)
            if self.opened:
                await self.layer_lost({})
            else:
                await _told_at_once(receive, send)
        finally:
            _open.discard(self)

    async def accept(self, *args, **kwargs) -> None:
        await super().accept(*args, **kwargs)
        self.opened = True
        _open.add(self)

    async def layer_lost(self, event: dict) -> None:
        if not self.opened:
            return
        self.opened = False  # told once
        _open.discard(self)
        await self.send(text_data=lost_fragment())
        await self.close(code=LAYER_LOST)


def lost_fragment() -> str:
    return render_to_string("search/reconnecting_fragment.html", {"message": LAYER_LOST_TEXT})


async def _told_at_once(receive, send) -> None:
    """A socket the layer could not take: accepted (a failed handshake would say nothing), told
    and closed with 4012, through the ASGI interface."""
    message = await receive()
    if message.get("type") != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.send", "text": lost_fragment()})
    await send({"type": "websocket.close", "code": LAYER_LOST})
