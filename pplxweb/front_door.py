"""The front door: what a request may bring, judged through the ASGI interface alone.

The server (granian, pplxweb/server.py) closes a connection whose request line and headers have
not all come within 30 s, reads at most about 128 KB of them (431 past that) and speaks HTTP/1.1
only. What it hands the application is the body as a stream of chunks, read as the application
asks for them. The rest is here, in front of Django:

- A header block over HEADER_BYTES is refused (431).
- A body may be at most SMALL_BODY (Django's own form limit), except on the upload paths and
  there only for a signed-in person: a file attached to a question (PPLXWEB_ATTACHMENT_MAX_MB),
  a question with its files (the page without JavaScript), a history import. A declared
  `Content-Length` over the cap is answered 413 before a byte of the body is read; a body
  without one (chunked) is counted as it comes and refused at the cap.
- A body must bring MIN_BYTES in every PPLXWEB_UPLOAD_READ_TIMEOUT seconds until it is
  complete (a `Content-Length` longer than what is sent is such a stall): else 408, with a
  sentence. Either way the application is told the client left, so Django keeps nothing of it.
- One address may hold at most WEBSOCKETS_PER_ADDRESS websockets at once; more are refused
  (403) before the application sees them.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable
from functools import cache

from channels.db import database_sync_to_async
from django.conf import settings
from django.urls import reverse

from pplxweb.net import scope_client_ip

log = logging.getLogger(__name__)
MB = 1024 * 1024
SMALL_BODY = 2_621_440  # Django's DATA_UPLOAD_MAX_MEMORY_SIZE: every form but the uploads
FORM_MARGIN = MB  # a multipart form's own bytes around its files
MIN_BYTES = 64 * 1024  # what an arriving body must bring in each read timeout
HEADER_BYTES = 64 * 1024  # a request line and its headers
WEBSOCKETS_PER_ADDRESS = 64  # a household's tabs behind one address, with room to spare
IMPORT_MAX = 4 * 1024**3  # search.history.imports.MAX_ZIP: a history zip, its images included

Scope = dict
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


def stalled_sentence(timeout: float) -> str:
    return (
        f"The upload stalled (less than 64 KB in {timeout:g} seconds), so pplxweb gave it up and "
        "kept nothing. Try again."
    )


def too_large_sentence(cap: int) -> str:
    return f"That request is too large (at most {cap / MB:,.1f} MB here); nothing of it was kept."


@cache
def upload_caps() -> dict[str, int]:
    """The paths that take files, and the most each may take (for a signed-in person)."""
    one_file = settings.ATTACHMENT_MAX_MB * MB
    return {
        reverse("search:attach"): one_file + FORM_MARGIN,
        reverse("search:ask"): one_file * settings.ATTACHMENTS_PER_QUESTION + FORM_MARGIN,
        reverse("search:import"): IMPORT_MAX + FORM_MARGIN,
    }


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value
    return None


def _head_size(scope: Scope) -> int:
    size = len(scope.get("raw_path") or scope["path"]) + len(scope.get("query_string", b""))
    return size + sum(len(k) + len(v) + 4 for k, v in scope.get("headers", ()))


def _signed_in(cookie_header: str) -> bool:
    from importlib import import_module
    from types import SimpleNamespace

    from django.contrib.auth import get_user
    from django.http.cookie import parse_cookie

    key = parse_cookie(cookie_header).get(settings.SESSION_COOKIE_NAME)
    if not key:
        return False
    store = import_module(settings.SESSION_ENGINE).SessionStore(key)
    return get_user(SimpleNamespace(session=store)).is_authenticated


class FrontDoor:
    """ASGI middleware in front of the whole application (HTTP and websockets)."""

    def __init__(self, app: Callable, read_timeout: float | None = None) -> None:
        self.app = app
        self.read_timeout = read_timeout
        self.websockets: collections.Counter[str] = collections.Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self.websocket(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    # --- HTTP -----------------------------------------------------------------------------------

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if _head_size(scope) > HEADER_BYTES:
            await _answer(send, 431, "That request's headers are too large (at most 64 KB).")
            return
        length = _header(scope, b"content-length")
        if length is None and _header(scope, b"transfer-encoding") is None:  # no body: nothing to guard
            await self.app(scope, receive, send)
            return
        declared = None
        if length is not None:
            if not length.isdigit() or len(length) > 15:
                await _answer(send, 400, "That request's Content-Length is not a number.")
                return
            declared = int(length)
        cap = await self.cap(scope, declared)
        if declared is not None and declared > cap:
            log.info("a %d-byte body to %s was refused (at most %d)", declared, scope["path"], cap)
            await _answer(send, 413, too_large_sentence(cap))
            return
        timeout = self.read_timeout or settings.UPLOAD_READ_TIMEOUT
        body = _Body(receive, send, cap, timeout, scope)
        await self.app(scope, body.receive, body.send)

    async def cap(self, scope: Scope, declared: int | None) -> int:
        """SMALL_BODY, or the path's upload cap when a signed-in person needs more."""
        upload = upload_caps().get(scope["path"])
        if upload is None or (declared is not None and declared <= SMALL_BODY):
            return SMALL_BODY if upload is None else upload  # a small body needs no session check
        cookie = _header(scope, b"cookie")
        if cookie and await database_sync_to_async(_signed_in)(cookie.decode("latin-1")):
            return upload
        return SMALL_BODY

    # --- websockets -----------------------------------------------------------------------------

    async def websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        address = scope_client_ip(scope)
        if self.websockets[address] >= WEBSOCKETS_PER_ADDRESS:
            log.warning("a websocket from %s was refused: %d open already", address, self.websockets[address])
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008})  # before accepting: a 403
            return
        self.websockets[address] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.websockets[address] -= 1
            if not self.websockets[address]:
                del self.websockets[address]


