"""One answer as it streams: bytes -> events -> merged snapshots, with the read-gap and
overall timeouts, the drain after COMPLETED, and the public API's chunks mapped onto the web
protocol's events so one merge serves both."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import httpx

from pplxweb.perplexity.errors import PerplexityError, ProtocolError, Timeout
from pplxweb.perplexity.extract import processing_error
from pplxweb.perplexity.merge import Snapshot, merge
from pplxweb.perplexity.request import AskRequest
from pplxweb.perplexity.sse import StreamParser

Opener = Callable[[float], Awaitable[httpx.Response]]  # opens the ask, given the read gap
Rejoiner = Callable[[str, float], Awaitable[httpx.Response]]  # opens a rejoin of a backend_uuid

NOTHING_SENT = "Perplexity sent nothing for this question (asked twice). Try again in a moment."
NOTHING_ON_REJOIN = "Perplexity sent nothing when pplxweb rejoined this answer; what had arrived is kept."
OTHER_RUN = "Perplexity answered the rejoin with another answer's run; what had arrived is kept."
DROPPED = "The connection to Perplexity dropped mid-answer."


@dataclass(frozen=True)
class Timeouts:
    """Seconds. `read_gap` is the longest silence allowed between two chunks; `overall` caps
    the whole answer; `drain` is how long to wait for end_of_stream after COMPLETED."""

    connect: float = 10.0
    read_gap: float = 60.0
    research_read_gap: float = 600.0
    overall: float = 300.0
    research_overall: float = 1800.0
    drain: float = 5.0


class AskStream:
    """The snapshots of one answer as they arrive: `async for snapshot in stream`.

    After the loop: `snapshot` is the last state, `ended` says the stream ended (cleanly or
    not), `cut` says why it ended early ("" when it completed), `capped` that it was because the
    answer grew past what pplxweb keeps (merge.MAX_HELD: reading stopped there), `skipped`
    counts unreadable frames. Cancelling closes the upstream request; after a `break`, leave `async with` (or
    call aclose()) to close it at once.
    """

    def __init__(
        self,
        request: AskRequest,
        timeouts: Timeouts,
        opener: Opener,
        rejoiner: Rejoiner,
        *,
        api: bool = False,
        rejoin: str = "",
        after: Callable[[httpx.Response], None] | None = None,
    ) -> None:
        # the client's requests: `opener` asks (web or API), `rejoiner` rejoins a run; `after`
        # sees each response once it is read (the client keeps the cookies Perplexity sent back)
        self._request, self._timeouts, self._open, self._rejoin = request, timeouts, opener, rejoiner
        self._api, self._after = api, after
        self.rejoin = rejoin  # a run's backend_uuid: rejoin it rather than ask (docs/protocol.md §9.1)
        self.rejoined = False
        self.snapshot = Snapshot()
        self.ended = False
        self.cut = ""
        self.capped = False
        self.skipped = 0
        self.retried = False
        self.saw_bytes = False  # of the current attempt
        self.first_byte: float | None = None  # monotonic time of the first body byte
        self._gen: AsyncIterator[Snapshot] | None = None

    def __aiter__(self) -> AskStream:
        if self._gen is None:
            self._gen = self._run()
        return self

    async def __anext__(self) -> Snapshot:
        if self._gen is None:
            self._gen = self._run()
        return await self._gen.__anext__()

    async def aclose(self) -> None:
        """Close the upstream request (also done by leaving `async with`)."""
        if self._gen is not None:
            await self._gen.aclose()

    async def __aenter__(self) -> AskStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _run(self) -> AsyncIterator[Snapshot]:
        research = self._request.options.research
        limits = self._timeouts
        gap = limits.research_read_gap if research else limits.read_gap
        try:
            async with asyncio.timeout(limits.research_overall if research else limits.overall):
                async with aclosing(self._attempts(gap)) as attempts:
                    async for snapshot in attempts:
                        yield snapshot
        except TimeoutError:
            raise Timeout("Perplexity took too long to finish this answer; what arrived is kept.") from None
        if self.ended and not self.saw_bytes:
            raise ProtocolError(NOTHING_ON_REJOIN if self.rejoin else NOTHING_SENT)

    async def _attempts(self, gap: float) -> AsyncIterator[Snapshot]:
        """The answer's stream; an empty one or a bare error frame is asked again once, and a
        connection dropped mid-answer is rejoined once (docs/protocol.md §9.1) before the answer is
        called cut short."""
        async with aclosing(self._read(gap)) as attempt:  # a generator left early is not closed by itself
            async for snapshot in attempt:
                yield snapshot
        if not self.rejoin and self._nothing_came():
            self.retried = True  # asked again once, as a socket dropped before any answer is
            self.snapshot, self.ended, self.cut = Snapshot(), False, ""
            async with aclosing(self._read(gap)) as attempt:
                async for snapshot in attempt:
                    yield snapshot
        if not self._dropped():
            return
        kept, cut = self.snapshot, self.cut
        self.rejoin, self.rejoined = str(kept.top.get("backend_uuid")), True
        self.snapshot, self.ended, self.cut = Snapshot(), False, ""  # the rejoin's first frame is whole
        try:
            async with aclosing(self._read(gap)) as attempt:
                async for snapshot in attempt:
                    yield snapshot
            if not self.saw_bytes:
                raise ProtocolError(NOTHING_ON_REJOIN)
        except PerplexityError as exc:
            if self.snapshot.events:
                raise
            self.snapshot, self.ended, self.saw_bytes = kept, True, True
            self.cut = f"{cut} Rejoining it failed: {exc.message}"

    def _dropped(self) -> bool:
        """The connection dropped mid-answer, and the run can be rejoined."""
        return (
            self.ended
            and self.cut == DROPPED
            and not self.rejoined
            and not self._api
            and not self.snapshot.completed
            and isinstance(self.snapshot.top.get("backend_uuid"), str)
            and bool(self.snapshot.top["backend_uuid"])
        )

    def _nothing_came(self) -> bool:
        """An answer stream that ended with nothing in it, or with only a bare error frame
        (docs/protocol.md §5.4): peers ask again once."""
        if not self.ended:
            return False
        return not self.saw_bytes or bool(processing_error(self.snapshot))

    async def _read(self, gap: float) -> AsyncIterator[Snapshot]:
        response = await (self._rejoin(self.rejoin, gap) if self.rejoin else self._open(gap))
        parser = StreamParser()
        self.saw_bytes = False
        to_event = api_event if self._api else None
        try:
            chunks = response.aiter_bytes().__aiter__()
            deadline_gap = gap
            while True:
                try:
                    async with asyncio.timeout(deadline_gap):
                        chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    events = parser.close()
                    self.ended = True
                    break
                except (TimeoutError, httpx.TimeoutException):
                    if self.snapshot.completed:  # finished; the server just kept the socket open
                        self.ended = True
                        return
                    raise Timeout(
                        f"Perplexity sent nothing for {int(gap)} s; what arrived is kept."
                    ) from None
                except (httpx.ReadError, httpx.RemoteProtocolError):
                    self.ended, self.cut = True, DROPPED
                    return
                if self.first_byte is None:
                    self.first_byte = time.monotonic()
                self.saw_bytes = self.saw_bytes or bool(chunk)
                try:
                    events = parser.feed(chunk)
                except ProtocolError:
                    self.skipped = parser.skipped
                    raise
                changed = self._merge(events, to_event)
                self.skipped = parser.skipped
                if changed:
                    yield self.snapshot
                if self.snapshot.over:  # what is kept of it is kept; the rest is not read
                    self.ended, self.cut, self.capped = True, self.snapshot.over, True
                    return
                if parser.ended:
                    self.ended = True
                    await _rest_of(chunks)
                    return
                if self.snapshot.completed:
                    deadline_gap = self._timeouts.drain
            if self._merge(events, to_event):
                yield self.snapshot
        finally:
            self.skipped = parser.skipped
            if self._after is not None:
                self._after(response)
            await response.aclose()
            if not self.snapshot.completed and not self.snapshot.failed and not self.cut and self.ended:
                self.cut = "The answer stopped before Perplexity finished it."

    def _merge(self, events: list, to_event: Any) -> bool:
        snapshot = self.snapshot
        for event in events:
            data = to_event(event.data) if to_event else event.data
            if data is None:
                continue
            if self.rejoin and data.get("backend_uuid") not in (None, self.rejoin):
                raise ProtocolError(OTHER_RUN)
            snapshot = merge(snapshot, data)
        changed = snapshot is not self.snapshot
        self.snapshot = snapshot
        return changed


def api_event(data: dict) -> dict | None:
    """An Agent API stream event (OpenAI Responses' shapes, docs/protocol.md §13.4) as a web-protocol
    event, so one merge serves both paths: text deltas append to the answer; search results
    (as they come, and the `search_results` output item) become its sources; the terminal event
    ends it. Unknown event types are ignored, as the API asks."""
    kind = data.get("type")
    response = data.get("response") if isinstance(data.get("response"), dict) else {}
    event: dict = {}
    if kind == "response.output_text.delta" and isinstance(data.get("delta"), str) and data["delta"]:
        event["blocks"] = [{"intended_usage": "ask_text", "markdown_block": {"chunks": [data["delta"]]}}]
    elif kind == "response.reasoning.search_results":
        event["blocks"] = _results_block(data.get("results"))
    elif kind == "response.output_item.done" and isinstance(data.get("item"), dict):
        if data["item"].get("type") == "search_results":
            event["blocks"] = _results_block(data["item"].get("results"))
    elif kind == "response.completed":
        event.update(status="COMPLETED", final=True)
        for item in _list(response.get("output")):
            if isinstance(item, dict) and item.get("type") == "search_results":
                event["blocks"] = _results_block(item.get("results"))
    elif kind in ("response.failed", "response.cancelled", "error"):
        error = data.get("error") or response.get("error") or {}
        message = error.get("message") if isinstance(error, dict) else None
        event.update(status="FAILED", error_message=str(message or "Perplexity's API reported a failure."))
    if isinstance(response.get("model"), str) and response["model"]:
        event["display_model"] = response["model"]
    if not event.get("blocks"):
        event.pop("blocks", None)
    return event or None


def _results_block(results: Any) -> list[dict]:
    web = [
        {
            "name": r.get("title") or r.get("url"),
            "url": r.get("url"),
            "snippet": r.get("snippet") or "",
            "timestamp": r.get("date") or "",
        }
        for r in _list(results)
        if isinstance(r, dict) and isinstance(r.get("url"), str)
    ]
    return [{"intended_usage": "web_results", "web_result_block": {"web_results": web}}] if web else []


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


async def _rest_of(chunks: Any, bound: float = 0.2, most: int = 64 * 1024) -> None:
    """What follows end_of_stream (a chunked body's last bytes), read for a moment so the
    connection ends its response cleanly and is kept for the next search (HTTP/1.1 closes a
    connection whose response is let go before its end)."""
    read = 0
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with asyncio.timeout(bound):
            async for chunk in chunks:
                read += len(chunk)
                if read > most:
                    return
