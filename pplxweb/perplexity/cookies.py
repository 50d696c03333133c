"""The few cookie rules Perplexity's sign-in needs, on a plain name -> value dict.

httpx's cookie jar is bound to domains; pplxweb stores the cookies of one account and sends them
to one host, so a dict that every response updates (NextAuth rotates the session cookie) is
simpler and survives being saved between the sign-in steps.
"""

from __future__ import annotations

import re

import httpx

SESSION_COOKIE = "__Secure-next-auth.session-token"
FALLBACK_SESSION_COOKIE = "next-auth.session-token"
CHUNK = re.compile(r"^(?P<base>(?:__Secure-)?next-auth\.session-token)\.(?P<n>\d+)$")


def update_from_response(cookies: dict[str, str], response: httpx.Response) -> None:
    """Apply every Set-Cookie of the response (an expired or emptied cookie is removed)."""
    for header in response.headers.get_list("set-cookie"):
        pair, _, attributes = header.partition(";")
        name, sep, value = pair.partition("=")
        name, value = name.strip(), value.strip().strip('"')
        if not sep or not name:
            continue
        attrs = attributes.lower().replace(" ", "")
        if not value or "max-age=0" in attrs or "expires=thu,01jan1970" in attrs:
            cookies.pop(name, None)
        else:
            cookies[name] = value


def header(cookies: dict[str, str]) -> str:
    return "; ".join(f"{name}={value}" for name, value in cookies.items())


def session_token(cookies: dict[str, str]) -> str | None:
    """The NextAuth session token, joining `.0`, `.1`, ... chunks when NextAuth split it."""
    for base in (SESSION_COOKIE, FALLBACK_SESSION_COOKIE):
        if cookies.get(base):
            return cookies[base]
        parts = sorted(
            (int(m["n"]), value)
            for name, value in cookies.items()
            if (m := CHUNK.match(name)) and m["base"] == base
        )
        if parts and [n for n, _ in parts] == list(range(len(parts))):
            return "".join(value for _, value in parts)
    return None


def with_session(cookies: dict[str, str], token: str) -> dict[str, str]:
    """The cookies to send: the stored ones, with the session as one unsplit cookie."""
    kept = {
        n: v
        for n, v in cookies.items()
        if not CHUNK.match(n) and n not in (SESSION_COOKIE, FALLBACK_SESSION_COOKIE)
    }
    return {SESSION_COOKIE: token, **kept}


def parse_cookie_header(text: str) -> dict[str, str]:
    """`a=1; b=2` (a browser's Cookie header) into a dict."""
    cookies = {}
    for part in text.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep and name.strip():
            cookies[name.strip()] = value.strip()
    return cookies
