"""The server's side of "the box knows what is running" and of a page of another build.

One answer at a time in a conversation: a follow-up asked while the conversation is answering is
refused with a sentence, whatever asks it (a second socket, a page without JavaScript), and
nothing is written or sent upstream; a new conversation meanwhile is a search of its own. A
socket from a page of another build (pplxweb/build.py) is closed with 4409, so the page offers a
reload instead of taking fragments it was not written for.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.testing import WebsocketCommunicator
from django.urls import reverse

from pplxweb import build
from pplxweb.asgi import application
from pplxweb.env import ConfigError, env_name
from search.live import asking
from search.models import Entry
from tests.conftest import session_cookie_for
from tests.search.conftest import Paced, answer_stream, serve, words
from tests.search.test_consumer import HOST, ORIGIN, connect, receive_until
from tests.search.test_pages import client_for

pytestmark = pytest.mark.django_db(transaction=True)
BUSY = asking.ConversationBusy().message


async def running_answer(owner, upstream):
    """A socket whose question's answer is arriving (about 3 s of it), and the upstream route."""
    route = serve(upstream, Paced(answer_stream(words(300)), pause=0.01), Paced(answer_stream(["next"])))
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "the first question"}))
    await receive_until(comm, "word3")
    return comm, route, await Entry.objects.aget()


async def test_a_follow_up_from_a_second_socket_waits_for_the_running_answer(owner, alinked, upstream):
    first, route, entry = await running_answer(owner, upstream)
    second = await connect(owner, f"/ws/search/?thread={entry.thread_id}")
    await second.send_to(text_data=json.dumps({"q": "asked from another tab", "thread": entry.thread_id}))
    refused = await receive_until(second, "search-error")
    assert BUSY in refused[-1] and "asked from another tab" not in "".join(refused)
    assert await Entry.objects.acount() == 1 and route.call_count == 1

    await receive_until(second, "status-completed", timeout=15)  # it watches the answer too
    await second.send_to(text_data=json.dumps({"q": "asked from another tab", "thread": entry.thread_id}))
    await receive_until(second, "search-accepted")
    await receive_until(second, "status-completed")
    assert await Entry.objects.filter(thread=entry.thread_id).acount() == 2 and route.call_count == 2
    await first.disconnect()
    await second.disconnect()


async def test_a_follow_up_posted_without_javascript_while_it_answers_is_refused(owner, alinked, upstream):
    comm, route, entry = await running_answer(owner, upstream)
    client = await client_for(owner)
    response = await client.post(reverse("search:ask"), {"q": "posted meanwhile", "thread": entry.thread_id})
    assert response.status_code == 200  # the conversation again, the sentence beside the box
    page = response.content.decode()
    assert BUSY in page and 'name="q"' in page and "posted meanwhile" in page
    assert await Entry.objects.acount() == 1 and route.call_count == 1
    await comm.send_to(text_data=json.dumps({"action": "stop", "entry": entry.pk}))
    await receive_until(comm, "status-stopped")
    await comm.disconnect()


async def test_a_new_conversation_while_another_answers_is_a_search_of_its_own(owner, alinked, upstream):
    comm, route, entry = await running_answer(owner, upstream)
    await comm.send_to(text_data=json.dumps({"q": "something else entirely"}))
    accepted = await receive_until(comm, "search-accepted")
    assert "something else entirely" in "".join(accepted)
    other = await Entry.objects.aget(question="something else entirely")
    assert other.thread_id != entry.thread_id
    async with asyncio.timeout(10):  # asked upstream too (its run starts after the page is told)
        while route.call_count < 2:
            await asyncio.sleep(0.01)
    await receive_until(comm, "status-completed", timeout=15)
    await comm.disconnect()


@pytest.mark.parametrize("path", ["/ws/search/", "/ws/library/"])
async def test_a_socket_of_another_build_is_closed_with_4409(owner, path):
    cookie = await session_cookie_for(owner)
    headers = [ORIGIN, HOST, (b"cookie", cookie.encode())]
    stale = WebsocketCommunicator(application, f"{path}?build=0.0.1-000000000000", headers=headers)
    connected, _ = await stale.connect()
    assert connected  # accepted first: a refused handshake would tell the page nothing
    assert await stale.receive_output(timeout=5) == {"type": "websocket.close", "code": build.UPDATED}
    current = WebsocketCommunicator(application, f"{path}?build={build.build()}", headers=headers)
    assert (await current.connect())[0]
    if path == "/ws/library/":  # it tells the import's state at once
        assert (await current.receive_output(timeout=5))["type"] == "websocket.send"
    assert await current.receive_nothing(timeout=0.3)  # open, not closed
    await current.disconnect()


def test_the_build_follows_the_code_unless_named(settings, tmp_path):
    for part in build.PARTS:
        (tmp_path / part).mkdir()
    (tmp_path / "static" / "app.js").write_text("one")
    settings.BASE_DIR, settings.BUILD = tmp_path, ""
    build._fingerprint.cache_clear()
    try:
        first = build.build()
        (tmp_path / "static" / "app.js").write_text("two")  # a new release of the page's code
        build._fingerprint.cache_clear()
        assert build.build() != first and build.build().startswith(settings.VERSION + "-")
        settings.BUILD = "release-7"
        assert build.build() == "release-7"
    finally:
        build._fingerprint.cache_clear()
    assert build.stale({"query_string": b"build=other"})
    assert not build.stale({"query_string": b"build=release-7"})
    assert not build.stale({"query_string": b"thread=3"})  # a client that names none


@pytest.mark.parametrize("value", ["a b", "x" * 65, "<script>", "ü"])
def test_a_malformed_build_name_stops_start_up_with_a_sentence(value):
    with pytest.raises(ConfigError, match="PPLXWEB_BUILD takes letters"):
        env_name({"PPLXWEB_BUILD": value}, "PPLXWEB_BUILD")
    assert env_name({}, "PPLXWEB_BUILD") == "" and env_name({"PPLXWEB_BUILD": "v1.2_3-rc"}, "PPLXWEB_BUILD")
