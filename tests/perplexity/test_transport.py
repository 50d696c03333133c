"""Both transports (curl_cffi impersonation and plain httpx) against a real local HTTP server."""

from __future__ import annotations

import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pplxweb.perplexity.client import PerplexityClient
from pplxweb.perplexity.errors import AuthError, NetworkError
from pplxweb.perplexity.extract import extract
from pplxweb.perplexity.request import AskRequest
from tests.perplexity.streams import answer_stream, sse

TOKEN = "eyJhbGciOiJkaXIiLCJlbmMiOiJBMjU2R0NNIn0..local.server.token"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[dict] = []
    gone = threading.Event()  # the client went away from an endless answer

    def log_message(self, *args):  # keep test output clean
        pass

    def _record(self, body: bytes = b"") -> None:
        Handler.seen.append({"path": self.path, "headers": dict(self.headers), "body": body})

    def do_GET(self):
        self._record()
        if self.path.startswith("/api/auth/session"):
            if "session-token" not in self.headers.get("Cookie", ""):
                return self._json(200, {})
            payload = gzip.compress(
                json.dumps(
                    {"user": {"id": "u1", "email": "me@example.com"}, "expires": "2027-01-01"}
                ).encode()
            )
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Set-Cookie", "__Secure-next-auth.session-token=ROTATED; Path=/; HttpOnly")
            self.end_headers()
            self.wfile.write(payload)
            return None
        return self._json(404, {"error": "no"})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._record(body)
        if self.path == "/rest/sse/perplexity_ask":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if json.loads(body).get("query_str") == "endless":
                return self._until_gone()
            for event in answer_stream(["Streamed ", "through ", "a real socket."]):
                self._chunk(sse([event], end=False))
                time.sleep(0.01)
            self._chunk(b"event: end_of_stream\r\ndata: {}\r\n\r\n")
            self.wfile.write(b"0\r\n\r\n")
            return None
        if self.path == "/reset":
            self.connection.shutdown(2)  # drop the socket before any status
            return None
        return self._json(404, {})

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _until_gone(self) -> None:
        """An answer's events without end, until the client goes away (then `gone` is set)."""
        try:
            for event in answer_stream(["An ", "answer ", "that goes on"], complete=False):
                self._chunk(sse([event], end=False))
            while not Handler.gone.is_set():
                time.sleep(0.02)
                self._chunk(b": still here\r\n\r\n")
        except OSError:
            Handler.gone.set()

    def _json(self, status: int, value: dict) -> None:
        payload = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.mark.parametrize("impersonate", ["chrome", "off"])
async def test_ask_streams_over_a_real_socket(server, impersonate):
    Handler.seen.clear()
    async with PerplexityClient(
        server, impersonate=impersonate, cookies={"__Secure-next-auth.session-token": TOKEN}
    ) as c:
        stream = c.ask(AskRequest("hello"))
        snapshots = [s async for s in stream]
    result = extract(stream.snapshot, ended=stream.ended)
    assert result.status == "completed"
    assert result.answer == "Streamed through a real socket."
    assert len(snapshots) >= 3  # it arrived in pieces, not all at once
    sent = Handler.seen[-1]
    sent["headers"] = {k.title(): v for k, v in sent["headers"].items()}
    assert f"__Secure-next-auth.session-token={TOKEN}" in sent["headers"]["Cookie"]
    assert "Authorization" not in sent["headers"]
    assert json.loads(sent["body"])["query_str"] == "hello"
    user_agent = sent["headers"].get("User-Agent", "")
    if impersonate == "chrome":
        assert "Chrome/" in user_agent and "python-httpx" not in user_agent
        assert "Sec-Ch-Ua" in sent["headers"]


@pytest.mark.parametrize("impersonate", ["chrome", "off"])
async def test_session_info_decodes_and_rotates_cookies(server, impersonate):
    async with PerplexityClient(
        server, impersonate=impersonate, cookies={"__Secure-next-auth.session-token": TOKEN}
    ) as c:
        info = await c.session_info()
        assert info.email == "me@example.com"
        assert c.cookies["__Secure-next-auth.session-token"] == "ROTATED"
    async with PerplexityClient(server, impersonate=impersonate) as c:
        with pytest.raises(AuthError):
            await c.session_info()


@pytest.mark.parametrize("impersonate", ["chrome", "off"])
async def test_a_refused_connection_is_a_network_error(impersonate):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with PerplexityClient(f"http://127.0.0.1:{port}", impersonate=impersonate) as c:
        with pytest.raises(NetworkError):
            await c.session_info()


@pytest.mark.parametrize("impersonate", ["chrome", "off"])
async def test_cancelling_closes_the_upstream_request_at_once(server, impersonate):
    """An answer that never ends: the server sees the client go away once the reader is cancelled
    (a transfer not let go is read forever, and the test fails at its hang guard)."""
    import asyncio

    Handler.gone.clear()
    async with PerplexityClient(
        server, impersonate=impersonate, cookies={"__Secure-next-auth.session-token": TOKEN}
    ) as c:
        reading = asyncio.Event()

        async def read():
            async for _ in c.ask(AskRequest("endless")):
                reading.set()

        task = asyncio.create_task(read())
        async with asyncio.timeout(30):  # a hang guard, not a measure
            await reading.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await asyncio.to_thread(Handler.gone.wait, 30)
        # and the client is still good for the next question
        stream = c.ask(AskRequest("hello"))
        async for _ in stream:
            pass
        assert extract(stream.snapshot, ended=stream.ended).status == "completed"
