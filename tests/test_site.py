"""Site-wide behaviour: health, security headers, cookies, websocket authentication."""

from __future__ import annotations

import json

import pytest
from channels.testing import WebsocketCommunicator
from django.urls import reverse

from pplxweb.asgi import application
from tests.conftest import session_cookie_for

ORIGIN = (b"origin", b"http://localhost")
HOST = (b"host", b"localhost")


@pytest.mark.django_db
def test_healthz_answers_without_sign_in(client, settings):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "version": settings.VERSION}
    assert settings.SECRET_KEY not in response.content.decode()


@pytest.mark.django_db
def test_security_headers_and_cookie_names(client, owner):
    response = client.get(reverse("accounts:login"))  # redirects to setup? no: an owner exists
    assert response.status_code == 200
    csp = response["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    cookie = response.cookies["pplxweb_csrftoken"]
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    response = client.post(
        reverse("accounts:login"), {"username": "owner", "password": "correct horse battery"}
    )
    session = response.cookies["pplxweb_sessionid"]
    assert session["httponly"] and session["samesite"] == "Lax" and not session["secure"]


@pytest.mark.django_db
def test_unknown_host_is_refused(client):
    assert client.get("/healthz", HTTP_HOST="evil.example").status_code == 400


@pytest.mark.django_db(transaction=True)
async def test_websocket_without_a_session_is_refused():
    comm = WebsocketCommunicator(application, "/ws/search/", headers=[ORIGIN, HOST])
    connected, _ = await comm.connect()
    assert not connected
    await comm.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_websocket_with_a_session_is_accepted(owner):
    cookie = await session_cookie_for(owner)
    comm = WebsocketCommunicator(
        application, "/ws/search/", headers=[ORIGIN, HOST, (b"cookie", cookie.encode())]
    )
    connected, _ = await comm.connect()
    assert connected
    await comm.send_to(text_data=json.dumps({"q": "hello"}))
    await comm.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_websocket_from_a_foreign_origin_is_refused_even_with_a_session(owner):
    cookie = await session_cookie_for(owner)
    for origin in (b"http://evil.example", b"null"):
        comm = WebsocketCommunicator(
            application, "/ws/search/", headers=[(b"origin", origin), (b"cookie", cookie.encode())]
        )
        connected, _ = await comm.connect()
        assert not connected
        await comm.disconnect()
    comm = WebsocketCommunicator(application, "/ws/search/", headers=[(b"cookie", cookie.encode())])
    connected, _ = await comm.connect()
    assert not connected  # no Origin at all
    await comm.disconnect()


def test_what_the_server_loads_at_start_is_set_aside_from_the_garbage_collector():
    # loading the ASGI app warms it up and freezes what is loaded: full collections then skip
    # the ~100,000 objects that live as long as the server (each walk of them paused it ~70 ms),
    # and the collector runs less often (pplxweb.collector)
    import gc

    import pplxweb.asgi  # noqa: F401
    from pplxweb import collector

    assert gc.get_freeze_count() > 20_000
    assert gc.get_threshold() == (collector.YOUNG, collector.MIDDLE_AFTER, collector.FULL_AFTER)
