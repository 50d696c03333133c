"""Ids out of their column's range (pplxweb/ids.py) are answered like any unknown id, never with
a 500: in every address that names a row, in forms and in socket messages. Run on SQLite (which
cannot bind an int past 64 bits) and PostgreSQL (a user's id column is 32-bit there)."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import AsyncClient

from pplxweb import ids
from pplxweb.asgi import application
from search.models import Entry, Thread
from tests.conftest import session_cookie_for
from tests.search.test_socket_session import HEADERS
from tests.search.test_starts import link

pytestmark = pytest.mark.django_db(transaction=True)

HUGE = ["9" * 30, str(2**63), str(2**64 + 1)]
ADDRESSES = [
    ("get", "/thread/{}/"), ("post", "/entry/{}/stop/"), ("post", "/entry/{}/reask/"),
    ("get", "/entry/{}/image/0/"), ("get", "/entry/{}/answer.md"), ("get", "/entry/{}/report.md"),
    ("get", "/attachment/{}/"), ("get", "/attachment/{}/?inline=1"), ("post", "/attachment/{}/remove/"),
    ("get", "/thread/{}/export.md"), ("get", "/thread/{}/export.json"),
    ("post", "/settings/household/{}/remove/"), ("get", "/?again={}"),
]  # fmt: skip


@pytest.mark.parametrize("huge", HUGE)
@pytest.mark.parametrize(("method", "address"), ADDRESSES)
def test_an_address_with_an_id_out_of_range_is_a_404(owner_client, method, address, huge):
    response = getattr(owner_client, method)(address.format(huge))
    assert response.status_code == 404
    unknown = getattr(owner_client, method)(address.format(123456))  # a row that is not there
    assert unknown.status_code in (404, 204)  # removing a file that is not there: nothing to do


@pytest.mark.parametrize("huge", HUGE)
def test_history_delete_and_paging_treat_it_as_no_entry(owner, owner_client, huge):
    thread = Thread.objects.create(user=owner, title="Kept")
    Entry.objects.create(thread=thread, user=owner, question="kept", status=Entry.Status.COMPLETED)
    assert owner_client.get(f"/history/delete/?entry={huge}").status_code == 200
    response = owner_client.post("/history/delete/", {"entry": [huge], "confirm": "1"})
    assert response.status_code == 302 and Entry.objects.count() == 1
    assert owner_client.get(f"/history/?before_id={huge}").status_code == 200


@pytest.mark.parametrize("huge", HUGE)
async def test_the_plain_form_says_not_found(owner, huge):
    await sync_to_async(link)(owner)
    client = AsyncClient()
    await sync_to_async(client.force_login)(owner)
    response = await client.post("/search/", {"q": "with a file", "attachment": [huge]})
    assert response.status_code == 200 and "attached files was not found" in response.content.decode()
    response = await client.post("/search/", {"q": "a follow-up", "thread": huge})
    assert response.status_code == 200 and "That conversation was not found." in response.content.decode()


async def test_socket_messages_treat_it_as_no_row(owner):
    cookie = await session_cookie_for(owner)
    socket = WebsocketCommunicator(
        application, f"/ws/search/?thread={HUGE[0]}", headers=[*HEADERS, (b"cookie", cookie.encode())]
    )
    assert (await socket.connect())[0]
    assert "That conversation was not found." in await socket.receive_from(timeout=5)
    for huge in HUGE:
        await socket.send_to(text_data=json.dumps({"action": "watch", "thread": huge}))
        assert "That conversation was not found." in await socket.receive_from(timeout=5)
        await socket.send_to(text_data=json.dumps({"action": "stop", "entry": int(huge)}))
        assert "That answer was not found." in await socket.receive_from(timeout=5)
        await socket.send_to(text_data=json.dumps({"action": "recheck", "entries": [huge, int(huge)]}))
        assert await socket.receive_nothing(timeout=0.3)
    await socket.disconnect()


def test_the_range_is_the_columns_own(django_user_model):
    from django.db import connection

    assert ids.highest(Entry) == 2**63 - 1
    person = ids.highest(django_user_model)
    assert person == (2**31 - 1 if connection.vendor == "postgresql" else 2**63 - 1)
    assert ids.parse(django_user_model, str(person)) == person
    assert ids.parse(django_user_model, str(person + 1)) is None
    for bad in (0, -1, True, 1.0, "1e3", " 7", "٣", [], None, "9" * 21):
        assert ids.parse(Entry, bad) is None, bad
    assert ids.parse_all(Entry, ["3", 3, "x", "4", HUGE[0]]) == [3, 4]
