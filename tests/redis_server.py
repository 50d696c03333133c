"""A throwaway Redis server of a test's own (to stop, start and pause), and a slow TCP proxy.

The shared Redis of the PostgreSQL + Redis set-up (tests/run.sh) cannot be stopped by one test,
so the layer's tests start their own: real `redis-server` on a free loopback port.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(self) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="pplxweb-redis-")
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
             "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.2) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
            time.sleep(0.02)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)  # a paused server cannot exit
            self.process.terminate()
            self.process.wait(10)
            self.process = None

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def redis_server():
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (tests/run.sh installs it)")
    server = RedisServer()
    server.start()
    yield server
    server.close()


class SlowProxy:
    """A TCP proxy that holds what Redis says back (and, if asked, what it is told) for `delay`
    seconds: it widens the moment between Redis acting on a command and the client hearing of it."""

    def __init__(self, port: int, delay: float, both_ways: bool = False) -> None:
        self.target = port
        self.delay = delay
        self.both_ways = both_ways
        self.server: asyncio.Server | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def __aenter__(self) -> SlowProxy:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()

    async def _serve(self, client_r, client_w) -> None:
        server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target)
        pipes = [
            asyncio.ensure_future(self._pipe(client_r, server_w, self.delay if self.both_ways else 0)),
            asyncio.ensure_future(self._pipe(server_r, client_w, self.delay)),
        ]
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            pass
        finally:
            for pipe in pipes:
                pipe.cancel()
            for writer in (client_w, server_w):
                writer.close()

    async def _pipe(self, reader, writer, delay: float) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()

        async def deliver():
            while True:
                due, data = await queue.get()
                await asyncio.sleep(max(0.0, due - loop.time()))
                if not data:
                    writer.write_eof() if writer.can_write_eof() else writer.close()
                    return
                writer.write(data)
                await writer.drain()

        delivering = asyncio.ensure_future(deliver())
        try:
            while True:
                data = await reader.read(65536)
                queue.put_nowait((loop.time() + delay, data))
                if not data:
                    await delivering
                    return
        finally:
            delivering.cancel()
