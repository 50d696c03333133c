"""Searches keep their connection to Perplexity: one curl session per account, reused, never
shared between accounts; a transfer nobody reads any more is let go at once. Against the fake on
a real loopback socket (daphne), so the fake can tell connections apart by the client's port, or
against a raw server that sees the client go away. Nothing here is timed: each test waits for
what it expects (HANG_GUARD only ends a test that would otherwise hang)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager

import curl_cffi
import httpx
import pytest

from pplxweb.perplexity import cookies as jar
from pplxweb.perplexity import transport
from pplxweb.perplexity.client import PerplexityClient
from pplxweb.perplexity.extract import extract
from pplxweb.perplexity.request import AskRequest
from tests.e2e.conftest import control, seen, start, stop
from tests.fake_perplexity.app import TOKEN

HANG_GUARD = 30  # seconds


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    proc, port = start(
        "tests.fake_perplexity.app:application", {**os.environ}, tmp_path_factory.mktemp("kept") / "fake.log"
    )
    yield f"http://127.0.0.1:{port}"
    stop(proc)


async def ask(base: str, account: str, question: str) -> str:
    cookies = {jar.SESSION_COOKIE: TOKEN}
    async with PerplexityClient(base, base, impersonate="chrome", cookies=cookies, account_id=account) as c:
        stream = c.ask(AskRequest(question))
        async with stream:
            async for _ in stream:
                pass
    return extract(stream.snapshot, ended=stream.ended).status


def kept_session(account: str) -> transport._Kept:
    return transport._kept[asyncio.get_running_loop()][("chrome", account)]


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(HANG_GUARD):
        while not condition():
            await asyncio.sleep(0.01)


async def test_one_accounts_searches_reuse_a_connection_and_another_account_gets_its_own(fake):
    control(fake, ask={"pace": 0}, requests=[])
    statuses = [await ask(fake, account, q) for account, q in (("a", "one"), ("a", "two"), ("b", "three"))]
    assert statuses == ["completed"] * 3
    peers = {r["body"]: tuple(r["peer"]) for r in seen(fake) if r["path"] == "/rest/sse/perplexity_ask"}
    by_question = {
        q: next(p for body, p in peers.items() if f'"{q}"' in body) for q in ("one", "two", "three")
    }
    assert by_question["one"] == by_question["two"] != by_question["three"]


def peer_of(fake: str, question: str) -> tuple:
    asks = [r for r in seen(fake) if r["path"] == "/rest/sse/perplexity_ask"]
    return next(tuple(r["peer"]) for r in asks if f'"{question}"' in r["body"])


def curl_timers() -> int:
    """curl_cffi's safety timers running here: one per open session, waking the loop every 100 ms."""
    running = (getattr(t.get_coro(), "__qualname__", "") for t in asyncio.all_tasks())
    return sum(name == "AsyncCurl._force_timeout" for name in running)


async def test_an_idle_kept_session_is_closed_and_the_next_search_connects_again(fake, monkeypatch):
    """An open session wakes the server ten times a second: once nobody has used it for KEPT_IDLE
    seconds it is closed. A search before then reuses its connection; one after connects again.
    KEPT_IDLE is an hour while the reuse is checked, then a moment, waited for."""
    monkeypatch.setattr(transport, "KEPT_IDLE", 3600.0)
    control(fake, ask={"pace": 0}, requests=[])
    assert await ask(fake, "f", "first") == "completed"
    assert await ask(fake, "f", "soon after") == "completed"
    assert curl_timers() == 1
    monkeypatch.setattr(transport, "KEPT_IDLE", 0.01)
    assert await ask(fake, "f", "last before the pause") == "completed"
    await until(lambda: curl_timers() == 0)
    assert await ask(fake, "f", "much later") == "completed"
    assert peer_of(fake, "first") == peer_of(fake, "soon after") == peer_of(fake, "last before the pause")
    assert peer_of(fake, "last before the pause") != peer_of(fake, "much later")


