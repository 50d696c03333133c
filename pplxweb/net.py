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
    remote = request.META.get("REMOTE_ADDR", "") or "unknown"
    if not settings.TRUSTED_PROXIES or not _trusted(remote):
        return remote
    hops = [h.strip() for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if h.strip()]
    for hop in reversed(hops):
        if not _trusted(hop):
            return hop
    return remote
