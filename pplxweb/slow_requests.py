"""Under daphne, a request must keep arriving: a stalled upload is given up, an idle connection closed.

daphne hands a request to the application only once Twisted has read all of it (the body into
memory or a temporary file), so no ASGI middleware ever sees an upload stall: Twisted's own
guard is an idle timeout of 60 s that any byte resets, and a browser (or anyone) trickling a
25 MB upload a few bytes at a time would hold a connection and a temporary file for as long as
it liked. This patches daphne's request and factory (as twisted_forms does):

- from a request's first line until all of its body is in, at least MIN_BYTES must arrive in
  each `timeout` seconds (PPLXWEB_UPLOAD_READ_TIMEOUT, 30 by default); otherwise it is given up:
  a 408 with a sentence, its temporary file closed (so removed), the connection closed after a
  short grace in which what the client still sends is read and dropped (so it sees the 408
  rather than a reset). The application never saw the request: no Attachment row, no file in
  the data dir;
- an idle keep-alive connection is closed after the same `timeout` (Twisted's idle timeout,
  which is off from a request's first line until its response is sent, and after a websocket
  upgrade).
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

MIN_BYTES = 64 * 1024  # what a request's body must bring in each timeout
GRACE = 5.0  # seconds the client has to read the 408 before the connection is cut
_timeout = 30.0


def sentence(timeout: float) -> str:
    return (
        f"The upload stalled (less than 64 KB in {timeout:g} seconds), so pplxweb gave it up and "
        "kept nothing. Try again."
    )


def configure(timeout: float) -> None:
    """Enforce `timeout` on daphne's requests in this process (a no-op without daphne)."""
    global _timeout
    _timeout = timeout
    try:
        from daphne.http_protocol import HTTPFactory, WebRequest
    except ImportError:  # another ASGI server
        return
    if getattr(WebRequest, "_pplxweb_read_timeout", False):
        return
    WebRequest._pplxweb_read_timeout = True
    _patch_request(WebRequest)
    factory_init = HTTPFactory.__init__

    def __init__(self, *args, **kwargs) -> None:
        factory_init(self, *args, **kwargs)
        self.timeOut = _timeout  # the idle keep-alive timeout (Twisted's default: 60 s)

    HTTPFactory.__init__ = __init__


def _patch_request(cls) -> None:
    init, chunk, received, lost = (
        cls.__init__,
        cls.handleContentChunk,
        cls.requestReceived,
        cls.connectionLost,
    )

    def __init__(self, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        channel = self.channel
        if getattr(channel, "timeOut", None):
            # the idle timeout waits while a request arrives (this check instead; a pause is no
            # stall while the windows bring enough) and comes back once it is answered
            channel._savedTimeOut = channel.setTimeout(None)
        self._pplxweb_bytes = self._pplxweb_seen = 0
        self._pplxweb_given_up = False
        self._pplxweb_check = _later(_timeout, _check, self)

    def handleContentChunk(self, data: bytes) -> None:
        if self._pplxweb_given_up:
            return
        self._pplxweb_bytes += len(data)
        chunk(self, data)

    def requestReceived(self, command, path, version):
        _cancel(self)
        if self._pplxweb_given_up:
            return None
        return received(self, command, path, version)

    def connectionLost(self, reason) -> None:
        _cancel(self)
        return lost(self, reason)

    cls.__init__ = __init__
    cls.handleContentChunk = handleContentChunk
    cls.requestReceived = requestReceived
    cls.connectionLost = connectionLost


def _later(seconds: float, call, *args):
    from twisted.internet import reactor

    return reactor.callLater(seconds, call, *args)


def _cancel(request) -> None:
    check = getattr(request, "_pplxweb_check", None)
    if check is not None and check.active():
        check.cancel()
    request._pplxweb_check = None


def _check(request) -> None:
    request._pplxweb_check = None
    if request._pplxweb_bytes - request._pplxweb_seen >= MIN_BYTES:
        request._pplxweb_seen = request._pplxweb_bytes
        request._pplxweb_check = _later(_timeout, _check, request)
        return
    _give_up(request)


def _give_up(request) -> None:
    """408 with the sentence; the body so far dropped; the connection closed after GRACE."""
    request._pplxweb_given_up = True
    channel = request.channel
    transport = getattr(channel, "transport", None)
    peer = transport.getPeer() if transport is not None else None
    log.warning(
        "a request from %s stalled: less than %d bytes in %g s (%d of its body in all); given up with a 408",
        getattr(peer, "host", "?"),
        MIN_BYTES,
        _timeout,
        request._pplxweb_bytes,
    )
    content = getattr(request, "content", None)
    if content is not None:
        content.close()  # a temporary file (already unlinked): closing it frees its space
    if channel is None or transport is None:
        return
    body = sentence(_timeout).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n"
    )
    channel.setTimeout(None)
    channel.dataReceived = _drop  # what still arrives is read and dropped, never parsed
    transport.write(head.encode() + body)
    # FIN after the 408 (a half close): a client still sending reads it instead of a reset
    half_close = getattr(transport, "loseWriteConnection", None)
    if half_close is not None:
        half_close()
        _later(GRACE, transport.abortConnection)
    else:
        transport.loseConnection()


def _drop(data: bytes) -> None:
    return None