async def test_a_kept_session_a_client_still_holds_stays_open(fake, monkeypatch):
    monkeypatch.setattr(transport, "KEPT_IDLE", 0.01)
    control(fake, ask={"pace": 0}, requests=[])
    cookies = {jar.SESSION_COOKIE: TOKEN}
    async with PerplexityClient(fake, fake, impersonate="chrome", cookies=cookies, account_id="g") as held:
        stream = held.ask(AskRequest("held"))
        async with stream:
            async for _ in stream:
                pass
        assert await ask(fake, "g", "beside it") == "completed"  # another client, closed at its end
        assert kept_session("g").closing is None  # no countdown while a client holds it
        await asyncio.sleep(0.1)
        assert curl_timers() == 1
        stream = held.ask(AskRequest("held again"))
        async with stream:
            async for _ in stream:
                pass
        assert extract(stream.snapshot, ended=stream.ended).status == "completed"
    assert peer_of(fake, "held") == peer_of(fake, "beside it") == peer_of(fake, "held again")
    await until(lambda: curl_timers() == 0)


async def test_without_an_account_each_client_connects_afresh(fake):
    control(fake, ask={"pace": 0}, requests=[])
    assert [await ask(fake, "", q) for q in ("four", "five")] == ["completed"] * 2
    peers = [tuple(r["peer"]) for r in seen(fake) if r["path"] == "/rest/sse/perplexity_ask"]
    assert len(peers) == 2 and peers[0] != peers[1]


async def test_a_stopped_answer_leaves_the_kept_session_working(fake):
    """Stop mid-answer (the transfer is let go at once), then the same account asks again."""
    control(fake, ask={"pace": 0.05, "answer": ["word "] * 100}, requests=[])  # 5 s of answer
    cookies = {jar.SESSION_COOKIE: TOKEN}
    for _ in range(3):
        async with PerplexityClient(fake, fake, impersonate="chrome", cookies=cookies, account_id="c") as c:
            stream = c.ask(AskRequest("stopped"))
            async with stream:
                async for _snapshot in stream:
                    break  # the first snapshot, then Stop
    control(fake, ask={"pace": 0})
    assert await ask(fake, "c", "after the stops") == "completed"


async def test_a_kept_connection_that_died_meanwhile_is_replaced(tmp_path):
    """The server closed the kept connection between two searches (a restart, an idle timeout):
    the next search connects again instead of failing."""
    log = tmp_path / "fake.log"
    proc, port = start("tests.fake_perplexity.app:application", {**os.environ}, log)
    base = f"http://127.0.0.1:{port}"
    try:
        control(base, ask={"pace": 0})
        assert await ask(base, "e", "before the restart") == "completed"
    finally:
        stop(proc)  # every connection to it is gone now
    proc, _ = start(
        "tests.fake_perplexity.app:application", {**os.environ}, tmp_path / "again.log", port=port
    )
    try:
        control(base, ask={"pace": 0}, requests=[])
        assert await ask(base, "e", "after the restart") == "completed"
    finally:
        stop(proc)


async def test_a_reply_beside_an_answer_comes_while_the_answer_streams(fake):
    """Two transfers on one kept session at once: a request sent while an answer streams (a
    deletion, an upload, the signed-out check) is answered, and the answer goes on to its end."""
    control(fake, ask={"pace": 0.02, "answer": ["word "] * 40}, requests=[])
    cookies = {jar.SESSION_COOKIE: TOKEN}
    async with PerplexityClient(fake, fake, impersonate="chrome", cookies=cookies, account_id="r") as c:
        stream = c.ask(AskRequest("beside"))
        emails = []
        async with stream:
            async for _ in stream:
                if not emails:
                    emails.append((await c.session_info()).email)
        assert emails and emails[0]
        assert extract(stream.snapshot, ended=stream.ended).answer.count("word") == 40


@asynccontextmanager
async def raw_server(
    *replies: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
    heads: list[bytes] | None = None,
):
    """A server that answers the first request of its n-th connection with replies[n] (the last
    one for any after), bytes as written, then closes that connection; `heads` gets each
    request's head."""
    connections = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        reply = replies[min(connections, len(replies) - 1)]
        connections += 1
        head = await reader.readuntil(b"\r\n\r\n")
        if heads is not None:
            heads.append(head)
        await reply(reader, writer)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
    finally:
        server.close()


STREAM_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
EVENT = b"9\r\ndata: 1\n\n\r\n"  # one HTTP chunk: "data: 1\n\n"


