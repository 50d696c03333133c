"""With REDIS_URL: channels-redis's pub/sub layer as it ships, and pplxweb's watch on Redis
(pplxweb/sockets.py), on a real Redis server of the test's own that the tests stop and start.

Redis stopped: every open socket says the live connection was lost and closes with 4012 (the
page reopens it); a socket opened meanwhile is accepted, told the same and closed; a running
answer goes on and is saved; the log says so once, and says when Redis is back. Redis back:
sockets open and work as before, and the layer carries messages again without a restart."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from channels.layers import channel_layers, get_channel_layer
from channels.testing import WebsocketCommunicator

from pplxweb import sockets
from pplxweb.asgi import application
from search.models import Entry
from tests.conftest import session_cookie_for
from tests.redis_server import redis_server  # noqa: F401  (a fixture)
from tests.search.conftest import Paced, answer_stream, serve, words

pytestmark = pytest.mark.django_db(transaction=True)
HEADERS = [(b"origin", b"http://localhost"), (b"host", b"localhost")]


@pytest.fixture
def on_redis(settings, redis_server, monkeypatch):  # noqa: F811
    """This test's process on the test's own Redis, watched every 0.2 s."""
    settings.REDIS_URL = redis_server.url
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {
                "hosts": [{"address": redis_server.url, "socket_timeout": 2, "socket_connect_timeout": 2}]
            },
        }
    }
    channel_layers.backends.clear()
    monkeypatch.setattr(sockets, "PING_EVERY", 0.2)
    monkeypatch.setattr(sockets, "layer_down", False)
    yield redis_server
    for task in list(sockets._watchers.values()):
        task.cancel()
    channel_layers.backends.clear()


async def opened(user, path: str = "/ws/search/") -> WebsocketCommunicator:
    cookie = await session_cookie_for(user)
    comm = WebsocketCommunicator(application, path, headers=[*HEADERS, (b"cookie", cookie.encode())])
    assert (await comm.connect(timeout=10))[0]
    return comm


async def told_and_closed(comm: WebsocketCommunicator) -> None:
    text = await comm.receive_from(timeout=15)
    assert sockets.LAYER_LOST_TEXT in text and 'id="live-notice"' in text
    assert await comm.receive_output(timeout=5) == {"type": "websocket.close", "code": 4012}


def test_the_server_uses_channels_redis_pubsub_layer_as_it_ships():
    from django.conf import settings

    if not settings.REDIS_URL:
        pytest.skip("no REDIS_URL in this set-up")
    assert settings.CHANNEL_LAYERS["default"]["BACKEND"] == "channels_redis.pubsub.RedisPubSubChannelLayer"


async def test_redis_stopped_every_socket_is_told_and_after_it_all_works_again(owner, on_redis, caplog):
    caplog.set_level(logging.WARNING, "pplxweb.sockets")
    search, library = await opened(owner), await opened(owner, "/ws/library/")
    await library.receive_from(timeout=5)  # the section as it is now
    on_redis.stop()
    await told_and_closed(search)
    await told_and_closed(library)
    # a socket opened while Redis is away: accepted, told, closed (not a failed handshake)
    cookie = await session_cookie_for(owner)
    late = WebsocketCommunicator(application, "/ws/search/", headers=[*HEADERS, (b"cookie", cookie.encode())])
    connected, _ = await late.connect(timeout=30)
    assert connected
    await told_and_closed(late)
    on_redis.start()
    async with asyncio.timeout(20):
        while sockets.layer_down:
            await asyncio.sleep(0.1)
    again = await opened(owner)
    await again.send_to(text_data=json.dumps({"action": "watch", "thread": 999999}))
    assert "That conversation was not found." in await again.receive_from(timeout=10)
    await again.disconnect()
    said = [r.getMessage() for r in caplog.records]
    assert sum("the connection to Redis is lost" in m for m in said) == 1
    assert sum("the connection to Redis is back" in m for m in said) == 1
    # and the layer carries messages again (its pub/sub connection found Redis by itself)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add("entry-1", channel)
    async with asyncio.timeout(10):
        while True:
            await layer.group_send("entry-1", {"type": "x", "n": 1})
            try:
                async with asyncio.timeout(0.5):
                    assert (await layer.receive(channel))["n"] == 1
                break
            except TimeoutError:
                continue  # subscribed a moment later than the send


async def test_an_answer_goes_on_and_is_saved_while_redis_is_away(owner, alinked, upstream, on_redis):
    serve(upstream, Paced(answer_stream(words(80)), pause=0.02))
    comm = await opened(owner)
    await comm.send_to(text_data=json.dumps({"q": "through an outage"}))
    async with asyncio.timeout(10):
        while "word3" not in await comm.receive_from(timeout=10):
            pass
    on_redis.stop()
    async with asyncio.timeout(30):
        while (await Entry.objects.aget()).status == "running":
            await asyncio.sleep(0.1)
    entry = await Entry.objects.aget()
    assert entry.status == "completed" and entry.answer == "".join(words(80))
    on_redis.start()
    await comm.disconnect()
