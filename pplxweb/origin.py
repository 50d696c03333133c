"""Websocket origin check: a socket is accepted only from the page's own origin.

Channels' AllowedHostsOriginValidator compares host names only, so a page on another port of the
same machine (home servers run many web apps on one) could open the socket with a member's
cookie. This judges the handshake as Django's CSRF check judges a form post: the Origin must be
exactly scheme://host[:port] of the request (its Host header, valid for ALLOWED_HOSTS, and the
scheme the browser used, as a trusted proxy forwards it), or one of CSRF_TRUSTED_ORIGINS.
"""

from __future__ import annotations

import ipaddress
import logging

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import is_same_domain, split_domain_port, validate_host

log = logging.getLogger(__name__)


def _header(scope: dict, name: bytes) -> str | None:
    """The header's value, or None when it is missing, repeated or not ASCII (no browser sends that)."""
    values = [v for k, v in scope.get("headers", ()) if k.lower() == name]
    if len(values) != 1:
        return None
    try:
        return values[0].decode("ascii")
    except UnicodeDecodeError:
        return None


def _from_trusted_proxy(scope: dict) -> bool:
    client = scope.get("client") or (None, None)
    try:
        ip = ipaddress.ip_address(client[0])
    except (TypeError, ValueError):
        return False
    return any(ip in network for network in settings.TRUSTED_PROXIES)


def _secure(scope: dict) -> bool:
    """Whether the browser's page was https: the socket's own scheme, or what a trusted proxy says."""
    if scope.get("scheme") == "wss":
        return True
    proxy_header = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy_header and _from_trusted_proxy(scope):
        header = proxy_header[0].removeprefix("HTTP_").replace("_", "-").lower().encode()
        forwarded = _header(scope, header) or ""
        return forwarded.split(",")[0].strip() == proxy_header[1]
    return False


def own_origin(scope: dict) -> str | None:
    """scheme://host of the page that may open this socket, or None when the Host is not ours."""
    host = _header(scope, b"host")
    if not host or host != host.strip():
        return None
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    return f"{'https' if _secure(scope) else 'http'}://{host.lower()}"


def origin_allowed(scope: dict) -> bool:
    origin = _header(scope, b"origin")
    if not origin or origin == "null" or "@" in origin:
        return False
    # compared exactly, as Django's CSRF check does: browsers send origins in lower case
    if origin == own_origin(scope):
        return True
    for trusted in settings.CSRF_TRUSTED_ORIGINS:
        if origin == trusted:
            return True
        # Django's wildcard form: https://*.example.com
        scheme, _, rest = trusted.partition("://*")
        if rest and origin.startswith(f"{scheme}://") and is_same_domain(origin.split("://", 1)[1], rest):
            return True
    return False


class SameOriginValidator:
    """ASGI middleware for the websocket router: refuse (close before accept) any other origin."""

    def __init__(self, application) -> None:
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":
            raise ValueError("SameOriginValidator guards websockets only")
        if origin_allowed(scope):
            return await self.application(scope, receive, send)
        log.warning(
            "websocket refused: origin %r is not this page's own (host %r)",
            (_header(scope, b"origin") or "")[:200],
            (_header(scope, b"host") or "")[:200],
        )
        return await WebsocketDenier()(scope, receive, send)
