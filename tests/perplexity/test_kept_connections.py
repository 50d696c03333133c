"""Searches keep their connection to Perplexity: one curl session per account, reused, never
shared between accounts. Against the fake on a real loopback socket (daphne), so the fake can
tell connections apart by the client's port."""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest

from pplxweb.perplexity import cookies as jar
from pplxweb.perplexity import transport
from pplxweb.perplexity.client import PerplexityClient
from pplxweb.perplexity.extract import extract
from pplxweb.perplexity.request import AskRequest
from tests.e2e.conftest import control, seen, start, stop
from tests.fake_perplexity.app import TOKEN


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
    assert no_transfers_counted()
    return extract(stream.snapshot, ended=stream.ended).status


def kept_session(account: str) -> transport._Kept:
    return transport._kept[asyncio.get_running_loop()][("chrome", account)]


def no_transfers_counted() -> bool:
    """Every request ended is counted out again, whichever way it ended (see _Kept.paced)."""
    sessions = transport._kept.get(asyncio.get_running_loop(), {}).values()
    return all(kept.users or (kept.streams, kept.others) == (0, 0) for kept in sessions)


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
    return sum(t.get_coro().__qualname__ == "AsyncCurl._force_timeout" for t in asyncio.all_tasks())


async def test_an_idle_kept_session_is_closed_and_the_next_search_connects_again(fake, monkeypatch):
    """An open session wakes the server ten times a second: once nobody has used it for KEPT_IDLE
    seconds it is closed. A search before then reuses its connection; one after connects again."""
    monkeypatch.setattr(transport, "KEPT_IDLE", 0.5)
    control(fake, ask={"pace": 0}, requests=[])
    assert await ask(fake, "f", "first") == "completed"
    await asyncio.sleep(0.2)
    assert await ask(fake, "f", "soon after") == "completed"
    assert curl_timers() == 1
    await asyncio.sleep(1.0)
    assert curl_timers() == 0
    assert await ask(fake, "f", "much later") == "completed"
    assert peer_of(fake, "first") == peer_of(fake, "soon after") != peer_of(fake, "much later")


async def test_a_kept_session_a_client_still_holds_stays_open(fake, monkeypatch):
    monkeypatch.setattr(transport, "KEPT_IDLE", 0.2)
    control(fake, ask={"pace": 0}, requests=[])
    cookies = {jar.SESSION_COOKIE: TOKEN}
    async with PerplexityClient(fake, fake, impersonate="chrome", cookies=cookies, account_id="g") as held:
        stream = held.ask(AskRequest("held"))
        async with stream:
            async for _ in stream:
                pass
        assert await ask(fake, "g", "beside it") == "completed"  # another client, closed at its end
        await asyncio.sleep(0.6)
        assert curl_timers() == 1
        stream = held.ask(AskRequest("held again"))
        async with stream:
            async for _ in stream:
                pass
        assert extract(stream.snapshot, ended=stream.ended).status == "completed"
    assert peer_of(fake, "held") == peer_of(fake, "beside it") == peer_of(fake, "held again")
    await asyncio.sleep(0.6)
    assert curl_timers() == 0


async def test_without_an_account_each_client_connects_afresh(fake):
    control(fake, ask={"pace": 0}, requests=[])
    assert [await ask(fake, "", q) for q in ("four", "five")] == ["completed"] * 2
    peers = [tuple(r["peer"]) for r in seen(fake) if r["path"] == "/rest/sse/perplexity_ask"]
    assert len(peers) == 2 and peers[0] != peers[1]


async def test_a_stopped_answer_leaves_the_kept_session_working(fake):
    """Stop mid-answer (the transfer is detached at once), then the same account asks again."""
    import asyncio
    import time

    control(fake, ask={"pace": 0.05, "answer": ["word "] * 100}, requests=[])  # 5 s of answer
    cookies = {jar.SESSION_COOKIE: TOKEN}
    for _ in range(3):
        async with PerplexityClient(fake, fake, impersonate="chrome", cookies=cookies, account_id="c") as c:
            stream = c.ask(AskRequest("stopped"))
            async with stream:
                async for _snapshot in stream:
                    stopped = time.monotonic()
                    break  # the first snapshot, then Stop
        assert time.monotonic() - stopped < 1.0  # closing does not wait for the answer's end
    control(fake, ask={"pace": 0})
    assert await asyncio.wait_for(ask(fake, "c", "after the stops"), 10) == "completed"


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


async def test_an_answer_alone_is_read_at_the_pace_of_the_page(fake):
    """Read as it arrives, 60 events 10 ms apart would be ~60 reads and as many snapshots (each a
    wake-up of the server); paced, one every PACE at most, each with all that came meanwhile."""
    control(fake, ask={"pace": 0.01, "answer": ["word "] * 60}, requests=[])
    cookies = {jar.SESSION_COOKIE: TOKEN}
    async with PerplexityClient(fake, fake, impersonate="chrome", cookies=cookies, account_id="p") as c:
        stream = c.ask(AskRequest("paced"))
        async with stream:
            times = [time.monotonic() async for _ in stream]
    assert extract(stream.snapshot, ended=stream.ended).answer.count("word") == 60
    took = times[-1] - times[0]
    assert took > 0.4 and len(times) <= took / transport.PACE + 3, (took, len(times))
    assert no_transfers_counted()