async def one_event(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(STREAM_HEAD + EVENT + b"0\r\n\r\n")
    await writer.drain()


def events_until_gone(gone: asyncio.Event, before: asyncio.Event | None = None) -> Callable:
    """A reply (after `before` is set) of events without end, until the client goes away: a
    transfer nobody lets go is read forever, and the test hangs until HANG_GUARD."""

    async def reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if before is not None:
            await before.wait()
        writer.write(STREAM_HEAD)
        try:
            while not reader.at_eof():
                writer.write(EVENT)
                await writer.drain()
                await asyncio.sleep(0.02)
        except ConnectionError:
            pass
        gone.set()

    return reply


async def wait(event: asyncio.Event) -> None:
    async with asyncio.timeout(HANG_GUARD):
        await event.wait()


async def test_a_header_that_is_not_ascii_is_passed_on():
    async def reply(reader, writer):
        head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Name: é\r\nContent-Length: 9\r\n\r\n"
        writer.write(head.encode() + b"data: 1\n\n")
        await writer.drain()

    curl = transport.CurlTransport("chrome", keep="h")
    async with (
        raw_server(reply) as url,
        httpx.AsyncClient(transport=curl) as client,
        client.stream("GET", url) as response,
    ):
        assert response.headers.raw[-1] == (b"X-Name", "é".encode())
        assert await response.aread() == b"data: 1\n\n"


async def test_no_cookie_crosses_requests_on_a_kept_session():
    """Each request carries its own Cookie header (the client keeps the cookies): neither one
    request's header nor a cookie set in a reply goes with the next request on the session."""

    async def plant(reader, writer):
        writer.write(b"HTTP/1.1 200 OK\r\nSet-Cookie: planted=1; Path=/\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()

    heads: list[bytes] = []
    async with raw_server(plant, heads=heads) as url:
        for cookie in ("mine=1", ""):
            curl = transport.CurlTransport("chrome", keep="k")  # a client of the same account
            request = httpx.Request("GET", url, headers={"Cookie": cookie} if cookie else {})
            response = await curl.handle_async_request(request)
            assert await response.aread() == b"ok"
            await response.aclose()
            await curl.aclose()
    assert b"mine=1" in heads[0]
    assert b"cookie" not in heads[1].lower(), heads[1]


async def test_a_body_left_before_its_end_is_let_go_and_the_session_goes_on():
    """Stop mid-answer: curl_cffi's own close would read the rest for nobody (here: forever)."""
    gone = asyncio.Event()
    curl = transport.CurlTransport("chrome", keep="m")
    async with (
        raw_server(events_until_gone(gone), one_event) as url,
        httpx.AsyncClient(transport=curl) as client,
    ):
        async with client.stream("GET", url) as response:
            async for chunk in response.aiter_bytes():
                assert chunk.startswith(b"data: 1")
                break
        await wait(gone)
        async with client.stream("GET", url) as response:
            assert await response.aread() == b"data: 1\n\n"


async def test_a_request_cancelled_before_its_reply_is_let_go_when_the_reply_comes():
    """curl_cffi would read the whole reply for nobody (a search stopped before its first byte)."""
    asked, cancelled, gone = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def reply(reader, writer):
        asked.set()
        await events_until_gone(gone, before=cancelled)(reader, writer)

    curl = transport.CurlTransport("chrome", keep="c")
    async with raw_server(reply, one_event) as url, httpx.AsyncClient(transport=curl) as client:
        sending = asyncio.ensure_future(client.send(client.build_request("GET", url), stream=True))
        await wait(asked)
        sending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sending
        cancelled.set()  # the reply's headers come only now
        await wait(gone)
        async with client.stream("GET", url) as response:
            assert await response.aread() == b"data: 1\n\n"


async def test_curl_cffi_still_has_what_letting_a_transfer_go_uses():
    """transport._abort reaches inside curl_cffi (no public way to stop one transfer of a shared
    session): a curl_cffi that changed those internals fails here, naming them."""
    from curl_cffi.requests import AsyncSession

    async with raw_server(one_event) as url, AsyncSession() as session:
        response = await session.request("GET", url, stream=True)
        missing = transport.abort_missing(response, session)
        assert not missing, (
            f"curl_cffi {curl_cffi.__version__} has no {', '.join(missing)}: "
            "transport._abort now reads a stopped answer to its end"
        )
        assert await response.acontent() == b"data: 1\n\n"


async def test_without_those_internals_a_transfer_is_closed_through_curl_cffis_public_aclose(caplog):
    closed = asyncio.Event()

    class ChangedResponse:  # one of a curl_cffi without the internals _abort uses
        async def aclose(self) -> None:
            closed.set()

    transport._warn_missing.cache_clear()
    with caplog.at_level(logging.WARNING, logger=transport.__name__):
        assert transport._abort(ChangedResponse(), object()) is None
        await wait(closed)
    assert f"no {', '.join(transport.ABORT_USES)}" in caplog.text