class _Body:
    """One request's body as the application reads it: counted against its cap, and given up
    when it stalls."""

    def __init__(self, receive: Receive, send: Send, cap: int, timeout: float, scope: Scope) -> None:
        self._receive, self._send = receive, send
        self.cap, self.timeout, self.path = cap, timeout, scope["path"]
        self.total = self.window = 0
        self.complete = False
        self.answered = False  # the door answered for the application: its own sends are dropped
        self.window_ends: float | None = None
        self.pending: asyncio.Future | None = None

    async def send(self, message: dict) -> None:
        if not self.answered:
            await self._send(message)

    async def receive(self) -> dict:
        if self.complete or self.answered:
            return await self._receive()  # after the body: the application listens for the client leaving
        message = await self._next()
        if message is None:
            log.warning("a request to %s stalled after %d bytes; given up with a 408", self.path, self.total)
            return await self._refuse(408, stalled_sentence(self.timeout))
        if message["type"] != "http.request":
            return message
        size = len(message.get("body", b""))
        self.total += size
        self.window += size
        if self.total > self.cap:
            log.info("a body to %s passed its cap of %d bytes; given up with a 413", self.path, self.cap)
            return await self._refuse(413, too_large_sentence(self.cap))
        self.complete = not message.get("more_body", False)
        return message

    async def _next(self) -> dict | None:
        """The next message from the server; None when less than MIN_BYTES came in a window."""
        loop = asyncio.get_running_loop()
        if self.window_ends is None:
            self.window_ends = loop.time() + self.timeout
        while True:
            left = self.window_ends - loop.time()
            if left <= 0:
                if self.window < MIN_BYTES:
                    return None
                self.window, self.window_ends = 0, loop.time() + self.timeout
                continue
            if self.pending is None:
                self.pending = asyncio.ensure_future(self._receive())
            done, _ = await asyncio.wait({self.pending}, timeout=left)
            if done:
                message, self.pending = self.pending.result(), None
                return message

    async def _refuse(self, status: int, sentence: str) -> dict:
        """Answer for the application, which is told the client left (so it keeps nothing)."""
        if self.pending is not None:
            self.pending.cancel()
            self.pending = None
        await _answer(self._send, status, sentence)
        self.answered = True
        return {"type": "http.disconnect"}


async def _answer(send: Send, status: int, sentence: str) -> None:
    body = sentence.encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
