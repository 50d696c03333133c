"""Fixtures for live-search tests: a linked account and an upstream served by respx."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import respx
from asgiref.sync import sync_to_async

from accounts.models import PerplexityAccount
from tests.perplexity.streams import PacedBody, answer_stream, sse

BASE = "https://perplexity.test"
TOKEN = "eyJhbGciOiJkaXIiLCJlbmMiOiJBMjU2R0NNIn0..LIVE-SEARCH-TOKEN.tag"
SSE = {"content-type": "text/event-stream; charset=utf-8"}


class Paced(PacedBody):
    """Events with a pause before each; optionally a stall or a dropped socket at the end."""

    def __init__(
        self,
        events: list[dict],
        pause: float = 0.01,
        end: bool = True,
        stall: float = 0,
        then: Exception | None = None,
    ):
        frames = [sse([e], end=False) for e in events]
        super().__init__(frames + ([sse([], end=True)] if end else []), pause, then, stall)


class HeldAt(Paced):
    """Paced events that stop after event `held` until `go` is set (a clarifying question
    waiting for its answer), at most 10 s."""

    def __init__(self, events: list[dict], held: int, go: asyncio.Event, pause: float = 0.01):
        super().__init__(events, pause)
        self.held, self.go = held, go

    async def __aiter__(self):
        for i, chunk in enumerate(self.chunks):
            await asyncio.sleep(self.pause)
            yield chunk
            if i == self.held:
                await asyncio.wait_for(self.go.wait(), 10)


@pytest.fixture
def linked(owner):
    return PerplexityAccount.objects.create(
        user=owner,
        email="me@example.com",
        session=json.dumps({"cookies": {"__Secure-next-auth.session-token": TOKEN}}),
        tier="pro",
    )


@pytest.fixture
async def alinked(owner):
    return await sync_to_async(PerplexityAccount.objects.create)(
        user=owner,
        email="me@example.com",
        session=json.dumps({"cookies": {"__Secure-next-auth.session-token": TOKEN}}),
        tier="pro",
    )


@pytest.fixture
def upstream():
    with respx.mock(base_url=BASE, assert_all_called=False) as mock:
        mock.get("/rest/models/config").respond(
            json={"models": {"pplx_pro": {"label": "Best", "mode": "search"}}, "config": []}
        )
        # a dropped answer is rejoined once (docs/protocol.md §9.1): by default Perplexity no longer has it
        mock.post(url__regex=r"/rest/sse/perplexity_ask/reconnect/", name="rejoin").respond(403, json={})
        yield mock


def serve(mock, *streams):
    """Each ask gets the next stream (or response)."""
    responses = [
        s if isinstance(s, httpx.Response | Exception) else httpx.Response(200, headers=SSE, stream=s)
        for s in streams
    ]
    return mock.post("/rest/sse/perplexity_ask").mock(side_effect=responses)


def words(n: int) -> list[str]:
    return [f"word{i} " + ("\n\n" if i % 20 == 19 else "") for i in range(n)]


__all__ = ["BASE", "SSE", "TOKEN", "Paced", "answer_stream", "serve", "words"]


@pytest.fixture(autouse=True)
async def _runs_end_with_the_test():
    """A run outlives its socket by design; in tests it must not outlive the test's event loop."""
    from search.live import runner

    yield
    for _ in range(200):
        if not runner.RUNS:
            return
        await asyncio.sleep(0.05)
    await runner.shutdown()