async def test_a_reply_beside_an_answer_is_read_at_once(fake):
    """Pacing is for answers only: while another request is on its way (a deletion, an upload's
    flow control, the signed-out check) the session reads as data comes."""
    control(fake, ask={"pace": 0.02, "answer": ["word "] * 40}, requests=[])
    cookies = {jar.SESSION_COOKIE: TOKEN}
    async with PerplexityClient(fake, fake, impersonate="chrome", cookies=cookies, account_id="r") as c:
        stream = c.ask(AskRequest("beside"))
        async with stream:
            async for _ in stream:
                kept = kept_session("r")
                assert kept.paced() and (kept.streams, kept.others) == (1, 0)
                other = asyncio.ensure_future(c.session_info())
                await asyncio.sleep(0)
                assert not kept.paced()  # sent, and counted until its body is read
                assert (await other).email
                assert kept.paced()
                break
        assert (kept.streams, kept.others) == (0, 0)
    assert no_transfers_counted()


async def test_paced_reads_rest_after_a_read_and_only_while_paced():
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    paced = True
    reads: list[tuple[float, bytes]] = []
    reader = transport._PacedReads(loop, lambda: paced)
    reader.add_reader(ours.fileno(), lambda: reads.append((loop.time(), ours.recv(1 << 16))))
    try:
        for _ in range(30):
            theirs.send(b"x")
            await asyncio.sleep(0.01)
        await asyncio.sleep(transport.PACE + 0.05)
        assert b"".join(data for _, data in reads) == b"x" * 30  # nothing lost, all read
        gaps = [b[0] - a[0] for a, b in itertools.pairwise(reads)]
        assert len(reads) <= 0.3 / transport.PACE + 2 and min(gaps) >= transport.PACE * 0.9, gaps
        theirs.send(b"v")
        async with asyncio.timeout(1):
            while reads[-1][1] != b"v":
                await asyncio.sleep(0.001)
        theirs.send(b"w")  # just after a read: it rests, until another request wakes it
        await asyncio.sleep(0.01)
        assert reads[-1][1] == b"v"
        reader.wake()
        await asyncio.sleep(0.01)
        assert reads[-1][1] == b"w"
        paced, reads[:] = False, []
        reader.wake()
        for _ in range(10):
            theirs.send(b"y")
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.02)
        assert len(reads) >= 8  # read as it comes
        reader.remove_reader(ours.fileno())
        theirs.send(b"z")
        await asyncio.sleep(0.05)
        assert b"z" not in b"".join(data for _, data in reads)
    finally:
        reader.remove_reader(ours.fileno())
        ours.close()
        theirs.close()


@asynccontextmanager
async def raw_server(
    reply: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[str]:
    """A server that answers each connection's first request with `reply`, bytes as written."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await reply(reader, writer)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
    finally:
        server.close()


async def test_a_header_that_is_not_ascii_is_passed_on_and_counted_out():
    async def reply(reader, writer):
        head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Name: é\r\nContent-Length: 9\r\n\r\n"
        writer.write(head.encode() + b"data: 1\n\n")
        await writer.drain()

    curl = transport.CurlTransport("chrome", keep="h")
    async with raw_server(reply) as url, httpx.AsyncClient(transport=curl) as client:
        async with client.stream("GET", url) as response:
            assert (kept_session("h").streams, kept_session("h").others) == (1, 0)
            assert response.headers.raw[-1] == (b"X-Name", "é".encode())
            assert await response.aread() == b"data: 1\n\n"
        assert no_transfers_counted()


async def test_a_request_cancelled_before_its_reply_is_aborted_when_the_reply_comes():
    """curl_cffi would read the whole reply for nobody (a search stopped before its first byte)."""
    gone = asyncio.Event()

    async def reply(reader, writer):
        await asyncio.sleep(0.3)  # after the cancel
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        for _ in range(100):  # 5 s of events, unless the client goes away
            if reader.at_eof():
                gone.set()
                return
            writer.write(b"9\r\ndata: 1\n\n\r\n")
            await asyncio.sleep(0.05)

    curl = transport.CurlTransport("chrome", keep="c")
    async with raw_server(reply) as url, httpx.AsyncClient(transport=curl) as client:
        sending = asyncio.ensure_future(client.send(client.build_request("GET", url), stream=True))
        await asyncio.sleep(0.1)
        sending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sending
        assert no_transfers_counted()
        async with asyncio.timeout(1.5):
            await gone.wait()
        assert not kept_session("c").session.acurl._curl2future  # no transfer left in curl
