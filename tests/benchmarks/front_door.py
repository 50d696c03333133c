"""Benchmark: the front door, tried as an attacker on the home network would, on an ASGI server.

    .venv/bin/python -m tests.benchmarks.front_door [--server granian|uvicorn|daphne] [--json]

pplxweb (the same application, its front door pplxweb/front_door.py included) is served on
loopback by the server named, with that server's own documented options (granian: exactly as
`manage.py serve` starts it, pplxweb/server.py; uvicorn and daphne: the closest options they
have), and tried with:

- an anonymous 200 MB POST to /healthz, with a Content-Length and chunked: its status, how much
  of it was sent before the server answered or closed, and the server's memory growth;
- 50 connections that trickle one byte every 5 s and never finish a request line, for 70 s: how
  many the server closed, when, and /healthz requested every 2 s meanwhile;
- a signed-in 25 MB upload: its status and the server's peak memory growth; the same upload
  stalling after 1 MB: whether and when it is given up;
- a header block of 100 KB, 10,000 headers, a request line of 1 MB;
- a 100 MB websocket frame on a signed-in socket, and 500 websockets from one address.

The figures behind the choice of server (docs/measurements-2026-12.md, "The server"). uvicorn
and daphne are not pplxweb's dependencies: install them into the virtualenv to compare
(`.venv/bin/pip install uvicorn daphne`). Loopback only; every loop is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA = Path(tempfile.mkdtemp(prefix="pplxweb-front-door-"))
os.environ.update({"PPLXWEB_DATA_DIR": str(DATA), "DJANGO_SETTINGS_MODULE": "pplxweb.settings"})
os.environ.pop("DATABASE_URL", None)
os.environ.pop("REDIS_URL", None)

from tests.benchmarks.servers import SERVERS, command, end_cleanly_on_sigterm, memory_mb  # noqa: E402
from tests.e2e.conftest import ROOT, free_port, stop, wait_for  # noqa: E402

MB = 1024 * 1024


def rss_mb(pid: int) -> float:
    return memory_mb(pid)


class Peak:
    """The server's largest RSS while a block runs, sampled every 50 ms."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self.task = pid, 0.0, None

    async def __aenter__(self):
        self.before = self.peak = rss_mb(self.pid)

        async def sample():
            while True:
                with contextlib.suppress(OSError, StopIteration):
                    self.peak = max(self.peak, rss_mb(self.pid))
                await asyncio.sleep(0.05)

        self.task = asyncio.create_task(sample())
        return self

    async def __aexit__(self, *exc):
        self.task.cancel()
        self.grew = self.peak - self.before


def session() -> tuple[str, str]:
    """A signed-in person's session and CSRF cookie."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    user = get_user_model().objects.create_user(username="door", password="x" * 12)
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    return client.cookies["pplxweb_sessionid"].value, "c" * 32


async def post(
    port: int, head: bytes, body_mb: int, chunked: bool = False, bound: float = 60, tail: bytes = b""
) -> dict:
    """Send `head`, up to `body_mb` MB and `tail`, reading the reply as it comes: status, MB sent,
    seconds."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started, sent, status = time.monotonic(), 0, None
    block = b"x" * MB
    try:
        writer.write(head)
        for _ in range(body_mb):
            writer.write((b"%x\r\n" % MB + block + b"\r\n") if chunked else block)
            await asyncio.wait_for(writer.drain(), bound)
            sent += 1
            with contextlib.suppress(TimeoutError):
                line = await asyncio.wait_for(reader.readline(), 0.001)
                if line:
                    status = line
                    break
        else:
            writer.write(tail)
        status = status or await asyncio.wait_for(reader.readline(), bound)
    except (OSError, TimeoutError) as exc:
        status = status or f"({type(exc).__name__})".encode()
    finally:
        writer.close()
    return {
        "status": status.decode(errors="replace").strip(),
        "MB sent": sent,
        "s": time.monotonic() - started,
    }


async def slowloris(port: int, count: int = 50, every: float = 5.0, bound: float = 70.0) -> dict:
    started = time.monotonic()
    closed: list[float] = []

    async def trickle():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for byte in b"GET /healthz HTTP/1.1" * 10:
                writer.write(bytes([byte]))
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    if await asyncio.wait_for(reader.read(100), every) == b"":
                        break
            else:
                return
        except OSError:
            pass
        finally:
            writer.close()
        closed.append(time.monotonic() - started)

    async def normal(results: list):
        while time.monotonic() - started < bound:
            asked = time.monotonic()
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                line = await asyncio.wait_for(reader.readline(), 5)
                results.append((line.startswith(b"HTTP/1.1 200"), time.monotonic() - asked))
                writer.close()
            except (OSError, TimeoutError):
                results.append((False, None))
            await asyncio.sleep(2)

    served: list = []
    tasks = [asyncio.create_task(trickle()) for _ in range(count)]
    checker = asyncio.create_task(normal(served))
    await asyncio.wait(tasks, timeout=bound)
    checker.cancel()
    for task in tasks:
        task.cancel()
    return {
        "closed": f"{len(closed)} of {count}",
        "last closed after s": round(max(closed), 1) if closed else None,
        "requests served meanwhile": f"{sum(ok for ok, _ in served)} of {len(served)}",
        "their worst s": round(max((t for ok, t in served if ok), default=float("nan")), 3),
    }


