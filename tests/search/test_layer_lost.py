"""A socket told by the channel layer that its messages may be lost (`layer.lost`, sent by
pplxweb.redis_layer when the connection to Redis goes) says so and closes with 4012, which makes
the page reopen it; told twice, it says it once. The message is sent through the configured layer
(in-memory or Redis), as the layer would put it on the socket's channel."""

from __future__ import annotations

import json

import pytest
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from pplxweb import sockets
from pplxweb.asgi import application
from search.library.runner import group as library_group
from tests.conftest import session_cookie_for

pytestmark = pytest.mark.django_db(transaction=True)
HEADERS = [(b"origin", b"http://localhost"), (b"host", b"localhost")]


async def opened(user, path: str) -> WebsocketCommunicator:
    cookie = await session_cookie_for(user)
    comm = WebsocketCommunicator(application, path, headers=[*HEADERS, (b"cookie", cookie.encode())])
    assert (await comm.connect())[0]
    return comm


@pytest.mark.parametrize("path", ["/ws/search/", "/ws/library/"])
async def test_a_socket_told_of_a_lost_layer_says_so_and_closes_for_the_page_to_reopen(owner, path):
    comm = await opened(owner, path)
    if path == "/ws/library/":
        await comm.receive_from(timeout=5)  # the section as it is now
    group = sockets.group(owner.pk) if path == "/ws/search/" else library_group(owner.pk)
    for _ in range(2):  # an outage noticed twice (two shards, say): one sentence
        await get_channel_layer().group_send(group, {"type": "layer.lost"})
    text = await comm.receive_from(timeout=5)
    assert sockets.LAYER_LOST_TEXT in text and 'id="live-notice"' in text and 'hx-swap-oob="true"' in text
    assert await comm.receive_output(timeout=5) == {"type": "websocket.close", "code": 4012}
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()


async def test_the_reopened_socket_works_as_before(owner):
    comm = await opened(owner, "/ws/search/")
    await get_channel_layer().group_send(sockets.group(owner.pk), {"type": "layer.lost"})
    await comm.receive_from(timeout=5)
    await comm.disconnect()
    again = await opened(owner, "/ws/search/")
    await again.send_to(text_data=json.dumps({"action": "watch", "thread": 999999}))
    assert "That conversation was not found." in await again.receive_from(timeout=5)
    await again.disconnect()
