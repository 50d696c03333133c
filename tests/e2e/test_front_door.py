"""The front door (pplxweb/front_door.py and the server's own options, pplxweb/server.py), tried
from outside as an attacker on the home network would: a stalled upload is given up with a 408
and a sentence and leaves nothing behind, a fast 25 MB upload still works; bodies over their cap,
lying lengths, huge header blocks and request lines, slow request lines, a 100 MB websocket
frame and hundreds of websockets from one address are refused or closed, with the server's
memory flat and other requests served meanwhile. No assertion on durations: each wait is a
bound on how long the test may take, never a figure it checks."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import random
import socket
import time
from pathlib import Path

import httpx
import pytest
from asgiref.sync import sync_to_async

from search.models import Attachment
from tests.e2e.conftest import server_env, start_pplxweb, stop, worker_pid
from tests.e2e.test_attachments_journey import shoot
from tests.e2e.test_search_journey import linked_owner

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 2.0  # PPLXWEB_UPLOAD_READ_TIMEOUT of this module's server
HEADER_TIMEOUT_MS = 3000  # its request line and headers must come within this (30 s in production)
MB = 1024 * 1024
BOUNDARY = "pplxwebstall"


@pytest.fixture(scope="module")
def slow_server(django_db_setup, fake_perplexity, tmp_path_factory):
    """pplxweb's server with a read timeout of TIMEOUT seconds and a header timeout of
    HEADER_TIMEOUT_MS: (base URL, its worker's pid, its log)."""
    log = tmp_path_factory.mktemp("slow") / "server.log"
    env = server_env(fake_perplexity, PPLXWEB_UPLOAD_READ_TIMEOUT=str(TIMEOUT))
    proc, port = start_pplxweb(env, log, header_timeout_ms=HEADER_TIMEOUT_MS)
    yield f"http://127.0.0.1:{port}", worker_pid(proc), log
    stop(proc)
    assert "Traceback" not in log.read_text(), log.read_text()[-4000:]


@pytest.fixture(autouse=True)
async def _own_connections_closed():
    """The async ORM's connection (asgiref's thread) closed after each test: PostgreSQL drops
    the test database only when nobody holds it."""
    yield
    from django.db import connections

    await sync_to_async(connections.close_all)()


@sync_to_async
def session_of_owner() -> str:
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client(HTTP_HOST="localhost")
    client.force_login(get_user_model().objects.get(username="alice"))
    return client.cookies["pplxweb_sessionid"].value


def open_temporary_files(pid: int) -> list[str]:
    """The deleted files the server holds open (Django spools a request's body over 2.5 MB to an
    unlinked temporary file)."""
    found = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.endswith("(deleted)"):
            found.append(target)
    return found


async def closed_files(pid: int) -> bool:
    """Whether the server holds no deleted file open, waiting up to 10 s for the request to end."""
    for _ in range(100):
        if not open_temporary_files(pid):
            return True
        await asyncio.sleep(0.1)
    return False


def data_files() -> set[str]:
    """The kept files and Django's upload temporary files (both in the data dir)."""
    from django.conf import settings

    folders = [Path(settings.DATA_DIR) / "attachments", Path(settings.FILE_UPLOAD_TEMP_DIR)]
    return {str(p) for folder in folders if folder.exists() for p in folder.iterdir()}


def upload_head(port: int, session: str, length: int) -> bytes:
    return (
        f"POST /attachments/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\n"
        f"Cookie: pplxweb_sessionid={session}; csrftoken={'c' * 32}\r\nX-CSRFToken: {'c' * 32}\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def file_part(size: int) -> tuple[bytes, bytes]:
    """A multipart form's opening (with the start of a PDF) and closing around `size` bytes."""
    opening = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="scan.pdf"\r\n'
        "Content-Type: application/pdf\r\n\r\n%PDF-1.7\n"
    ).encode()
    return opening, f"\r\n--{BOUNDARY}--\r\n".encode()


def reply_complete(reply: bytes) -> bool:
    head, found, body = reply.partition(b"\r\n\r\n")
    if not found:
        return False
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


@pytest.mark.parametrize("way", ["pauses", "trickle"])
async def test_a_stalled_upload_is_given_up_and_leaves_nothing(slow_server, way):
    base, pid, log = slow_server
    await linked_owner()
    session = await session_of_owner()
    port = int(base.rsplit(":", 1)[1])
    before = data_files()
    opening, closing = file_part(25 * MB)
    chunk = b"0" * (MB - 9)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(upload_head(port, session, len(opening) + 25 * len(chunk) + len(closing)) + opening)
    # 25 chunks of 1 MB: each at once with a pause of 2.5 timeouts after it, or each 16 KB at a
    # time every 0.6 s (about 53 KB in a timeout: under the 64 KB it must bring)
    pieces = [(chunk, TIMEOUT * 2.5)] * 25 if way == "pauses" else [(chunk[:16384], 0.6)] * 25 * 64
    reply = b""
    for piece, pause in pieces:
        try:
            sock.sendall(piece)
        except OSError:  # closed by the server
            break
        sock.settimeout(pause)
        try:
            got = sock.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            break
        reply += got
        if not got or reply_complete(reply):
            break
    sock.settimeout(30)
    with contextlib.suppress(OSError):
        while got := sock.recv(65536):
            reply += got
    sock.close()
    assert reply.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), reply[:300]
    assert reply.endswith(
        b"\r\n\r\nThe upload stalled (less than 64 KB in 2 seconds), so pplxweb gave it up and kept nothing. Try again."
    )
    assert await closed_files(pid)  # the body's temporary file, if it had one, is gone
    assert not await Attachment.objects.aexists() and data_files() == before
    assert "a request to /attachments/ stalled after" in log.read_text()


