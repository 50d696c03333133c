"""The sockets under the plain (`impersonate="off"`) transport: httpcore over asyncio's own
transports, without anyio.

httpx's default network layer is anyio's. For every read it pauses and resumes the socket's
reader (two epoll changes) and opens a cancel scope with its own timer; an answer arrives as
hundreds of small reads, so at 50 answers at once that was a fifth of the event loop's time.
Here data waits in the protocol until read, the socket is paused only when a reader falls
256 KiB behind, and a read's timeout is one timer per connection that is moved lazily: a read
that finds data waiting costs no timer at all, and one that waits re-arms the timer only when
it is due to fire before the new deadline.

Errors are httpcore's, so httpx maps them as it does for its own layer.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections import deque
from typing import Any

import httpcore

HIGH_WATER = 256 * 1024  # bytes waiting before the socket's reading is paused
LOW_WATER = 64 * 1024  # and resumed


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.paused = False
        self.closed = False  # EOF or connection lost
        self.error: BaseException | None = None
        self.waiter: asyncio.Future | None = None
        self.deadline = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.drained: asyncio.Future | None = None

    # --- asyncio's side ---

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.size += len(data)
        if self.size > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.error = exc
        self._wake()
        self._stop_timer()
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)

    def pause_writing(self) -> None:
        self.drained = self.loop.create_future()

    def resume_writing(self) -> None:
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)
        self.drained = None

    # --- the reader's side ---

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, timeout: float | None) -> None:
        """Until data, EOF or an error arrives; httpcore.ReadTimeout after `timeout` seconds."""
        waiter = self.waiter = self.loop.create_future()
        if timeout is not None:
            self.deadline = self.loop.time() + timeout
            if self.timer is None or self.timer.when() > self.deadline:
                self._stop_timer()
                self.timer = self.loop.call_at(self.deadline, self._expire, self.deadline)
        try:
            await waiter
        finally:
            self.waiter = None

    def _expire(self, at: float) -> None:
        self.timer = None
        waiter = self.waiter
        if waiter is None or waiter.done():
            return  # no read is waiting: the next one arms the timer again
        if self.deadline <= at:
            waiter.set_exception(httpcore.ReadTimeout("timed out"))
        else:  # reads came and went since the timer was set: wait for the latest deadline
            self.timer = self.loop.call_at(self.deadline, self._expire, self.deadline)

    def _stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def take(self, max_bytes: int) -> bytes:
        data = self.chunks.popleft()
        if len(data) > max_bytes:
            self.chunks.appendleft(data[max_bytes:])
            data = data[:max_bytes]
        self.size -= len(data)
        if self.paused and self.size < LOW_WATER and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return data


class Stream(httpcore.AsyncNetworkStream):
    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        protocol = self._protocol
        if not protocol.chunks and not protocol.closed:
            await protocol.wait(timeout)
        if protocol.chunks:
            return protocol.take(max_bytes)
        if protocol.error is not None:
            raise httpcore.ReadError(str(protocol.error) or type(protocol.error).__name__)
        return b""

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        protocol = self._protocol
        if protocol.closed or self._transport.is_closing():
            raise httpcore.WriteError(str(protocol.error or "the connection is closed"))
        self._transport.write(buffer)
        if protocol.drained is not None:
            try:
                async with asyncio.timeout(timeout):
                    await protocol.drained
            except TimeoutError:
                raise httpcore.WriteTimeout("timed out") from None

    async def aclose(self) -> None:
        self._protocol._stop_timer()
        self._transport.close()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> Stream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(
                    self._transport, self._protocol, ssl_context, server_hostname=server_hostname
                )
        except TimeoutError:
            self._transport.close()
            raise httpcore.ConnectTimeout("TLS handshake timed out") from None
        except (OSError, ssl.SSLError) as exc:
            self._transport.close()
            raise httpcore.ConnectError(str(exc)) from exc
        if transport is None:
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        return Stream(transport, self._protocol)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        if info == "is_readable":  # an idle kept connection that is readable was closed (or broken)
            return bool(self._protocol.chunks) or self._protocol.closed
        return None


class Backend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> Stream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_connection(
                    _Protocol, host, port, local_addr=(local_address, 0) if local_address else None
                )
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"no connection to {host}:{port} in {timeout} s") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        sock = transport.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return Stream(transport, protocol)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
