"""Reading Perplexity's HTTP responses: which error a failed one means, and small JSON helpers."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import httpx

from pplxweb.perplexity.errors import (
    GONE,
    AuthError,
    ChallengeError,
    RateLimited,
    RequestRejected,
    SignInError,
    ThreadGone,
    UpstreamError,
)

ERROR_BODY_LIMIT = 64 * 1024
CF_MARKERS = (
    "just a moment", "enable javascript and cookies", "_cf_chl_opt", "cdn-cgi/challenge-platform",
    "cf-browser-verification", "checking your browser",
)  # fmt: skip


async def read_limited(response: httpx.Response, limit: int = ERROR_BODY_LIMIT) -> None:
    """Read at most `limit` bytes into response._content (by default enough to classify)."""
    body = bytearray()
    try:
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) >= limit:
                break
    except httpx.HTTPError:
        pass
    response._content = bytes(body[:limit])


async def read_body(response: httpx.Response, limit: int) -> bytes:
    """At most `limit` bytes of the body (one more if there were more), as bytes of their own."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            del body[limit + 1 :]
            break
    return bytes(body)


def is_json(response: httpx.Response) -> bool:
    return "json" in response.headers.get("content-type", "").lower() or response.content[:1] in (
        b"{",
        b"[",
    )


def json_body(response: httpx.Response) -> dict:
    try:
        value = json.loads(response.content)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def looks_like_challenge(response: httpx.Response, body: bytes | None = None) -> bool:
    """Cloudflare's challenge rather than Perplexity's reply; `body`: the reply's bytes when they
    were read apart from the response (client.read_apart), else its content."""
    if response.headers.get("cf-mitigated", "").lower() == "challenge":
        return True
    body = response.content if body is None else body
    if "text/html" not in response.headers.get("content-type", "").lower() and body[:1] in (b"{", b"["):
        return False
    text = body[:ERROR_BODY_LIMIT].decode("utf-8", "replace").lower()
    return any(marker in text for marker in CF_MARKERS)


def retry_after(response: httpx.Response) -> int | None:
    value = response.headers.get("retry-after", "").strip()
    return max(1, min(int(value), 86_400)) if value.isdigit() else None


def gone_code(response: httpx.Response) -> str:
    """The code of a refused conversation (deleted, expired, not viewable: errors.GONE) that a
    400, 403 or 404 carries in its JSON, else ""."""
    if response.status_code not in (400, 403, 404) or not is_json(response):
        return ""
    text = response.content[:4096].decode("utf-8", "replace")
    return next((code for code in GONE if f'"{code}"' in text), "")


def check_response(response: httpx.Response) -> None:
    """Raise the error a person can act on for a failed (or disguised) response."""
    status = response.status_code
    if looks_like_challenge(response):
        raise ChallengeError()
    code = gone_code(response)
    if code:
        raise ThreadGone(code)
    if status == 401:
        raise AuthError()
    if status == 403:
        body = json_body(response)
        if body.get("error_code") == "USAGE_QUOTA_FEATURE_DISABLED":
            raise AuthError("Perplexity says this account may not use that feature (quota disabled).")
        raise AuthError()
    if status == 429 or json_body(response).get("error_code") == "FREE_TIER_RATE_LIMITED":
        raise RateLimited(retry_after(response))
    if status in (400, 422):
        raise RequestRejected()
    if status >= 500:
        raise UpstreamError(f"Perplexity had a server error ({status}). Try again in a moment.")
    if status >= 300 and not response.is_redirect:
        raise UpstreamError(f"Perplexity answered with status {status}.")


def check_apart(response: httpx.Response, body: bytes) -> None:
    """check_response() for a reply read by client.read_apart: a success read apart (`body`), or a
    refusal read as usual."""
    if not response.is_success:
        check_response(response)
    elif looks_like_challenge(response, body):
        raise ChallengeError()


def sign_in_check(response: httpx.Response, refused: str) -> None:
    """Sign-in failures carry Perplexity's own words (`text`, `error_code`) when it gave any."""
    if response.status_code < 400:
        return
    if response.status_code in (403, 429) or looks_like_challenge(response) or response.status_code >= 500:
        check_response(response)
    body = json_body(response)
    reason = body.get("text") or body.get("error") or body.get("error_code") or body.get("message")
    detail = f" ({str(reason)[:200]})" if isinstance(reason, str) and reason else ""
    raise SignInError(f"{refused}{detail}. Check it and try again.")


def totp_challenge(response: httpx.Response) -> str | None:
    location = response.headers.get("location", "")
    if response.is_redirect and "totp-challenge" in location:
        values = parse_qs(urlsplit(location).query).get("token")
        return values[0] if values else None
    if is_json(response) and response.status_code < 400:
        body = json_body(response)
        status = str(body.get("status") or "").lower()
        challenge = body.get("totp_challenge") or body.get("challenge_token")
        if status in ("totp_required", "mfa_required", "totp") or challenge:
            value = challenge or body.get("token")
            return value if isinstance(value, str) and value else None
    return None
