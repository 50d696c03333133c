"""HTTP transports for the Perplexity client.

Cloudflare in front of Perplexity checks the TLS fingerprint (docs/protocol.md §2.6), so by default
requests go through curl_cffi impersonating a browser, behind httpx's transport interface so the
client code (and respx in tests) stays plain httpx. `impersonate="off"` uses httpx's own.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import ssl
import warnings
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
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
    streams: int = 0  # event streams open on it (their headers in, their end not yet)
    others: int = 0  # other requests on it, from sending to their body's end
    reads: _PacedReads = field(init=False)

    def __post_init__(self) -> None:
        acurl = self.session.acurl  # the session's curl loop, which it closes itself
        acurl.loop = self.reads = _PacedReads(acurl.loop, self.paced)

    def paced(self) -> bool:
        """Read its sockets at PACE (see _PacedReads): only while answers are all it carries."""
        return self.streams > 0 and self.others == 0


_kept: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], _Kept]] = (
    weakref.WeakKeyDictionary()
)
_closing: set[asyncio.Task] = set()  # idle sessions being closed (a reference until they are)
KEPT_TRANSFERS = 256  # per kept session; curl_cffi's default (10) would queue the 11th answer
KEPT_IDLE = 300.0  # seconds a kept session outlives its last use (a follow-up reuses it)


def _close_idle(loop: asyncio.AbstractEventLoop, key: tuple[str, str]) -> None:
    sessions = _kept.get(loop, {})
    kept = sessions.get(key)
    if kept is not None and kept.users == 0:
        del sessions[key]
        task = loop.create_task(kept.session.close())
        _closing.add(task)
        task.add_done_callback(_closed)


def _closed(task: asyncio.Task) -> None:
    _closing.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.warning("closing an idle connection to Perplexity failed", exc_info=task.exception())


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
        transfer = _Transfer(self._kept)
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
            try:
                response = await asyncio.shield(sending)
            except asyncio.CancelledError:
                # cancelled while curl waits for the reply, which curl_cffi would go on reading
                # for nobody: abort it as soon as its headers are in
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
        except BaseException:
            transfer.end()
            raise
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            transfer.is_stream()
        return httpx.Response(
            status_code=response.status_code,
            headers=[  # as bytes: a header that is not ASCII must not fail the request
                (k, v or b"")
                for k, v in response.headers.raw
                if k.decode("latin-1").lower() not in DROP_RESPONSE
            ],
            stream=_CurlStream(response, request, session, transfer),
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
    def __init__(self, response: Any, request: httpx.Request, session: Any, transfer: _Transfer) -> None:
        self._response = response
        self._request = request
        self._session = session
        self._transfer = transfer

    async def __aiter__(self) -> AsyncIterator[bytes]:
        """What curl has received so far, as one chunk: what one (paced) read brought becomes
        one snapshot and one update, not one per piece."""
        from curl_cffi.requests import exceptions as curl_errors
        from curl_cffi.requests.models import STREAM_END

        response = self._response
        queue = response.queue  # curl_cffi's: bytes, then STREAM_END or an exception
        try:
            while True:
                pieces = [await queue.get()]
                while isinstance(pieces[-1], bytes) and not queue.empty():
                    pieces.append(queue.get_nowait())
                end = None if isinstance(pieces[-1], bytes) else pieces.pop()
                if chunk := b"".join(pieces):
                    yield chunk
                if end is STREAM_END:
                    return
                if end is not None:
                    raise end
        except curl_errors.Timeout as exc:
            raise httpx.ReadTimeout(str(exc), request=self._request) from exc
        except curl_errors.RequestException as exc:
            raise httpx.RemoteProtocolError(str(exc), request=self._request) from exc

    async def aclose(self) -> None:
        """Abort a transfer still running (curl_cffi's own aclose waits for it to finish)."""
        self._transfer.end()
        if (task := _abort(self._response, self._session)) is not None:
            await asyncio.wait([task], timeout=5)


def _abort(response: Any, session: Any) -> asyncio.Task | None:
    """Stop curl reading a response's body; its task, which ends soon after, if it has one."""
    task = response.astream_task
    if task is not None and not task.done():
        if response.quit_now is not None:
            response.quit_now.set()
        acurl = getattr(session, "acurl", None)
        if response.curl is not None and acurl is not None:
            acurl.remove_handle(response.curl)  # detaches the handle and ends its task
    return task


def _abort_sent(session: Any, sending: asyncio.Future) -> None:
    if not sending.cancelled() and sending.exception() is None:
        _abort(sending.result(), session)


class _Transfer:
    """One request on a kept session, counted in `_Kept.others` from its sending until its end,
    or in `_Kept.streams` once its response shows an event stream."""

    def __init__(self, kept: _Kept | None) -> None:
        self._kept, self._stream = kept, False
        if kept is not None:
            kept.others += 1
            kept.reads.wake()  # its reply is read as it comes

    def is_stream(self) -> None:
        if self._kept is not None and not self._stream:
            self._kept.others -= 1
            self._kept.streams += 1
            self._stream = True

    def end(self) -> None:
        kept, self._kept = self._kept, None
        if kept is None:
            return
        if self._stream:
            kept.streams -= 1
        else:
            kept.others -= 1


# A socket is read at most every PACE seconds while a kept session carries answers only: a little
# over the page's update interval (search.live.runner.UPDATE_EVERY, 0.08), so each read's text goes
# out at once. Measured: docs/measurements-2026-12.md, December 6.
PACE = 0.085


class _PacedReads:
    """The event loop as a kept session's curl sees it, reading its sockets at PACE while
    `paced()` says so.

    On a small machine most of an answer's CPU is the event loop waking up: ~300 events in ~200
    reads, each a wake-up (0.2-0.3 ms here). The page shows new text every 80 ms anyway, so
    reading more often only wakes the server to hold text for the next update. After a read the
    socket is left alone for PACE (new bytes wait in the kernel, not in pplxweb) and then watched
    again; a stream that is quiet longer is read the moment it speaks. Only while the session
    carries nothing but answer streams whose headers are in: an upload's flow control, a reply
    to a request or a new connection's handshake is read at once.
    """

    def __init__(self, loop: Any, paced: Any) -> None:
        self._loop, self._paced = loop, paced
        self._wanted: dict[int, tuple] = {}  # curl's readers, by socket
        self._resting: dict[int, asyncio.TimerHandle] = {}  # sockets left alone, until when

    def __getattr__(self, name: str) -> Any:  # the rest (writers, timers, futures) as they are
        return getattr(self._loop, name)

    def add_reader(self, fd: int, callback: Any, *args: Any) -> None:
        self._wanted[fd] = (callback, args)
        if fd not in self._resting:
            self._loop.add_reader(fd, self._read, fd)

    def remove_reader(self, fd: int) -> bool:
        self._wanted.pop(fd, None)
        return self._loop.remove_reader(fd)

    def _read(self, fd: int) -> None:
        if (wanted := self._wanted.get(fd)) is None:
            return
        callback, args = wanted
        callback(*args)
        if fd in self._wanted and fd not in self._resting and self._paced():
            self._loop.remove_reader(fd)
            self._resting[fd] = self._loop.call_later(PACE, self._wake, fd)

    def wake(self) -> None:
        """Watch every resting socket again now."""
        for fd, timer in list(self._resting.items()):
            timer.cancel()
            self._wake(fd)

    def _wake(self, fd: int) -> None:
        del self._resting[fd]
        if fd in self._wanted:
            self._loop.add_reader(fd, self._read, fd)
