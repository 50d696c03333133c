"""Signing in to Perplexity by e-mail code (docs/protocol.md §3.1), with the authenticator step
(§3.2): functions over a PerplexityClient, whose cookies carry the sign-in between steps."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx

from pplxweb.perplexity import cookies as jar
from pplxweb.perplexity.client import PerplexityClient
from pplxweb.perplexity.errors import ProtocolError, SignInError
from pplxweb.perplexity.request import API_VERSION
from pplxweb.perplexity.responses import check_response, is_json, json_body, sign_in_check, totp_challenge

TOTP_VERIFY_PATHS = ("/api/auth/totp-challenge/verify", "/api/auth/totp/challenge-verify")


@dataclass(frozen=True)
class CodeResult:
    """After the e-mailed code: a session token, or an authenticator challenge to answer."""

    token: str | None = None
    totp_challenge: str | None = None


async def start_sign_in(client: PerplexityClient, email: str) -> None:
    """csrf, then signin-email: Perplexity e-mails a code. The csrf token stays in cookies."""
    response = await client._call("GET", "/api/auth/csrf")
    check_response(response)
    csrf = json_body(response).get("csrfToken")
    if not isinstance(csrf, str) or not csrf:
        raise ProtocolError("Perplexity's sign-in page answered without a CSRF token.")
    client.csrf_token = csrf
    response = await client._call(
        "POST",
        "/api/auth/signin-email",
        json={"email": email, "csrfToken": csrf},
        headers={"Content-Type": "application/json"},
    )
    sign_in_check(response, "Perplexity did not send a code to that address")


async def verify_code(client: PerplexityClient, email: str, code: str) -> CodeResult:
    """signin-otp: the token from the JSON, Set-Cookie (maybe chunked) or one redirect hop."""
    csrf = client.csrf_token
    response = await client._call(
        "POST",
        "/api/auth/signin-otp",
        json={"email": email, "otp": code, "csrfToken": csrf},
        headers={"Content-Type": "application/json"},
    )
    challenge = totp_challenge(response)
    if challenge:
        return CodeResult(totp_challenge=challenge)
    if response.is_redirect:
        response = await _follow(client, response)
    sign_in_check(response, "Perplexity did not accept that code")
    token = json_body(response).get("token") if is_json(response) else None
    token = token if isinstance(token, str) and token else jar.session_token(client.cookies)
    if not token:
        raise SignInError(
            "Perplexity accepted the code but sent no session. Try again, or use the cookie fallback."
        )
    return CodeResult(token=token)


async def verify_totp(client: PerplexityClient, challenge: str, code: str) -> str:
    """Answer the authenticator challenge; returns the session token."""
    for path in TOTP_VERIFY_PATHS:  # clients differ on the path (docs/protocol.md §3.2)
        response = await client._call(
            "POST",
            f"{path}?version={API_VERSION}&source=default",
            json={"token": challenge, "code": code},
            headers={"Content-Type": "application/json"},
        )
        if response.status_code != 404:
            break
    if is_json(response) and response.status_code < 400:
        body = json_body(response)
        if body.get("error"):
            raise SignInError("Perplexity did not accept that authenticator code. Type the current one.")
        if isinstance(body.get("token"), str) and body["token"]:
            return body["token"]
        if isinstance(body.get("redirect"), str):
            response = await client._call("GET", body["redirect"])
    if response.is_redirect:
        response = await _follow(client, response)
    sign_in_check(response, "Perplexity did not accept that authenticator code")
    token = jar.session_token(client.cookies)
    if not token:
        raise SignInError("Perplexity accepted the authenticator code but sent no session.")
    return token


async def _follow(client: PerplexityClient, response: httpx.Response, hops: int = 5) -> httpx.Response:
    for _ in range(hops):
        location = response.headers.get("location", "")
        if not response.is_redirect or not location:
            return response
        if "error=" in location:
            raise SignInError("Perplexity did not accept that code, or it has expired. Ask for a new one.")
        target = urljoin(client.base_url + "/", location)
        if urlsplit(target).netloc != urlsplit(client.base_url).netloc:
            return response  # never carry the account's cookies to another host
        response = await client._call("GET", target)
    return response
