"""A socket told that its messages may be lost (Redis did not answer: pplxweb/sockets.py tells
every open socket of the process) says so and closes with 4012, which makes the page reopen it;
told twice, it says it once."""

from __future__ import annotations

import json

import pytest
from channels.testing import WebsocketCommunicator

from pplxweb import sockets
from pplxweb.asgi import application
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
    for _ in range(2):  # an outage noticed twice: one sentence
        await sockets.tell_open_sockets()
    text = await comm.receive_from(timeout=5)
    assert sockets.LAYER_LOST_TEXT in text and 'id="live-notice"' in text and 'hx-swap-oob="true"' in text
    assert await comm.receive_output(timeout=5) == {"type": "websocket.close", "code": 4012}
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()


async def test_the_reopened_socket_works_as_before(owner):
    comm = await opened(owner, "/ws/search/")
    await sockets.tell_open_sockets()
    await comm.receive_from(timeout=5)
    await comm.disconnect()
    again = await opened(owner, "/ws/search/")
    await again.send_to(text_data=json.dumps({"action": "watch", "thread": 999999}))
    assert "That conversation was not found." in await again.receive_from(timeout=5)
    await again.disconnect()