async def test_a_fast_25_mb_upload_still_works(slow_server):
    base, pid, _ = slow_server
    await linked_owner()
    session = await session_of_owner()
    # a scanned page's worth of random bytes as an image stream: 25 MB
    image = random.Random(25).randbytes(25 * MB - 400)
    dictionary = (
        b"<< /Type /XObject /Subtype /Image /Width 4000 /Height 4000 /Filter /DCTDecode /Length %d >>"
    )
    pdf = b"".join(
        [
            b"%PDF-1.7\n1 0 obj\n",
            dictionary % len(image),
            b"\nstream\n",
            image,
            b"\nendstream\nendobj\n%%EOF\n",
        ]
    )
    async with httpx.AsyncClient(base_url=base, cookies={"pplxweb_sessionid": session}, timeout=120) as http:
        page = await http.get("/")
        token = page.text.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
        response = await http.post(
            "/attachments/",
            files={"file": ("scan.pdf", pdf, "application/pdf")},
            headers={"X-CSRFToken": token, "Origin": base},
        )
    assert response.status_code == 200, response.text[:500]
    described = response.json()
    assert described["ready"] and described["kind"] == "PDF" and described["size"] == len(pdf)
    assert (await Attachment.objects.aget()).size == len(pdf)
    assert await closed_files(pid)  # the body's temporary file goes with the request


