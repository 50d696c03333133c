"""The plain transport's sockets (pplxweb.perplexity.network) against local servers: reads,
the lazy read timeout, a reader that falls behind, resets, kept connections and TLS."""

from __future__ import annotations

import asyncio
import datetime
import ssl
import time

import httpcore
import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from pplxweb.perplexity import network
from pplxweb.perplexity.transport import PlainTransport, make_transport


class Server:
    """An HTTP/1.1 server on a loopback port whose replies a test writes by hand."""

    def __init__(self, reply, ssl_context: ssl.SSLContext | None = None) -> None:
        self.reply, self.ssl_context = reply, ssl_context
        self.connections = 0

    async def __aenter__(self) -> Server:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self.ssl_context)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                await self.reply(writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def paced(parts: list[bytes], pause: float, end: bool = True):
    """A reply: a chunked event stream, one part per chunk `pause` s apart; without `end` it
    then stays open and silent."""

    async def reply(writer):
        writer.write(HEAD)
        for part in parts:
            writer.write(chunk(part))
            await writer.drain()
            await asyncio.sleep(pause)
        if end:
            writer.write(b"0\r\n\r\n")
        else:
            await asyncio.sleep(5)

    return reply


def client(**timeouts) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=make_transport("off"), timeout=httpx.Timeout(10.0, **timeouts))


async def test_the_plain_transport_is_httpx_over_our_sockets():
    transport = make_transport("off")
    assert isinstance(transport, PlainTransport)
    assert isinstance(transport._pool._network_backend, network.Backend)


async def test_a_streamed_body_arrives_whole_in_its_chunks():
    async with (
        Server(paced([b"event %d\n" % n for n in range(20)], 0.005)) as server,
        client() as http,
        http.stream("GET", f"http://127.0.0.1:{server.port}/") as response,
    ):
        body = b"".join([part async for part in response.aiter_bytes()])
    assert body == b"".join(b"event %d\n" % n for n in range(20))


async def test_the_read_timeout_counts_silence_not_time_since_the_first_read():
    """Reads every 0.1 s for 0.8 s under a 0.3 s read timeout never time out (the one timer is
    moved on); then 0.3 s of silence does, and not much later."""
    async with (
        Server(paced([b"%d" % n for n in range(8)], 0.1, end=False)) as server,
        client(read=0.3) as http,
    ):
        got = []
        async with http.stream("GET", f"http://127.0.0.1:{server.port}/") as response:
            with pytest.raises(httpx.ReadTimeout):
                async for part in response.aiter_bytes():
                    got.append(part)
                    last = time.monotonic()
        silence = time.monotonic() - last
    assert b"".join(got) == b"01234567"
    assert 0.28 <= silence < 0.6


async def test_a_reader_that_falls_behind_pauses_the_socket_and_loses_nothing():
    body = bytes(range(256)) * 8192  # 2 MiB

    async def reply(writer):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body))
        writer.write(body)
        await writer.drain()

    waiting = []
    async with (
        Server(reply) as server,
        client() as http,
        http.stream("GET", f"http://127.0.0.1:{server.port}/") as response,
    ):
        parts = []
        async for part in response.aiter_raw():
            parts.append(part)
            await asyncio.sleep(0.001)  # slower than loopback
            waiting.append(response.extensions["network_stream"]._protocol.size)
    assert b"".join(parts) == body
    assert max(waiting) <= network.HIGH_WATER + 512 * 1024  # paused: at most a read or two over


async def test_a_reset_mid_body_is_a_read_error():
    async def reply(writer):
        writer.write(HEAD + chunk(b"half an answer"))
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.transport.abort()  # RST, not FIN

    async with Server(reply) as server, client() as http:
        got = []
        async with http.stream("GET", f"http://127.0.0.1:{server.port}/") as response:
            with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
                async for part in response.aiter_bytes():
                    got.append(part)
    assert got == [b"half an answer"]


async def test_a_refused_connection_is_a_connect_error():
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    async with client() as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(f"http://127.0.0.1:{port}/")


async def test_a_kept_connection_the_server_closed_is_not_used_again():
    async def reply(writer):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.close()  # idle close of a keep-alive connection

    async with Server(reply) as server, client() as http:
        first = await http.get(f"http://127.0.0.1:{server.port}/")
        await asyncio.sleep(0.2)
        second = await http.get(f"http://127.0.0.1:{server.port}/")
    assert (first.text, second.text) == ("ok", "ok")
    assert server.connections == 2


async def test_a_kept_connection_is_used_again():
    async def reply(writer):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()

    async with Server(reply) as server, client() as http:
        for _ in range(3):
            assert (await http.get(f"http://127.0.0.1:{server.port}/")).text == "ok"
    assert server.connections == 1


def _certificate() -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


async def test_tls_is_verified_and_streams(tmp_path):
    cert, key = _certificate()
    (tmp_path / "cert.pem").write_bytes(cert)
    (tmp_path / "key.pem").write_bytes(key)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")

    async def reply(writer):
        writer.write(HEAD + chunk(b"over TLS") + b"0\r\n\r\n")
        await writer.drain()

    async with Server(reply, server_context) as server:
        url = f"https://localhost:{server.port}/"
        trusting = ssl.create_default_context(cadata=cert.decode())
        async with httpcore.AsyncConnectionPool(
            ssl_context=trusting, network_backend=network.Backend()
        ) as pool:
            response = await pool.request("GET", url)
            assert response.content == b"over TLS"
            assert response.extensions["network_stream"].get_extra_info("ssl_object") is not None
        # the transport as pplxweb builds it trusts only the public authorities
        async with client() as http:
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await http.get(url)
