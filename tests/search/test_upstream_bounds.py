"""What a hostile upstream sends costs a bounded amount on the live path: an answer that grows
without end is read up to merge.MAX_HELD and kept, cut, with a sentence; one frame larger than
sse.MAX_FRAME fails the answer with a sentence and keeps what came before; the saved answer is at
most MAX_TEXT characters, ending with a note when it was cut."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from pplxweb.perplexity import merge as merge_module
from search.models import Entry
from tests.perplexity.streams import markdown, sse
from tests.search.conftest import serve
from tests.search.test_consumer import connect

pytestmark = pytest.mark.django_db(transaction=True)
MAX_TEXT = 4_000_000  # values.MAX_TEXT
HEAD = {"backend_uuid": "b-1", "context_uuid": "c-1", "status": "PENDING"}


class Endless(httpx.AsyncByteStream):
    """An answer that never ends: 64 KB of words an event, for as long as it is read."""

    def __init__(self, first: bytes = b"") -> None:
        self.served = 0
        self.first = first

    async def __aiter__(self):
        yield sse([HEAD], end=False)
        if self.first:
            yield self.first
            self.served += len(self.first)
        n = 0
        while True:
            chunk = sse([{"blocks": [markdown("ask_text", ["word " * 13_000], n)]}], end=False)
            self.served += len(chunk)
            n += 1
            yield chunk

    async def aclose(self) -> None:
        pass


async def asked(owner, question: str) -> Entry:
    """The entry once its run has ended (its end is saved before the last fragment goes out)."""
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": question}))
    async with asyncio.timeout(60):
        while (entry := await Entry.objects.filter(question=question).afirst()) is None or entry.running:
            await asyncio.sleep(0.1)
    await comm.disconnect()
    return entry


async def test_an_answer_that_never_ends_is_read_up_to_the_cap_and_kept(
    owner, alinked, upstream, monkeypatch
):
    # 16 MB in production: the same, sooner
    monkeypatch.setattr(merge_module, "MAX_HELD", 8 * 1024 * 1024, raising=False)
    body = Endless()
    serve(upstream, httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=body))
    entry = await asked(owner, "tell me everything")
    assert entry.status == "truncated"
    assert entry.error.startswith("Perplexity's answer grew larger than pplxweb keeps (8 MB)")
    assert "retry" not in entry.error  # asking again would only give the same
    assert body.served < 9 * 1024 * 1024  # reading stopped at the cap
    assert len(entry.answer) == MAX_TEXT and entry.answer.startswith("word word")
    assert entry.answer.endswith("characters; the rest was left out.)*")


async def test_one_frame_over_8_mb_fails_the_answer_and_keeps_what_came_first(owner, alinked, upstream):
    first = sse([{"blocks": [markdown("ask_text", ["The start of it. "], 0)]}], end=False)
    huge = b'event: message\r\ndata: {"text": "' + b"x" * (50 * 1024 * 1024) + b'"}\r\n\r\n'

    class OneHugeFrame(httpx.AsyncByteStream):
        served = 0

        async def __aiter__(self):
            yield sse([HEAD], end=False) + first
            for start in range(0, len(huge), 64 * 1024):
                self.served += 64 * 1024
                yield huge[start : start + 64 * 1024]

    body = OneHugeFrame()
    serve(upstream, httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=body))
    entry = await asked(owner, "one huge frame")
    assert entry.status == "failed" and "larger than 8 MB" in entry.error
    assert entry.answer.startswith("The start of it.")
    assert body.served <= 9 * 1024 * 1024
