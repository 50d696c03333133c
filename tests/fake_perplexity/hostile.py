"""Hostile answers for the fake's ask (`{"ask": {"hostile": KIND, ...}}`), sent as fast as the
socket takes them, to measure what they cost pplxweb (tests/benchmarks/hostile.py):

- `answer`: an answer that goes on and on, `megabytes` of it (default 100) in chunks of 64 KB
  of words, one markdown event each, then COMPLETED;
- `frame`: one frame whose data is a single JSON string of `megabytes` (default 50), in 64 KB
  pieces (no line end until its end);
- `tiny`: `count` (default 1,000,000) tiny events, one answer character each.
"""

from __future__ import annotations

import json

PIECE = 64 * 1024
HEAD = {"backend_uuid": "fake-hostile", "context_uuid": "fake-hostile-c", "status": "PENDING"}


def _frame(event: dict) -> bytes:
    return b"event: message\r\ndata: " + json.dumps(event).encode() + b"\r\n\r\n"


def _markdown(chunk: str, offset: int) -> dict:
    block = {"chunks": [chunk], "chunk_starting_offset": offset}
    return {"status": "PENDING", "blocks": [{"intended_usage": "ask_text", "markdown_block": block}]}


def bodies(plan: dict):
    """The response body's pieces."""
    kind = plan["hostile"]
    yield _frame(HEAD)
    if kind == "answer":
        chunk = "word " * (PIECE // 5)
        for n in range(int(float(plan.get("megabytes", 100)) * 1024 * 1024 // len(chunk))):
            yield _frame(_markdown(chunk, n))
    elif kind == "frame":
        yield b'event: message\r\ndata: {"text": "'
        for _ in range(int(float(plan.get("megabytes", 50)) * 1024 * 1024 // PIECE)):
            yield b"x" * PIECE
        yield b'"}\r\n\r\n'
    elif kind == "tiny":
        batch = []
        for n in range(int(plan.get("count", 1_000_000))):
            batch.append(_frame(_markdown("a", n)))
            if len(batch) == 500:
                yield b"".join(batch)
                batch = []
        yield b"".join(batch)
    yield _frame({"status": "COMPLETED", "final": True, "blocks": []})
    yield b"event: end_of_stream\r\ndata: {}\r\n\r\n"


async def send_answer(send, plan: dict) -> None:
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
    )
    for body in bodies(plan):
        await send({"type": "http.response.body", "body": body, "more_body": True})
    await send({"type": "http.response.body", "body": b""})