def raw(port: int, data: bytes, bound: float = 40) -> str:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(bound)
        try:
            sock.sendall(data)
            return sock.recv(200).split(b"\r\n", 1)[0].decode(errors="replace") or "(closed)"
        except OSError as exc:
            return f"({type(exc).__name__})"


def websocket(port: int, cookie: str) -> tuple[socket.socket, bytes]:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(30)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /ws/search/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\n"
            f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            f"Sec-WebSocket-Version: 13\r\nCookie: {cookie}\r\n\r\n"
        ).encode()
    )
    reply = b""
    with contextlib.suppress(OSError):
        while b"\r\n\r\n" not in reply and (got := sock.recv(65536)):
            reply += got
    return sock, reply


async def huge_frame(port: int, cookie: str, pid: int) -> dict:
    async with Peak(pid) as peak:
        sock, reply = websocket(port, cookie)
        sent = 0
        with contextlib.suppress(OSError):
            sock.sendall(bytes([0x81, 0xFF]) + (100 * MB).to_bytes(8, "big") + os.urandom(4))
            for _ in range(100):
                await asyncio.to_thread(sock.sendall, b"x" * MB)
                sent += 1
        sock.close()
        await asyncio.sleep(1)
    return {
        "handshake": reply.split(b"\r\n", 1)[0].decode(),
        "MB sent": sent,
        "memory grew MB": round(peak.grew, 1),
    }


async def many_websockets(port: int, cookie: str, pid: int) -> dict:
    async with Peak(pid) as peak:
        opened, refused = [], 0
        for _ in range(500):
            sock, reply = await asyncio.to_thread(websocket, port, cookie)
            if reply.startswith(b"HTTP/1.1 101"):
                opened.append(sock)
            else:
                refused += 1
                sock.close()
        for sock in opened:
            sock.close()
    return {"opened": len(opened), "refused": refused, "memory grew MB": round(peak.grew, 1)}


async def measure(port: int, pid: int, session_id: str, csrf: str) -> dict:
    cookie = f"pplxweb_sessionid={session_id}; pplxweb_csrftoken={csrf}"
    head = f"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {200 * MB}\r\n\r\n".encode()
    results = {}
    async with Peak(pid) as peak:
        results["anonymous 200 MB POST, Content-Length"] = await post(port, head, 200)
    results["anonymous 200 MB POST, Content-Length"]["memory grew MB"] = round(peak.grew, 1)
    chunked = (
        f"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
    )
    async with Peak(pid) as peak:
        results["anonymous 200 MB POST, chunked"] = await post(port, chunked, 200, chunked=True)
    results["anonymous 200 MB POST, chunked"]["memory grew MB"] = round(peak.grew, 1)
    boundary = "pplxwebdoor"
    opening = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="scan.pdf"\r\n'
        "Content-Type: application/pdf\r\n\r\n%PDF-1.7\n"
    ).encode()
    upload = (
        f"POST /attachments/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\n"
        f"Cookie: {cookie}\r\nX-CSRFToken: {csrf}\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n"
        f"Content-Length: {len(opening) + 25 * MB + 8 + len(boundary)}\r\n\r\n"
    ).encode() + opening
    async with Peak(pid) as peak:
        results["signed-in 25 MB upload"] = await post(
            port, upload, 25, tail=f"\r\n--{boundary}--\r\n".encode()
        )
    results["signed-in 25 MB upload"]["memory grew MB"] = round(peak.grew, 1)
    results["the same upload stalling after 1 MB"] = await post(port, upload, 1, bound=90)
    results["header block of 100 KB"] = raw(
        port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 100_000 + b"\r\n\r\n"
    )
    results["10,000 headers"] = raw(
        port,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
        + b"".join(b"X-%d: 1\r\n" % i for i in range(10_000))
        + b"\r\n",
    )
    results["request line of 1 MB"] = raw(port, b"GET /" + b"a" * MB + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    results["100 MB websocket frame"] = await huge_frame(port, cookie, pid)
    results["500 websockets from one address"] = await many_websockets(port, cookie, pid)
    results["50 slow request lines (1 byte every 5 s), 70 s"] = await slowloris(port)
    results["server RSS MB at the end"] = round(rss_mb(pid), 1)
    return results


def main(argv: list[str] | None = None) -> None:
    end_cleanly_on_sigterm()
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.front_door", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--server", choices=SERVERS, default="granian")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], check=True, cwd=ROOT)
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], check=True, cwd=ROOT)
    session_id, csrf = session()
    port = free_port()
    log = DATA / "server.log"
    proc = subprocess.Popen(command(args.server, port), cwd=ROOT, env={**os.environ}, stdout=log.open("w"),
                            stderr=subprocess.STDOUT)  # fmt: skip
    try:
        wait_for(proc, port, log)
        time.sleep(1)
        result = {"server": args.server, "idle RSS MB": round(rss_mb(proc.pid), 1)}
        result.update(asyncio.run(measure(port, proc.pid, session_id, csrf)))
    finally:
        stop(proc)
    if args.json:
        print(json.dumps(result))
        return
    for name, value in result.items():
        print(f"{name}: {json.dumps(value) if isinstance(value, dict) else value}")


if __name__ == "__main__":
    main()
