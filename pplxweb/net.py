"""Who is asking: the client address, believing forwarded headers only from trusted proxies."""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest


def _trusted(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in settings.TRUSTED_PROXIES)


def client_ip(request: HttpRequest) -> str:
    """REMOTE_ADDR, unless it is a trusted proxy: then the nearest untrusted X-Forwarded-For hop."""
    return _client(request.META.get("REMOTE_ADDR", ""), request.META.get("HTTP_X_FORWARDED_FOR", ""))


def scope_client_ip(scope: dict) -> str:
    """The same for an ASGI scope (before Django has made a request of it)."""
    client = scope.get("client") or ("",)
    forwarded = next((v for k, v in scope.get("headers", ()) if k.lower() == b"x-forwarded-for"), b"")
    return _client(str(client[0] or ""), forwarded.decode("latin-1"))


def _client(remote: str, forwarded: str) -> str:
    remote = remote or "unknown"
    if not settings.TRUSTED_PROXIES or not _trusted(remote):
        return remote
    hops = [h.strip() for h in forwarded.split(",") if h.strip()]
    for hop in reversed(hops):
        if not _trusted(hop):
            return hop
    return remote
