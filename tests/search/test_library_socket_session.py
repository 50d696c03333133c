"""The Settings library socket follows the session like the search socket: signing out, a
password change elsewhere, removal from the household and an unlink close it, saying why in place
of the library section; an update that finds the session over is never sent (thread titles are
private) and closes it instead."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.sessions.models import Session
from django.test import AsyncClient
from django.urls import reverse

from pplxweb.asgi import application
from search.library.runner import group
from tests.conftest import PASSWORD, session_cookie_for
from tests.search.test_socket_session import HEADERS, closed_with
from tests.search.test_starts import link

pytestmark = pytest.mark.django_db(transaction=True)


async def library_socket(user) -> tuple[WebsocketCommunicator, AsyncClient]:
    """A browser of its own on Settings: a session, the library socket, a client for its pages."""
    cookie = await session_cookie_for(user)
    comm = WebsocketCommunicator(
        application, "/ws/library/", headers=[*HEADERS, (b"cookie", cookie.encode())]
    )
    assert (await comm.connect())[0]
    assert 'id="library"' in await comm.receive_from(timeout=5)  # the section as it is now
    client = AsyncClient()
    client.cookies[settings.SESSION_COOKIE_NAME] = cookie.split("=", 1)[1]
    return comm, client


async def progress(user, title: str) -> None:
    """A library job's update, as the runner sends it to the person's Settings pages."""
    html = f'<div id="library" hx-swap-oob="true"><li><strong>{title}</strong></li></div>'
    await get_channel_layer().group_send(group(user.pk), {"type": "library.fragment", "html": html})


async def test_signing_out_closes_the_library_socket_and_no_title_follows(owner):
    here, client = await library_socket(owner)
    elsewhere, _ = await library_socket(owner)
    assert (await client.post(reverse("accounts:logout"))).status_code == 302
    text = await closed_with(here, 4401)
    assert "You were signed out" in text and 'id="library"' in text and "Sign in again" in text
    await progress(owner, "My private thread")
    assert "My private thread" in await elsewhere.receive_from(timeout=5)  # still signed in there
    await elsewhere.disconnect()


async def test_an_update_after_a_silent_sign_out_is_not_sent(owner):
    here, _ = await library_socket(owner)
    await Session.objects.all().adelete()  # ended without a word to the socket (another process, say)
    await progress(owner, "My private thread")
    text = await closed_with(here, 4401)
    assert "My private thread" not in text and "You were signed out" in text


async def test_a_password_change_closes_the_other_library_sockets(owner):
    here, client = await library_socket(owner)
    elsewhere, _ = await library_socket(owner)
    new = "an entirely new passphrase 7"
    response = await client.post(
        reverse("accounts:password"), {"old_password": PASSWORD, "new_password1": new, "new_password2": new}
    )
    assert response.status_code == 302
    assert "You were signed out" in await closed_with(elsewhere, 4401)
    await progress(owner, "Still mine")
    assert "Still mine" in await here.receive_from(timeout=5)  # the browser that changed it
    await here.disconnect()


async def test_removal_from_the_household_closes_the_members_library_socket(owner, member):
    theirs, _ = await library_socket(member)
    owners = AsyncClient()
    await sync_to_async(owners.force_login)(owner)
    removed = await owners.post(reverse("accounts:remove_member", args=[member.pk]), {"history": "delete"})
    assert removed.status_code == 302
    assert "You were signed out" in await closed_with(theirs, 4401)


async def test_unlinking_closes_the_library_socket_saying_so(owner):
    await sync_to_async(link)(owner)
    here, client = await library_socket(owner)
    response = await client.post(reverse("accounts:perplexity"), {"unlink": "1"})
    assert response.status_code in (200, 302)
    assert "Perplexity link was removed" in await closed_with(here, 4403)
