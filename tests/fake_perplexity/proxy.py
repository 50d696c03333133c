"""A TCP relay in front of the fake Perplexity that can drop connections, which an ASGI app cannot.

    python -m tests.fake_perplexity.proxy LISTEN_PORT UPSTREAM_PORT

It relays one exchange per connection (each response says `connection: close`), and all of
it, except:
- a response with the header `x-fake-reset: before` (the fake's `reset_before_status` fault):
  the client's socket is reset before any byte of it;
- the comment `: fake-reset-here` in a response body (`reset_mid_stream`): what came before it
  is relayed, then the socket is reset;
- an ask whose question contains `[reset-before]` (every attempt), `[reset-before-once]` (only
  the first attempt of a request, by its frontend_uuid: to check the one silent retry) or
  `[reset-mid]`: the same, steered from the question instead of the fake's plan.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import sys

seen_once: set[bytes] = set()
RESET_HERE = b": fake-reset-here"


def reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
    writer.close()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head + (await reader.readexactly(length) if length else b"")


def one_exchange(head: bytes) -> bytes:
    """The response head, telling the client to close the connection after it: pplxweb keeps
    connections, and the relay checks only a connection's first request for its faults."""
    lines = [line for line in head[:-4].split(b"\r\n") if not line.lower().startswith(b"connection:")]
    return b"\r\n".join([*lines, b"connection: close"]) + b"\r\n\r\n"


def held_back(chunk: bytes) -> int:
    """How many bytes at the end of `chunk` could be the start of the reset marker."""
    for size in range(min(len(chunk), len(RESET_HERE) - 1), 0, -1):
        if RESET_HERE.startswith(chunk[-size:]):
            return size
    return 0


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, limit: int | None = None) -> None:
    sent, held = 0, b""
    while chunk := await reader.read(4096):
        chunk = held + chunk
        if RESET_HERE in chunk:
            writer.write(chunk.split(RESET_HERE, 1)[0])
            await writer.drain()
            reset(writer)
            return
        keep = held_back(chunk)  # the marker may straddle two reads
        chunk, held = chunk[: len(chunk) - keep], chunk[len(chunk) - keep :]
        writer.write(chunk)
        await writer.drain()
        sent += len(chunk)
        if limit is not None and sent >= limit:
            reset(writer)
            return
    writer.write(held)
    writer.close()


async def handle(client_reader, client_writer, upstream_port: int) -> None:
    try:
        request = await read_request(client_reader)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        client_writer.close()
        return
    marker = request.split(b'"frontend_uuid": "', 1)[-1][:36]
    if b"[reset-before]" in request or (b"[reset-before-once]" in request and marker not in seen_once):
        seen_once.add(marker)
        reset(client_writer)
        return
    limit = 1500 if b"[reset-mid]" in request else None
    up_reader, up_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
    up_writer.write(request)
    await up_writer.drain()
    with contextlib.suppress(ConnectionError, OSError, asyncio.IncompleteReadError):
        head = await up_reader.readuntil(b"\r\n\r\n")
        if b"\r\nx-fake-reset: before" in head.lower():
            reset(client_writer)
            up_writer.close()
            return
        client_writer.write(one_exchange(head))
        await client_writer.drain()
        await asyncio.gather(pipe(up_reader, client_writer, limit), pipe(client_reader, up_writer))
    up_writer.close()


async def main(listen: int, upstream: int) -> None:
    server = await asyncio.start_server(lambda r, w: handle(r, w, upstream), "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