async def test_an_idle_keep_alive_connection_is_closed(slow_server):
    base, _, _ = slow_server
    port = int(base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        sock.settimeout(10)
        reply = b""
        while not reply_complete(reply):
            reply += sock.recv(65536)
        assert reply.startswith(b"HTTP/1.1 200")
        sock.settimeout(HEADER_TIMEOUT_MS / 1000 * 10)  # a bound, not a figure
        assert sock.recv(65536) == b""  # closed by the server while idle


async def test_a_quiet_websocket_outlives_the_timeout(slow_server):
    base, _, _ = slow_server
    await linked_owner()
    session = await session_of_owner()
    port = int(base.rsplit(":", 1)[1])
    key = base64.b64encode(os.urandom(16)).decode()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(
            (
                f"GET /ws/search/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\n"
                f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                f"Sec-WebSocket-Version: 13\r\nCookie: pplxweb_sessionid={session}\r\n\r\n"
            ).encode()
        )
        sock.settimeout(10)
        reply = b""
        while b"\r\n\r\n" not in reply:
            reply += sock.recv(65536)
        assert reply.startswith(b"HTTP/1.1 101"), reply[:200]
        time.sleep(HEADER_TIMEOUT_MS / 1000 * 1.5)  # quiet, longer than the timeouts
        mask = os.urandom(4)
        sock.sendall(bytes([0x89, 0x84]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(b"ping")))
        frames = b""
        while b"\x8a\x04ping" not in frames:  # still there: it answers a ping
            got = sock.recv(65536)
            assert got, "the websocket was closed"
            frames += got


@pytest.mark.parametrize(
    "page",
    [{"width": 1280, "height": 800}, {"width": 390, "height": 844}],
    indirect=True,
    ids=["desktop", "phone"],
)
async def test_the_chip_of_a_stalled_upload_says_so(slow_server, page):
    """Chromium sending a 1 MB file at 8 KB/s (its own network throttling): the chip fails with
    pplxweb's sentence, the question stays, nothing is kept."""
    from playwright.async_api import expect

    from tests.e2e.test_search_journey import sign_in

    base, pid, _ = slow_server
    await linked_owner()
    await sign_in(page, base)
    await page.wait_for_function("() => window.__wsOpen === true")
    cdp = await page.context.new_cdp_session(page)
    await cdp.send("Network.enable")
    await cdp.send(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": 8 * 1024},
    )
    await page.fill("#id_q", "What is in it?")
    await page.set_input_files(
        ".attachments input[type=file]",
        files=[{"name": "scan.pdf", "mimeType": "application/pdf", "buffer": b"%PDF-1.7\n" + b"0" * MB}],
    )
    chip = page.locator(".attachments .chip.failed")
    await expect(chip).to_contain_text("The upload stalled (less than 64 KB in 2 seconds)", timeout=20000)
    await expect(chip.locator(".name")).to_be_visible()
    await expect(chip.locator("button.remove")).to_be_visible()
    await cdp.send(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
    )
    await shoot(page, f"stalled-chip-{'desktop' if page.viewport_size['width'] > 600 else 'phone'}")
    assert await page.locator("#id_q").input_value() == "What is in it?"
    assert not await Attachment.objects.aexists()
    assert await closed_files(pid)


# --- attacks from the home network -----------------------------------------------------------------


def rss_mb(pid: int) -> float:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("VmRSS"))
    return int(line.split()[1]) / 1024


