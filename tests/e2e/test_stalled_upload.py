"""A stalled upload under daphne (pplxweb/slow_requests.py): a raw socket sends a 25 MB file as
25 chunks of 1 MB very slowly, and pplxweb gives it up after its read timeout with a 408 and a
sentence, leaving nothing behind; a fast 25 MB upload still works; an idle keep-alive connection
is closed after the same time, and a quiet websocket is not."""

from __future__ import annotations

import base64
import os
import random
import socket
import time
from pathlib import Path

import httpx
import pytest
from asgiref.sync import sync_to_async

from search.models import Attachment
from tests.e2e.conftest import server_env, start_pplxweb, stop
from tests.e2e.test_attachments_journey import shoot
from tests.e2e.test_search_journey import linked_owner

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 2.0  # PPLXWEB_UPLOAD_READ_TIMEOUT of this module's server
MB = 1024 * 1024
BOUNDARY = "pplxwebstall"


@pytest.fixture(scope="module")
def slow_server(django_db_setup, fake_perplexity, tmp_path_factory):
    """pplxweb under daphne with a read timeout of TIMEOUT seconds: (base URL, pid, its log)."""
    log = tmp_path_factory.mktemp("slow") / "server.log"
    env = server_env(fake_perplexity, PPLXWEB_UPLOAD_READ_TIMEOUT=str(TIMEOUT))
    proc, port = start_pplxweb(env, log)
    yield f"http://127.0.0.1:{port}", proc.pid, log
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
    """The deleted files the server holds open (Twisted keeps a request body over 100 KB in an
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
    started = time.monotonic()
    # 25 chunks of 1 MB: each at once with a pause of 2.5 timeouts after it, or each 16 KB at a
    # time every 0.6 s (about 53 KB in a timeout: under the 64 KB it must bring)
    pieces = [(chunk, TIMEOUT * 2.5)] * 25 if way == "pauses" else [(chunk[:16384], 0.6)] * 25 * 64
    reply, during = b"", None
    for piece, pause in pieces:
        try:
            sock.sendall(piece)
        except OSError:  # closed by the server
            break
        if during is None:
            time.sleep(0.3)
            during = open_temporary_files(pid)
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
    given_up = time.monotonic() - started
    sock.settimeout(10)
    try:
        while got := sock.recv(65536):
            reply += got
        closed = time.monotonic() - started
    except OSError:
        closed = time.monotonic() - started
    sock.close()
    assert reply.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), reply[:300]
    assert reply.endswith(
        b"\r\n\r\nThe upload stalled (less than 64 KB in 2 seconds), so pplxweb gave it up and kept nothing. Try again."
    )
    assert given_up < 2 * TIMEOUT + 3, given_up  # within two windows (and a loaded machine)
    assert closed < given_up + 5 + 3, (given_up, closed)  # the grace, then closed
    assert during, "Twisted held the body in a temporary file while it arrived"
    assert open_temporary_files(pid) == []  # and it is gone
    assert not await Attachment.objects.aexists() and data_files() == before
    assert "stalled: less than 65536 bytes in 2 s" in log.read_text()


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
        started = time.monotonic()
        response = await http.post(
            "/attachments/",
            files={"file": ("scan.pdf", pdf, "application/pdf")},
            headers={"X-CSRFToken": token, "Origin": base},
        )
    assert response.status_code == 200, response.text[:500]
    described = response.json()
    assert described["ready"] and described["kind"] == "PDF" and described["size"] == len(pdf)
    assert (await Attachment.objects.aget()).size == len(pdf)
    assert time.monotonic() - started < 60
    for _ in range(50):  # the body's temporary file goes when the connection does
        if not open_temporary_files(pid):
            break
        time.sleep(0.1)
    assert open_temporary_files(pid) == []


async def test_an_idle_keep_alive_connection_is_closed_after_the_timeout(slow_server):
    base, _, _ = slow_server
    port = int(base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        sock.settimeout(10)
        reply = b""
        while not reply_complete(reply):
            reply += sock.recv(65536)
        assert reply.startswith(b"HTTP/1.1 200")
        answered = time.monotonic()
        assert sock.recv(65536) == b""  # closed by the server while idle
        idle = time.monotonic() - answered
    assert TIMEOUT * 0.7 < idle < TIMEOUT + 3, idle


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
        time.sleep(TIMEOUT * 2.5)  # quiet, longer than the timeout
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
    for _ in range(50):
        if not open_temporary_files(pid):
            break
        time.sleep(0.1)
    assert open_temporary_files(pid) == []
