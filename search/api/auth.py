"""Who is asking the agents' API: the bearer token, the browser origin, failed tries per address.

A token is the only credential these paths take: the session cookie is never read here, so a
web page cannot borrow a signed-in person's browser. A browser origin is refused unless the owner
listed it in PPLXWEB_API_ORIGINS (CORS). Every failed token try takes one of the address's
PPLXWEB_LOGIN_RATE_PER_IP tries an hour; with none left, the address is refused until one is back.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from accounts import ratelimit
from accounts.models import AgentToken
from accounts.services import agent_tokens
from pplxweb.net import client_ip
from search.api.errors import UNAUTHENTICATED, WRONG_TOKEN, ApiError

HOUR = timedelta(hours=1)
SCOPE = "agent-ip"
ALLOWED_HEADERS = "Authorization, Content-Type, MCP-Protocol-Version, Mcp-Session-Id, Last-Event-ID"
EXPOSED_HEADERS = "X-Pplxweb-Conversation, X-Pplxweb-Notice, Mcp-Session-Id, Retry-After"


def bearer(request: HttpRequest) -> str | None:
    return bearer_value(request.headers.get("Authorization", ""))


def bearer_value(header: str) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` header's value, else None."""
    scheme, _, value = str(header).partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def check_origin(request: HttpRequest) -> None:
    """A browser page may call the API only from an origin the owner allowed."""
    origin = request.headers.get("Origin")
    if origin is not None and origin.lower() not in settings.API_ORIGINS:
        raise ApiError(
            403,
            "Browser pages may not call pplxweb's agents' API (the owner can allow an origin with "
            "PPLXWEB_API_ORIGINS).",
            "permission_error",
            "origin_not_allowed",
        )


def authenticate(request: HttpRequest) -> AgentToken:
    """The request's token (with its person), or ApiError 401 (429 for an address that failed too
    often). Runs on the database thread."""
    check_origin(request)
    token = bearer(request)
    if token is None:
        raise ApiError(401, UNAUTHENTICATED, "authentication_error", "missing_token")
    address = client_ip(request)
    capacity = settings.LOGIN_RATE_PER_IP
    verdict = ratelimit.peek(SCOPE, address, capacity, HOUR)
    if not verdict.allowed:
        raise ApiError(
            429,
            f"Too many wrong agent tokens from this address. Try again {verdict.wait_text}.",
            "rate_limit_error",
            "too_many_failed_tokens",
            verdict.retry_after,
        )
    found = agent_tokens.authenticate(token)
    if found is None:
        ratelimit.take(SCOPE, address, capacity, HOUR)
        raise ApiError(401, WRONG_TOKEN, "authentication_error", "invalid_token")
    return found


def allow_origin(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """CORS headers for an origin the owner allowed (none by default)."""
    origin = request.headers.get("Origin")
    if origin is not None and origin.lower() in settings.API_ORIGINS:
        response["Access-Control-Allow-Origin"] = origin
        response["Access-Control-Expose-Headers"] = EXPOSED_HEADERS
        response["Vary"] = "Origin"
    return response


def preflight(request: HttpRequest) -> HttpResponse:
    """An OPTIONS request: CORS's answer for an allowed origin, else a plain 403."""
    origin = request.headers.get("Origin")
    if origin is None or origin.lower() not in settings.API_ORIGINS:
        return HttpResponse(status=403)
    response = HttpResponse(status=204)
    response["Access-Control-Allow-Methods"] = "GET, POST, DELETE, OPTIONS"
    response["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
    response["Access-Control-Max-Age"] = "600"
    return allow_origin(request, response)
