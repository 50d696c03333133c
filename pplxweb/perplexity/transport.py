"""HTTP transports for the Perplexity client.

Cloudflare in front of Perplexity checks the TLS fingerprint (docs/protocol.md §2.6), so by default
requests go through curl_cffi impersonating a browser, behind httpx's transport interface so the
client code (and respx in tests) stays plain httpx. `impersonate="off"` uses httpx's own.
A body is read through curl_cffi's public streaming API (`Response.aiter_content()`); ending a
transfer nobody reads any more is the one use of its internals (`_abort`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import ssl
import warnings
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

log = logging.getLogger(__name__)

# curl_cffi notes that it treats `__Secure-` cookies as secure; pplxweb keeps cookies itself.
warnings.filterwarnings("ignore", message="`secure` changed to True", module="curl_cffi")

# Headers curl must compute itself (the body was already decoded by curl, too).
DROP_REQUEST = {"host", "content-length", "accept-encoding", "connection", "transfer-encoding"}
DROP_RESPONSE = {"content-encoding", "content-length", "transfer-encoding"}


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One TLS context for every plain client: building one loads the CA bundle (milliseconds).
    httpx's own (certifi's authorities, or SSL_CERT_FILE's)."""
    return httpx.create_ssl_context()


# Kept curl sessions, one per (event loop, fingerprint, Perplexity account): a search reuses the
# connection (TCP, TLS, HTTP/2) of the account's last one instead of a new handshake. Per account,
# so two accounts' requests never share a connection. No cookie crosses requests either: each
# carries its own Cookie header, curl_cffi clears curl's cookie engine per request, and
# `discard_cookies` keeps its jar empty. A session nobody has used for KEPT_IDLE seconds is
# closed: an open one wakes the server ten times a second (curl_cffi's safety timer), ~1.7 ms of
# CPU per second on a small machine, forever.
@dataclass
class _Kept:
    session: Any
    users: int = 0  # clients holding it now
    closing: asyncio.TimerHandle | None = None


_kept: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], _Kept]] = (
    weakref.WeakKeyDictionary()
)
_background: set[asyncio.Task] = set()  # sessions being closed, answers being let go (held until done)
KEPT_TRANSFERS = 256  # per kept session; curl_cffi's default (10) would queue the 11th answer
KEPT_IDLE = 300.0  # seconds a kept session outlives its last use (a follow-up reuses it)


def _close_idle(loop: asyncio.AbstractEventLoop, key: tuple[str, str]) -> None:
    sessions = _kept.get(loop, {})
    kept = sessions.get(key)
    if kept is not None and kept.users == 0:
        del sessions[key]
        _in_background(kept.session.close(), "closing an idle connection to Perplexity")


def _in_background(work: Any, what: str) -> None:
    task = asyncio.ensure_future(work)
    _background.add(task)
    task.add_done_callback(functools.partial(_done, what))


def _done(what: str, task: asyncio.Task) -> None:
    _background.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.warning("%s failed", what, exc_info=task.exception())


def load(impersonate: str) -> None:
    """Import and build now what a transport's first request would (a server start calls this,
    so the first search does not pay a few hundred ms for it)."""
    if impersonate == "off":
        import anyio._backends._asyncio  # noqa: F401 - httpx's first connection imports these
        import h11  # noqa: F401

        _tls_context()
    else:
        import curl_cffi.requests  # noqa: F401


def make_transport(impersonate: str, keep: str = "") -> httpx.AsyncBaseTransport:
    """`keep`: the Perplexity account whose kept connection to use (curl only; "" = a fresh one)."""
    if impersonate == "off":
        return PlainTransport()
    return CurlTransport(impersonate, keep=keep)


class PlainTransport(httpx.AsyncHTTPTransport):
    """httpx's own HTTP/1.1 transport (its network layer, anyio's sockets), no retries."""

    def __init__(self) -> None:
        super().__init__(retries=0, verify=_tls_context())


