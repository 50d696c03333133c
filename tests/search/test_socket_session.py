"""Sockets follow the session: signing out, a password change, removal from the household and
an unlink close the person's open sockets, and each message checks the session again."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.sessions.models import Session
from django.test import AsyncClient
from django.urls import reverse

from pplxweb.asgi import application
from tests.conftest import PASSWORD, session_cookie_for
from tests.search.test_starts import link

pytestmark = pytest.mark.django_db(transaction=True)
HEADERS = [(b"origin", b"http://localhost"), (b"host", b"localhost")]


async def signed_in(user) -> tuple[WebsocketCommunicator, AsyncClient]:
    """A browser of its own: a session, its socket, and a client for its pages."""
    cookie = await session_cookie_for(user)
    comm = WebsocketCommunicator(application, "/ws/search/", headers=[*HEADERS, (b"cookie", cookie.encode())])
    assert (await comm.connect())[0]
    client = AsyncClient()
    client.cookies[settings.SESSION_COOKIE_NAME] = cookie.split("=", 1)[1]
    return comm, client


async def closed_with(comm: WebsocketCommunicator, code: int) -> str:
    text = await comm.receive_from(timeout=5)
    assert await comm.receive_output(timeout=5) == {"type": "websocket.close", "code": code}
    await comm.disconnect()  # the server closed it; the consumer instance ends now
    return text


async def still_open(comm: WebsocketCommunicator) -> None:
    assert await comm.receive_nothing(timeout=0.3)
    await comm.send_to(text_data=json.dumps({"action": "watch", "thread": 999999}))
    assert "That conversation was not found." in await comm.receive_from(timeout=5)
    await comm.disconnect()


async def test_signing_out_closes_that_sessions_sockets_only(owner):
    here, client = await signed_in(owner)
    elsewhere, _ = await signed_in(owner)
    assert (await client.post(reverse("accounts:logout"))).status_code == 302
    text = await closed_with(here, 4401)
    assert "You were signed out" in text and 'href="/accounts/login/"' in text and "Sign in again" in text
    await still_open(elsewhere)  # signing out in one browser leaves the other signed in


async def test_a_password_change_closes_the_other_sessions_sockets(owner):
    here, client = await signed_in(owner)
    elsewhere, _ = await signed_in(owner)
    new = "an entirely new passphrase 7"
    response = await client.post(
        reverse("accounts:password"),
        {"old_password": PASSWORD, "new_password1": new, "new_password2": new},
    )
    assert response.status_code == 302
    assert "You were signed out" in await closed_with(elsewhere, 4401)
    await still_open(here)  # the browser that changed it stays signed in


async def test_removal_from_the_household_closes_the_members_sockets(owner, member):
    theirs, _ = await signed_in(member)
    _, owners = await signed_in(owner)
    response = await owners.post(reverse("accounts:remove_member", args=[member.pk]), {"history": "delete"})
    assert response.status_code == 302
    assert "You were signed out" in await closed_with(theirs, 4401)


async def test_unlinking_closes_the_persons_sockets_saying_so(owner):
    await sync_to_async(link)(owner)
    here, client = await signed_in(owner)
    response = await client.post(reverse("accounts:perplexity"), {"unlink": "1"})
    assert response.status_code in (200, 302)
    assert "Perplexity link was removed" in await closed_with(here, 4403)


async def test_every_message_checks_the_session_again(owner):
    here, _ = await signed_in(owner)
    await Session.objects.all().adelete()  # ended without a word to the socket (another process, say)
    await here.send_to(text_data=json.dumps({"q": "still me?"}))
    assert "You were signed out" in await closed_with(here, 4401)
