"""Building streams for tests and benchmarks: events as wire bytes, and the shared fixtures."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx

FIXTURES = Path(__file__).resolve().parent / "fixtures"  # copies of ../shared/fixtures, see README


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def sse(events: list[dict], *, crlf: bool = True, end: bool = True) -> bytes:
    nl = "\r\n" if crlf else "\n"
    out = "".join(f"event: message{nl}data: {json.dumps(e)}{nl}{nl}" for e in events)
    if end:
        out += f"event: end_of_stream{nl}data: {{}}{nl}{nl}"
    return out.encode()


def jsonl(events: list[dict]) -> bytes:
    return "".join(json.dumps(e) + "\n" for e in events).encode()


def markdown(usage: str, chunks: list[str], offset: int | None = None, **extra) -> dict:
    block: dict = {"chunks": chunks, **extra}
    if offset is not None:
        block["chunk_starting_offset"] = offset
    return {"intended_usage": usage, "markdown_block": block}


def web_results(*results: dict) -> dict:
    return {
        "intended_usage": "web_results",
        "web_result_block": {"progress": "DONE", "web_results": list(results)},
    }


def result(n: int, **extra) -> dict:
    return {
        "name": f"Source {n}",
        "url": f"https://s{n}.example/page",
        "snippet": f"snippet {n}",
        "timestamp": "",
        **extra,
    }


def answer_stream(
    parts: list[str], *, sources: int = 3, complete: bool = True, model: str = "pplx_pro"
) -> list[dict]:
    """A realistic ask: PENDING ids, sources early, one chunk per event at growing offsets,
    the PENDING+final trap, then COMPLETED with the whole text and related questions."""
    head = {
        "backend_uuid": "b-1", "context_uuid": "c-1", "read_write_token": "rw-1", "thread_url_slug": "slug-1",
        "display_model": model, "user_selected_model": model, "status": "PENDING",
    }  # fmt: skip
    events = [
        head,
        {"status": "PENDING", "blocks": [web_results(*(result(i) for i in range(1, sources + 1)))]},
    ]
    for i, part in enumerate(parts):
        events.append({"status": "PENDING", "blocks": [markdown("ask_text", [part], i)]})
    events.append({"status": "PENDING", "final": True, "text_completed": True})
    if complete:
        events.append({
            "status": "COMPLETED", "final": True, "final_sse_message": True,
            "blocks": [markdown("ask_text", parts, 0, answer="".join(parts), progress="DONE")],
            "related_queries": ["What next?", "And then?"],
        })  # fmt: skip
    return events


class PacedBody(httpx.AsyncByteStream):
    """A response body for respx: chunks with a pause before each, then optionally a stall
    and/or an exception (a dropped connection). `closed` tells whether pplxweb closed it."""

    def __init__(
        self, chunks: list[bytes], pause: float = 0.0, then: Exception | None = None, stall: float = 0.0
    ):
        self.chunks, self.pause, self.then, self.stall = chunks, pause, then, stall
        self.closed = False

    async def __aiter__(self):
        for chunk in self.chunks:
            await asyncio.sleep(self.pause)
            yield chunk
        if self.stall:
            await asyncio.sleep(self.stall)
        if self.then:
            raise self.then

    async def aclose(self):
        self.closed = True