class CurlTransport(httpx.AsyncBaseTransport):
    """An httpx transport that sends through curl_cffi with a browser's TLS fingerprint."""

    def __init__(self, impersonate: str = "chrome", keep: str = "") -> None:
        self.impersonate = impersonate
        self.keep = keep
        self._session: Any = None
        self._kept: _Kept | None = None

    def _get_session(self) -> Any:
        if self._session is None:
            from curl_cffi.requests import AsyncSession

            # curl_cffi's browser settings leave out SSL_CERT_FILE (an own authority, such as the
            # benchmark's for its fake Perplexity); httpx reads it itself
            verify = os.environ.get("SSL_CERT_FILE") or True
            if not self.keep:
                self._session = AsyncSession(impersonate=self.impersonate, verify=verify)
                return self._session
            sessions = _kept.setdefault(asyncio.get_running_loop(), {})
            key = (self.impersonate, self.keep)
            kept = sessions.get(key)
            if kept is None:
                kept = sessions[key] = _Kept(
                    AsyncSession(impersonate=self.impersonate, max_clients=KEPT_TRANSFERS, verify=verify)
                )
            if kept.closing is not None:
                kept.closing.cancel()
                kept.closing = None
            kept.users += 1
            self._kept, self._session = kept, kept.session
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        from curl_cffi.requests import exceptions as curl_errors

        headers = [
            (k, v)
            for k, v in request.headers.multi_items()
            if k.lower() not in DROP_REQUEST
            and not (
                k.lower() == "user-agent" and v.startswith("python-httpx")
            )  # curl's own UA matches its fingerprint
        ]
        body = await request.aread()
        timeout = request.extensions.get("timeout") or {}
        connect = timeout.get("connect") or 10.0
        read = timeout.get("read") or 60.0
        session = self._get_session()
        sending = asyncio.ensure_future(
            session.request(
                request.method,
                str(request.url),
                headers=headers,
                data=body or None,
                stream=True,
                allow_redirects=False,
                timeout=(connect, read),
                impersonate=self.impersonate,
                discard_cookies=True,  # the client keeps the cookies; curl must not add its own
            )
        )
        try:
            response = await asyncio.shield(sending)
        except asyncio.CancelledError:
            # cancelled while curl waits for the reply, which curl_cffi would go on reading for
            # nobody: let it go as soon as its headers are in
            sending.add_done_callback(functools.partial(_abort_sent, session))
            raise
        except curl_errors.Timeout as exc:
            raise httpx.ConnectTimeout(str(exc), request=request) from exc
        except curl_errors.ConnectionError as exc:
            message = str(exc)
            if "Recv failure" in message or "Empty reply" in message or "reset" in message.lower():
                raise httpx.RemoteProtocolError(message, request=request) from exc
            raise httpx.ConnectError(message, request=request) from exc
        except curl_errors.RequestException as exc:
            raise httpx.RemoteProtocolError(str(exc), request=request) from exc
        return httpx.Response(
            status_code=response.status_code,
            headers=[  # as bytes: a header that is not ASCII must not fail the request
                (k, v or b"")
                for k, v in response.headers.raw
                if k.decode("latin-1").lower() not in DROP_RESPONSE
            ],
            stream=_CurlStream(response, request, session),
            request=request,
        )

    async def aclose(self) -> None:
        kept, self._kept = self._kept, None
        if kept is not None:  # a kept session stays for the next search, KEPT_IDLE at most
            kept.users -= 1
            if kept.users == 0:
                loop = asyncio.get_running_loop()
                kept.closing = loop.call_later(KEPT_IDLE, _close_idle, loop, (self.impersonate, self.keep))
        elif self._session is not None:
            await self._session.close()
        self._session = None


class _CurlStream(httpx.AsyncByteStream):
    """A streamed curl_cffi response's body through its public `aiter_content()`: a chunk per
    curl write (what one read of the socket brought, at most 16 KB)."""

    def __init__(self, response: Any, request: httpx.Request, session: Any) -> None:
        self._response = response
        self._request = request
        self._session = session

    async def __aiter__(self) -> AsyncIterator[bytes]:
        from curl_cffi.requests import exceptions as curl_errors

        try:
            async with contextlib.aclosing(self._response.aiter_content()) as chunks:
                async for chunk in chunks:
                    yield chunk
        except curl_errors.Timeout as exc:
            raise httpx.ReadTimeout(str(exc), request=self._request) from exc
        except curl_errors.RequestException as exc:
            raise httpx.RemoteProtocolError(str(exc), request=self._request) from exc

    async def aclose(self) -> None:
        """Stop a transfer still running: a stopped answer must not be read to its end."""
        if (transfer := _abort(self._response, self._session)) is not None:
            await asyncio.wait([transfer], timeout=5)


def _abort_sent(session: Any, sending: asyncio.Future) -> None:
    if not sending.cancelled() and sending.exception() is None:
        _abort(sending.result(), session)


# curl_cffi has no public way to end one transfer of a session that others share: its
# `Response.aclose()` waits for the body's end (lexiforest/curl_cffi issue 845 asks for one).
# `_abort` is the one place that reaches inside, for these; a curl_cffi without one of them fails
# tests/perplexity/test_kept_connections.py, naming it.
ABORT_USES = ("Response.curl", "Response.astream_task", "AsyncSession.acurl", "AsyncCurl.remove_handle")


def abort_missing(response: Any, session: Any) -> list[str]:
    """Which of ABORT_USES this curl_cffi lacks, for a streamed response of a session."""
    acurl = getattr(session, "acurl", None)
    there = {
        "Response.curl": getattr(response, "curl", None) is not None,
        "Response.astream_task": hasattr(response, "astream_task"),
        "AsyncSession.acurl": acurl is not None,
        "AsyncCurl.remove_handle": callable(getattr(acurl, "remove_handle", None)),
    }
    return [name for name in ABORT_USES if not there[name]]


def _abort(response: Any, session: Any) -> asyncio.Future | None:
    """Stop curl reading a response's body: detach its handle from the session's curl loop, which
    ends the transfer (HTTP/2: that stream only; HTTP/1.1: its connection). Returns the transfer's
    task (it ends soon after) if it was still running. Without those internals, curl_cffi's public
    `aclose()` in the background: the rest is read for nobody, but nobody waits for it."""
    if missing := abort_missing(response, session):
        _warn_missing(", ".join(missing))
        _in_background(response.aclose(), "closing a stopped answer's transfer")
        return None
    transfer = response.astream_task
    if transfer is None or transfer.done():
        return None
    session.acurl.remove_handle(response.curl)
    return transfer


@functools.cache
def _warn_missing(names: str) -> None:
    log.warning("curl_cffi changed (no %s): a stopped answer is now read to its end for nobody", names)
