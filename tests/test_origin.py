"""The websocket is accepted only from the page's own origin (scheme, host and port), as Django's
CSRF check judges a form post; the real ASGI app, a real session."""

from __future__ import annotations

import ipaddress

import pytest
from channels.testing import WebsocketCommunicator

from pplxweb.asgi import application
from pplxweb.origin import origin_allowed
from tests.conftest import session_cookie_for


def scope(origin: str | bytes | None, host: str | bytes | None = "pplx.lan:8000", **more) -> dict:
    headers = []
    for name, value in ((b"origin", origin), (b"host", host)):
        if value is not None:
            headers.append((name, value.encode() if isinstance(value, str) else value))
    headers += more.pop("headers", [])
    return {
        "type": "websocket",
        "scheme": "ws",
        "client": ("192.168.1.20", 50000),
        "headers": headers,
        **more,
    }


@pytest.fixture(autouse=True)
def _hosts(settings):
    settings.ALLOWED_HOSTS = ["pplx.lan", "localhost", "xn--bcher-kva.example", "pplx.example.com"]
    settings.CSRF_TRUSTED_ORIGINS = []


def test_the_pages_own_origin_is_allowed():
    assert origin_allowed(scope("http://pplx.lan:8000"))
    assert origin_allowed(scope("http://pplx.lan", host="pplx.lan"))
    assert origin_allowed(scope("http://xn--bcher-kva.example", host="xn--bcher-kva.example"))
    assert origin_allowed(scope("http://pplx.lan:8000", host="PPLX.LAN:8000"))  # host names are caseless


@pytest.mark.parametrize(
    "origin",
    [
        "http://pplx.lan:8080",  # another web app on the same machine
        "http://pplx.lan",  # no port against a port
        "https://pplx.lan:8000",  # other scheme
        "http://pplx.lan:80",
        "http://evil.example",
        "null",
        "",
        "http://user@pplx.lan:8000",  # userinfo
        "http://user:pw@pplx.lan:8000",
        "http://pplx.lan.:8000",  # trailing dot: another origin to the browser
        "HTTP://PPLX.LAN:8000",  # no browser sends that
        "http://pplx.lan:8000/",
        "http://pplx.lan:8000 ",
        "http://bücher.example",  # IDN not in its ASCII form
        "http://pplx.lan:8000.evil.example",
    ],
)
def test_every_other_origin_is_refused(origin):
    assert not origin_allowed(scope(origin))


def test_missing_or_repeated_headers_are_refused():
    assert not origin_allowed(scope(None))
    assert not origin_allowed(scope("http://pplx.lan:8000", host=None))
    doubled = scope("http://pplx.lan:8000", headers=[(b"origin", b"http://pplx.lan:8000")])
    assert not origin_allowed(doubled)
    assert not origin_allowed(scope("http://b\xfccher.example".encode("latin-1"), host="pplx.lan"))


def test_a_host_the_server_does_not_serve_is_refused_whatever_the_origin():
    assert not origin_allowed(scope("http://evil.example:8000", host="evil.example:8000"))
    # a Host with a port the server does not listen on must match the origin exactly, as a form
    # post would: a page on port 8000 cannot reach it claiming port 9999
    assert not origin_allowed(scope("http://pplx.lan:8000", host="pplx.lan:9999"))
    assert not origin_allowed(scope("http://pplx.lan:9999", host="pplx.lan:8000"))
    assert not origin_allowed(scope("http://pplx.lan:8000", host=" pplx.lan:8000"))


def test_csrf_trusted_origins_are_allowed_exactly_or_by_their_wildcard(settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://pplx.example.com", "https://*.home.example"]
    assert origin_allowed(scope("https://pplx.example.com"))
    assert origin_allowed(scope("https://a.home.example"))
    assert not origin_allowed(scope("http://pplx.example.com"))
    assert not origin_allowed(scope("https://pplx.example.com:8443"))
    assert not origin_allowed(scope("https://home.example.evil"))


def test_behind_the_readmes_reverse_proxy(settings):
    # PPLXWEB_HTTPS=1 PPLXWEB_TRUSTED_PROXIES=127.0.0.1 PPLXWEB_ALLOWED_HOSTS=pplx.example.com,
    # nginx passing Host and X-Forwarded-Proto
    settings.TRUSTED_PROXIES = [ipaddress.ip_network("127.0.0.1/32")]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    proto = [(b"x-forwarded-proto", b"https")]
    proxied = {"client": ("127.0.0.1", 40000), "headers": proto}
    assert origin_allowed(scope("https://pplx.example.com", host="pplx.example.com", **proxied))
    assert not origin_allowed(scope("http://pplx.example.com", host="pplx.example.com", **proxied))
    assert not origin_allowed(scope("https://pplx.example.com:8443", host="pplx.example.com", **proxied))
    # the header counts only from the trusted proxy
    direct = {"client": ("192.168.1.20", 40000), "headers": proto}
    assert not origin_allowed(scope("https://pplx.example.com", host="pplx.example.com", **direct))
    # without the header the page was plain http
    plain = {"client": ("127.0.0.1", 40000)}
    assert not origin_allowed(scope("https://pplx.example.com", host="pplx.example.com", **plain))
    assert origin_allowed(scope("https://pplx.lan:8000", scheme="wss"))


@pytest.mark.django_db(transaction=True)
async def test_the_app_refuses_a_page_on_another_port_with_the_members_cookie(owner):
    cookie = (b"cookie", (await session_cookie_for(owner)).encode())
    host = (b"host", b"localhost:8000")
    for origin, accepted in (
        (b"http://localhost:8080", False),
        (b"https://localhost:8000", False),
        (b"http://localhost", False),
        (b"http://localhost:8000", True),
    ):
        comm = WebsocketCommunicator(application, "/ws/search/", headers=[(b"origin", origin), host, cookie])
        connected, _ = await comm.connect()
        assert connected is accepted, origin
        await comm.disconnect()