def exchange(port: int, head: bytes, body_chunks=(), bound: float = 30) -> tuple[bytes, int]:
    """Send `head` and then the body chunks until the server answers or closes: (what it said,
    body bytes sent)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(bound)
    sent, reply = 0, b""
    try:
        sock.sendall(head)
        for chunk in body_chunks:
            sock.sendall(chunk)
            sent += len(chunk)
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                reply += sock.recv(65536)
            sock.setblocking(True)
            if reply:
                break
        sock.settimeout(bound)
        while got := sock.recv(65536):
            reply += got
    except OSError:
        pass
    finally:
        sock.close()
    return reply, sent


def megabytes(count: int, chunked: bool = False):
    block = b"x" * MB
    for _ in range(count):
        yield (b"%x\r\n" % MB + block + b"\r\n") if chunked else block


@pytest.mark.parametrize("path", ["/healthz", "/attachments/", "/history/import/", "/accounts/login/"])
async def test_an_anonymous_200_mb_post_is_refused_before_it_is_read(slow_server, path):
    base, pid, _ = slow_server
    port = int(base.rsplit(":", 1)[1])
    before = rss_mb(pid)
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {200 * MB}\r\n\r\n".encode()
    reply, _ = exchange(port, head)  # answered before a byte of the body is sent
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert b"That request is too large (at most 2.5 MB here); nothing of it was kept." in reply
    reply, sent = exchange(port, head, megabytes(200))  # a sender that does not wait for it
    assert reply == b"" or reply.startswith(b"HTTP/1.1 413"), reply[:200]  # refused, or closed on it
    assert sent < 100 * MB  # not most of it
    assert rss_mb(pid) - before < 64


async def test_a_chunked_body_without_a_length_is_counted_and_refused_at_its_cap(slow_server):
    base, pid, _ = slow_server
    port = int(base.rsplit(":", 1)[1])
    before = rss_mb(pid)
    head = f"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
    reply, sent = exchange(port, head, megabytes(200, chunked=True))
    assert reply == b"" or reply.startswith(b"HTTP/1.1 413"), reply[:200]  # refused, or closed on the sender
    assert sent < 100 * MB
    assert rss_mb(pid) - before < 64
    async with httpx.AsyncClient(base_url=base) as http:  # and the server goes on
        assert (await http.get("/healthz")).status_code == 200


async def test_a_signed_in_upload_may_be_larger_but_not_past_the_attachment_cap(slow_server):
    base, _, _ = slow_server
    await linked_owner()
    session = await session_of_owner()
    port = int(base.rsplit(":", 1)[1])
    reply, _ = exchange(port, upload_head(port, session, 200 * MB))
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert b"at most 26.0 MB here" in reply  # PPLXWEB_ATTACHMENT_MAX_MB (25) and the form's own bytes
    reply, _ = exchange(port, upload_head(port, "not-a-session", 10 * MB))
    assert reply.startswith(b"HTTP/1.1 413") and b"at most 2.5 MB here" in reply  # no session: small


@pytest.mark.parametrize(
    ("name", "head", "status"),
    [
        ("a header block over 64 KB", b"X-A: " + b"a" * 70_000 + b"\r\n", b"431"),
        ("10,000 headers", b"".join(b"X-%d: 1\r\n" % i for i in range(10_000)), b"431"),
        ("a Content-Length that is not a number", b"Content-Length: 12ab\r\n", b"400"),
    ],
)
async def test_oversized_or_malformed_heads_are_refused(slow_server, name, head, status):
    base, pid, _ = slow_server
    port = int(base.rsplit(":", 1)[1])
    before = rss_mb(pid)
    request = b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n" % (port, head)
    reply, _ = exchange(port, request)
    assert reply.startswith(b"HTTP/1.1 " + status), (name, reply[:200])
    assert rss_mb(pid) - before < 64


async def test_a_request_line_of_1_mb_is_refused(slow_server):
    base, _, _ = slow_server
    port = int(base.rsplit(":", 1)[1])
    reply, _ = exchange(port, b"GET /" + b"a" * MB + b" HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert reply == b"" or reply.startswith((b"HTTP/1.1 431", b"HTTP/1.1 414", b"HTTP/1.1 400")), reply[:200]


async def test_a_content_length_shorter_than_the_body_harms_nothing(slow_server):
    """The rest of the body is read as the next request: refused as one (400), the server goes on."""
    base, _, _ = slow_server
    port = int(base.rsplit(":", 1)[1])
    reply, _ = exchange(
        port, b"POST /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\n" + b"y" * 5000
    )
    assert reply.startswith(b"HTTP/1.1 "), reply[:100]
    async with httpx.AsyncClient(base_url=base) as http:
        assert (await http.get("/healthz")).status_code == 200


async def test_connections_that_never_finish_a_request_line_are_closed_while_others_are_served(slow_server):
    """Slowloris: 50 connections trickle a byte at a time; the server closes each once its
    request line and headers have not all come in time, and answers everyone else meanwhile."""
    base, pid, _ = slow_server
    port = int(base.rsplit(":", 1)[1])
    before = rss_mb(pid)

    async def trickle() -> bool:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for byte in b"GET /healthz HTTP/1.1" * 10:
                writer.write(bytes([byte]))
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    if await asyncio.wait_for(reader.read(100), 0.5) == b"":
                        return True  # closed by the server
            return False
        except OSError:
            return True
        finally:
            writer.close()

    slow = [asyncio.create_task(trickle()) for _ in range(50)]
    served = 0
    async with httpx.AsyncClient(base_url=base) as http:
        while not all(task.done() for task in slow):
            assert (await http.get("/healthz")).status_code == 200
            served += 1
            await asyncio.sleep(0.2)
    assert all(task.result() for task in slow), "a slow connection was still open after 100 bytes"
    assert served > 0
    assert rss_mb(pid) - before < 64


def websocket_head(port: int, session: str) -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    return (
        f"GET /ws/search/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\n"
        f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        f"Sec-WebSocket-Version: 13\r\nCookie: pplxweb_sessionid={session}\r\n\r\n"
    ).encode()


def open_websocket(port: int, session: str) -> tuple[socket.socket, bytes]:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(30)
    sock.sendall(websocket_head(port, session))
    reply = b""
    while b"\r\n\r\n" not in reply:
        got = sock.recv(65536)
        if not got:
            break
        reply += got
    return sock, reply


async def test_a_100_mb_websocket_frame_is_refused_and_the_server_stays_small(slow_server):
    base, pid, _ = slow_server
    await linked_owner()
    session = await session_of_owner()
    port = int(base.rsplit(":", 1)[1])
    before = rss_mb(pid)
    sock, reply = open_websocket(port, session)
    assert reply.startswith(b"HTTP/1.1 101"), reply[:200]
    size = 100 * MB
    mask = os.urandom(4)
    sent = 0
    with contextlib.suppress(OSError):
        sock.sendall(bytes([0x81, 0xFF]) + size.to_bytes(8, "big") + mask)  # one text frame, masked
        block = b"x" * MB
        for _ in range(100):
            sock.sendall(block)  # masking makes no difference to the server's limits
            sent += MB
    with contextlib.suppress(OSError):
        while sock.recv(65536):
            pass  # until the server closes it
    sock.close()
    assert sent < 100 * MB, "the whole frame was read"
    assert rss_mb(pid) - before < 64
    again, reply = open_websocket(port, session)  # the next socket is served as usual
    again.close()
    assert reply.startswith(b"HTTP/1.1 101")


async def test_500_websockets_from_one_address_are_refused_past_the_limit(slow_server):
    from pplxweb.front_door import WEBSOCKETS_PER_ADDRESS

    base, pid, _ = slow_server
    await linked_owner()
    session = await session_of_owner()
    port = int(base.rsplit(":", 1)[1])
    before = rss_mb(pid)
    opened, refused = [], 0
    try:
        for _ in range(500):
            sock, reply = open_websocket(port, session)
            if reply.startswith(b"HTTP/1.1 101"):
                opened.append(sock)
            else:
                assert reply.startswith(b"HTTP/1.1 403") or reply == b"", reply[:200]
                refused += 1
                sock.close()
        assert len(opened) == WEBSOCKETS_PER_ADDRESS and refused == 500 - WEBSOCKETS_PER_ADDRESS
        async with httpx.AsyncClient(base_url=base) as http:  # pages are served meanwhile
            assert (await http.get("/healthz")).status_code == 200
        assert rss_mb(pid) - before < 64
    finally:
        for sock in opened:
            sock.close()
    for _ in range(100):  # once they are closed, the address may open sockets again
        sock, reply = open_websocket(port, session)
        sock.close()
        if reply.startswith(b"HTTP/1.1 101"):
            break
        await asyncio.sleep(0.1)
    assert reply.startswith(b"HTTP/1.1 101")
