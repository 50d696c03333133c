"""The live search socket on the real ASGI application: streaming, order, stop, re-join, limits."""

from __future__ import annotations

import asyncio
import json
import re

import httpx
import pytest
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from accounts.models import PerplexityAccount
from pplxweb.asgi import application
from search.live import outcome, runner
from search.models import Entry, Thread
from tests.conftest import session_cookie_for
from tests.search.conftest import Paced, answer_stream, serve, words

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = (b"origin", b"http://localhost")
HOST = (b"host", b"localhost")


async def connect(user, path="/ws/search/"):
    cookie = await session_cookie_for(user)
    comm = WebsocketCommunicator(application, path, headers=[ORIGIN, HOST, (b"cookie", cookie.encode())])
    connected, _ = await comm.connect()
    assert connected
    return comm


async def receive_until(comm, needle: str, timeout: float = 5.0) -> list[str]:
    messages = []
    async with asyncio.timeout(timeout):
        while True:
            message = await comm.receive_from(timeout=timeout)
            messages.append(message)
            if needle in message:
                return messages


async def ask(user, message: dict, until: str, timeout: float = 5.0) -> list[str]:
    """Send one message on a fresh socket; the messages up to the one containing `until`."""
    comm = await connect(user)
    await comm.send_to(text_data=json.dumps(message))
    messages = await receive_until(comm, until, timeout)
    await comm.disconnect()
    return messages


async def stop_stalled(comm) -> None:
    """Stop the one run (its stream stalls for good), as a page's Stop does, and close the socket:
    the run ends with the test instead of at the fixture's wait."""
    entry = await Entry.objects.aget()
    await comm.send_to(text_data=json.dumps({"action": "stop", "entry": str(entry.pk)}))
    await receive_until(comm, "status-stopped")
    await comm.disconnect()


async def entry_status(pk: int) -> str:
    return (await Entry.objects.aget(pk=pk)).status


async def test_a_question_streams_in_and_is_saved(owner, alinked, upstream):
    route = serve(upstream, Paced(answer_stream(["Hello ", "**world** [1]"], sources=2)))
    messages = await ask(
        owner, {"q": "  what is x?  ", "HEADERS": {"HX-Request": "true"}}, "status-completed"
    )
    joined = "".join(messages)
    assert 'id="entries" hx-swap-oob="beforeend"' in messages[0]  # the entry shows at once
    assert "what is x?" in messages[0]
    assert joined.index("source") < joined.index("status-completed")
    assert 'href="https://s1.example/page" class="cite"' in joined
    assert "<strong>world</strong>" in joined and "data-copy" in messages[-1]  # Copy, at the end
    entry = await Entry.objects.aget()
    assert entry.status == "completed" and entry.answer == "Hello **world** [1]"
    assert [s["url"] for s in entry.sources] == ["https://s1.example/page", "https://s2.example/page"]
    assert entry.related == ["What next?", "And then?"] and entry.model == "pplx_pro"
    assert entry.credential == "session" and entry.backend_uuid == "b-1"
    assert entry.first_byte_ms is not None and entry.done_ms is not None
    sent = json.loads(route.calls.last.request.content)
    assert sent["query_str"] == "what is x?" and sent["params"]["is_incognito"] is True
    assert "LIVE-SEARCH-TOKEN" in route.calls.last.request.headers["cookie"]


@pytest.mark.parametrize(
    "response, status",
    [
        (Paced(answer_stream(["At once."]), pause=0), "completed"),
        (httpx.Response(500, text="oops"), "failed"),
    ],
    ids=["answer", "failure"],
)
async def test_the_new_entry_arrives_before_its_first_update_however_fast(
    owner, alinked, upstream, response, status
):
    # the run starts before the socket sends the new entry: an upstream that answers (or fails)
    # at once must still find the entry on the page first
    serve(upstream, response)
    messages = await ask(owner, {"q": "quick"}, f"status-{status}")
    assert 'id="entries" hx-swap-oob="beforeend"' in messages[0]
    assert not any('id="entries"' in m for m in messages[1:])


async def test_upstream_text_is_escaped_in_every_fragment(owner, alinked, upstream):
    events = answer_stream(["<script>alert(1)</script> ", "<img src=x onerror=alert(1)>"])
    events[1]["blocks"][0]["web_result_block"]["web_results"][0].update(
        name="<b onmouseover=x>T</b>", url="javascript:alert(1)"
    )
    events[-1]["related_queries"] = ["<script>r</script>"]
    serve(upstream, Paced(events))
    joined = "".join(await ask(owner, {"q": "<i>question</i>"}, "status-completed"))
    assert "<script>" not in joined and "<img" not in joined and "<b onmouseover" not in joined
    assert "javascript:" not in joined
    assert "&lt;i&gt;question&lt;/i&gt;" in joined


async def test_complete_blocks_are_sent_once(owner, alinked, upstream):
    serve(upstream, Paced(answer_stream(words(120)), pause=0.005))
    joined = "".join(await ask(owner, {"q": "long"}, "status-completed", timeout=10))
    blocks = "".join(
        re.findall(r'<div id="entry-\d+-blocks" hx-swap-oob="beforeend">(.*?)</div>', joined, re.S)
    )
    # every finished paragraph arrives once as a rendered block, in order
    for i in (19, 39, 59, 79, 99, 119):
        assert blocks.count(f"word{i}</p>") == 1, i
    assert blocks.index("word19</p>") < blocks.index("word39</p>") < blocks.index("word119</p>")
    entry = await Entry.objects.aget()
    assert entry.answer == "".join(words(120))


async def test_updates_merge_events_and_a_pause_flushes_what_waits(owner, alinked, upstream):
    """While text flows, one update carries several events (at most one per ~80 ms: the
    benchmark tests.benchmarks.live counts them); when the stream pauses, what arrived meanwhile
    is sent in the pause, not held until the stream goes on (here it never does)."""
    # no PENDING `final` event: it would send the last words at once (its own test), not the pause
    stream = answer_stream(words(40), complete=False)[:-1]
    serve(upstream, Paced(stream, pause=0.01, end=False, stall=600))
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "cadence"}))
    updates = [m for m in await receive_until(comm, "word39", timeout=20) if "-tail" in m or "-blocks" in m]
    assert 1 <= len(updates) < 40  # each event would be an update of its own without the throttle
    await stop_stalled(comm)


async def test_the_first_words_do_not_wait_for_the_cadence(owner, alinked, upstream, monkeypatch):
    """The ids, the sources, then the first words: the words go out at once instead of waiting
    out the update interval since the first update (made 30 s here; the stream then pauses)."""
    from search.live import runner

    monkeypatch.setattr(runner, "UPDATE_EVERY", 30.0)
    stream = answer_stream(words(30), complete=False)[:-1]
    serve(upstream, Paced(stream, pause=0.01, end=False, stall=600))
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "first words"}))
    messages = await receive_until(comm, "word0", timeout=20)
    assert re.search(r'id="entry-\d+-sources"', "".join(messages))  # and the sources with them, or before
    await stop_stalled(comm)


async def test_closing_the_tab_does_not_stop_the_run(owner, alinked, upstream):
    serve(upstream, Paced(answer_stream(words(30)), pause=0.02))
    await ask(owner, {"q": "keep going"}, "entries")
    entry = await Entry.objects.aget()
    for _ in range(100):
        if await entry_status(entry.pk) != "running":
            break
        await asyncio.sleep(0.05)
    entry = await Entry.objects.aget()
    assert entry.status == "completed" and entry.answer == "".join(words(30))


async def test_rejoining_mid_run_gets_the_current_state_then_the_rest(owner, alinked, upstream):
    serve(upstream, Paced(answer_stream(words(60)), pause=0.02))
    first = await connect(owner)
    await first.send_to(text_data=json.dumps({"q": "rejoin"}))
    await receive_until(first, "word5")
    entry = await Entry.objects.aget()
    second = await connect(owner, f"/ws/search/?thread={entry.thread_id}")
    messages = await receive_until(second, "status-completed", timeout=10)
    joined = "".join(messages)
    assert f'id="entry-{entry.pk}-answer" class="answer" hx-swap-oob="true"' in joined  # a full state
    assert "word59" in joined
    await receive_until(first, "status-completed", timeout=10)  # the first watcher saw the end too
    await first.disconnect()
    await second.disconnect()


async def test_stop_keeps_the_partial_answer(owner, alinked, upstream):
    upstream_stream = Paced(answer_stream(words(200)), pause=0.02)
    serve(upstream, upstream_stream)
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "stop me"}))
    await receive_until(comm, "word3")
    entry = await Entry.objects.aget()
    await comm.send_to(text_data=json.dumps({"action": "stop", "entry": str(entry.pk)}))
    joined = "".join(await receive_until(comm, "status-stopped"))
    assert "Stopped. What had arrived is kept." in joined
    entry = await Entry.objects.aget()
    assert entry.status == "stopped" and entry.answer.startswith("word0 word1 word2 word3")
    assert upstream_stream.closed
    await comm.disconnect()


async def test_a_stop_from_another_process_arrives_through_the_control_group(owner, alinked, upstream):
    serve(upstream, Paced(answer_stream(words(200)), pause=0.02))
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "stop me from elsewhere"}))
    await receive_until(comm, "word3")
    entry = await Entry.objects.aget()
    # the run is not in this process's list for the stop (as when another server process runs it)
    await get_channel_layer().group_send(runner.control_group(entry.pk), {"type": "run.stop"})
    await receive_until(comm, "status-stopped")
    entry = await Entry.objects.aget()
    assert entry.status == "stopped" and entry.answer.startswith("word0 word1 word2 word3")
    await comm.disconnect()


async def test_a_stop_is_asked_again_when_a_library_swallows_it(owner, alinked, upstream, monkeypatch):
    """A cancellation can be lost inside a library (asyncio.wait_for in Python 3.11, the Redis
    layer): this run's updates swallow the first one, as such a library would."""
    serve(upstream, Paced(answer_stream(words(200)), pause=0.02))
    original, in_update, swallowed = runner.Run.update, asyncio.Event(), []

    async def swallowing_update(self, final=False):
        if self.first_text_ms is not None and not final and not swallowed:
            try:
                in_update.set()
                await asyncio.sleep(1)
            except asyncio.CancelledError:
                swallowed.append(True)
        await original(self, final)

    monkeypatch.setattr(runner.Run, "update", swallowing_update)
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "stop me twice"}))
    await asyncio.wait_for(in_update.wait(), 5)
    entry = await Entry.objects.aget()
    await comm.send_to(text_data=json.dumps({"action": "stop", "entry": str(entry.pk)}))
    await receive_until(comm, "status-stopped")
    assert swallowed
    entry = await Entry.objects.aget()
    assert entry.status == "stopped" and "word199" not in entry.answer
    await comm.disconnect()


@pytest.mark.parametrize(
    ("response", "status", "sentence"),
    [
        (httpx.Response(401), "failed", "Re-link in Settings"),
        (
            httpx.Response(
                403, text="<title>Just a moment...</title>", headers={"content-type": "text/html"}
            ),
            "failed",
            "Cloudflare",
        ),
        (httpx.Response(429, headers={"retry-after": "12"}), "failed", "try again in 12 s"),
        (httpx.Response(400), "failed", "may need an update"),
        (httpx.Response(502), "failed", "server error"),
        (
            Paced(answer_stream(["partial"], complete=False), end=False, then=httpx.RemoteProtocolError("x")),
            "truncated",
            "dropped",
        ),
        (
            Paced(answer_stream(["partial"], complete=False)),
            "truncated",
            "stopped before Perplexity finished",
        ),
        (
            Paced(
                [
                    *answer_stream(["partial"], complete=False),
                    {"status": "failed", "error_code": "FREE_TIER_RATE_LIMITED"},
                ]
            ),
            "failed",
            "rate limit",
        ),
    ],
)
async def test_each_upstream_failure_ends_in_its_sentence_and_status(
    owner, alinked, upstream, response, status, sentence
):
    serve(upstream, response)
    joined = "".join(await ask(owner, {"q": "fail"}, f"status-{status}"))
    assert sentence in joined
    entry = await Entry.objects.aget()
    assert entry.status == status and sentence in entry.error
    assert ("data-copy" in joined) == bool(entry.answer)  # nothing to copy: no Copy


async def test_auth_failure_marks_the_link(owner, alinked, upstream):
    serve(upstream, httpx.Response(401))
    await ask(owner, {"q": "x"}, "status-failed")
    account = await PerplexityAccount.objects.aget(user=owner)
    assert account.status == "needs_attention"


@pytest.fixture
def fresh_session_checks(monkeypatch):
    from search.live import checks

    monkeypatch.setattr(checks, "_checked", {})


async def test_turbo_answering_another_model_warns_once_the_session_says_signed_out(
    owner, alinked, upstream, fresh_session_checks
):
    serve(upstream, Paced(answer_stream(["x"], model="turbo")))
    session = upstream.get("/api/auth/session").respond(json={})  # signed out
    joined = "".join(await ask(owner, {"q": "x", "model": "pplx_pro"}, "status-completed"))
    assert "says the linked session is signed out" in joined
    entry = await Entry.objects.aget()
    assert entry.downgraded and entry.status == "completed"
    assert session.call_count == 1
    account = await PerplexityAccount.objects.aget(user=owner)
    assert account.status == "needs_attention"


async def test_turbo_answering_another_model_with_a_live_session_is_no_downgrade(
    owner, alinked, upstream, fresh_session_checks
):
    serve(upstream, Paced(answer_stream(["x"], model="turbo")), Paced(answer_stream(["y"], model="turbo")))
    session = upstream.get("/api/auth/session").respond(
        json={"user": {"id": "u1", "email": "o@example.com"}, "expires": "2027-01-01T00:00:00Z"}
    )
    joined = "".join(await ask(owner, {"q": "x", "model": "pplx_pro"}, "status-completed"))
    assert "signed out" not in joined and "anonymous model" not in joined
    await ask(owner, {"q": "y", "model": "pplx_pro"}, "status-completed")
    assert session.call_count == 1  # asked once per link per few minutes
    assert not await Entry.objects.filter(downgraded=True).aexists()
    account = await PerplexityAccount.objects.aget(user=owner)
    assert account.status != "needs_attention"


async def test_quick_mode_answered_by_turbo_is_normal(owner, alinked, upstream, fresh_session_checks):
    serve(upstream, Paced(answer_stream(["x"], model="turbo")))
    session = upstream.get("/api/auth/session").respond(json={})
    joined = "".join(await ask(owner, {"q": "x", "model": "pplx_pro", "mode": "auto"}, "status-completed"))
    assert "signed out" not in joined and session.call_count == 0
    assert not (await Entry.objects.aget()).downgraded


async def test_no_link_at_all_says_what_to_do_and_starts_nothing(owner, upstream):
    joined = "".join(await ask(owner, {"q": "x"}, "search-error"))
    assert "Link your Perplexity account in Settings first" in joined
    assert await Entry.objects.acount() == 0  # no entry that could only fail


@pytest.mark.parametrize(
    ("message", "sentence"),
    [
        ("not json", "could not read that message"),
        (json.dumps([1, 2]), "could not read that message"),
        ("x" * (64 * 1024 + 1), "too large"),
        (json.dumps({"q": "   "}), "Type a question first."),
        (json.dumps({"q": "x" * 8001}), "at most 8,000 characters"),
        (json.dumps({"q": "x", "after": "2030-01-01"}), "in the future"),
        (json.dumps({"q": "x", "after": "2025-02-01", "before": "2025-01-01"}), "must be on or after"),
        (
            json.dumps({"q": "x", "include_domains": " ".join(f"s{i}.com" for i in range(21))}),
            "At most 20 sites",
        ),
        (json.dumps({"q": "x", "include_domains": "not a domain!"}), "is not a domain"),
        (json.dumps({"q": "x", "model": "no-such-model"}), "Select a valid choice"),
        (json.dumps({"q": "x", "language": "english please"}), "language code"),
        (json.dumps({"q": "x", "thread": "999999"}), "not found"),
        (json.dumps({"action": "stop", "entry": "999999"}), "not found"),
    ],
)
async def test_bad_messages_get_an_error_fragment_and_the_socket_stays(
    owner, alinked, upstream, message, sentence
):
    serve(upstream, Paced(answer_stream(["fine"])))
    comm = await connect(owner)
    await comm.send_to(text_data=message)
    reply = await comm.receive_from(timeout=5)
    assert 'id="search-error"' in reply and sentence in reply
    await comm.send_to(text_data=json.dumps({"q": "still works"}))
    await receive_until(comm, "status-completed")
    assert await Entry.objects.acount() == 1
    await comm.disconnect()


async def test_at_most_two_running_searches(owner, alinked, upstream):
    serve(upstream, *(Paced(answer_stream(words(100)), pause=0.05) for _ in range(3)))
    comm = await connect(owner)
    for question in ("one", "two"):
        await comm.send_to(text_data=json.dumps({"q": question}))
        await receive_until(comm, "entries")
    await comm.send_to(text_data=json.dumps({"q": "three"}))
    reply = await receive_until(comm, "search-error")
    assert "You have 2 searches running" in "".join(reply)
    for entry in [e async for e in Entry.objects.all()]:
        await comm.send_to(text_data=json.dumps({"action": "stop", "entry": entry.pk}))
    await receive_until(comm, "status-stopped")
    await comm.disconnect()


async def test_another_persons_thread_is_not_found(owner, member, alinked, upstream):
    serve(upstream, Paced(answer_stream(["mine"])))
    await ask(owner, {"q": "private"}, "status-completed")
    alinked.shared = True  # the member can search (else that is what they are told first)
    await alinked.asave()
    entry = await Entry.objects.aget()
    other = await connect(member, f"/ws/search/?thread={entry.thread_id}")
    reply = await other.receive_from(timeout=5)
    assert "not found" in reply and "private" not in reply
    await other.send_to(text_data=json.dumps({"q": "sneak", "thread": entry.thread_id}))
    assert "not found" in await other.receive_from(timeout=5)
    await other.send_to(text_data=json.dumps({"action": "stop", "entry": entry.pk}))
    assert "not found" in await other.receive_from(timeout=5)
    await other.disconnect()


async def test_a_follow_up_sends_the_thread_ids(owner, alinked, upstream):
    route = serve(upstream, Paced(answer_stream(["first"])), Paced(answer_stream(["second"])))
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "first"}))
    await receive_until(comm, "status-completed")
    entry = await Entry.objects.aget()
    await comm.send_to(text_data=json.dumps({"q": "and then?", "thread": str(entry.thread_id)}))
    await receive_until(comm, "and then?")
    await receive_until(comm, "status-completed")
    params = json.loads(route.calls.last.request.content)["params"]
    assert (
        params["query_source"] == "followup"
        and params["last_backend_uuid"] == "b-1"
        and params["read_write_token"] == "rw-1"
    )
    assert await Entry.objects.filter(thread_id=entry.thread_id).acount() == 2
    # the follow-up moves the thread to the top of the history
    follow_up = await Entry.objects.filter(thread_id=entry.thread_id).order_by("-pk").afirst()
    thread = await Thread.objects.aget(pk=entry.thread_id)
    assert thread.updated >= follow_up.created > thread.created
    await comm.disconnect()


def progress_saves(monkeypatch, before_progress) -> list[bool]:
    """Runs save progress every 50 ms, calling `before_progress` on the database thread before
    each progress save; returns the list of saves made (True for the final one)."""
    from search.live import runner

    saves: list[bool] = []
    save_run = outcome.save_run

    def save(run, final):
        saves.append(final)
        if not final:
            before_progress()
        save_run(run, final)

    monkeypatch.setattr(outcome, "save_run", save)
    monkeypatch.setattr(runner, "SAVE_EVERY", 0.05)
    return saves


async def test_a_slow_database_does_not_hold_the_stream(owner, alinked, upstream, monkeypatch):
    """Progress saves go beside the stream: with each one held until the page has the last words
    (the database thread busy with other people's starts), the words still arrive, and the final
    save, which waits for the one in flight, keeps the whole answer."""
    import threading

    released = threading.Event()
    saves = progress_saves(monkeypatch, lambda: released.wait(30))
    serve(upstream, Paced(answer_stream(words(40)), pause=0.01))
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "slow disk"}))
    try:
        await receive_until(comm, "word39", timeout=20)  # while a progress save is held
    finally:
        released.set()
    await receive_until(comm, "status-completed", timeout=20)
    await comm.disconnect()
    entry = await Entry.objects.aget()
    assert entry.status == "completed" and entry.answer == "".join(words(40))
    assert saves[-1] is True and False in saves  # progress was saved on the way, then the end


async def test_a_failed_progress_save_is_logged_and_the_end_is_still_saved(
    owner, alinked, upstream, monkeypatch, caplog
):
    def disk_full():
        raise RuntimeError("disk full")

    progress_saves(monkeypatch, disk_full)
    serve(upstream, Paced(answer_stream(words(20)), pause=0.01))
    await ask(owner, {"q": "full disk"}, "status-completed")
    entry = await Entry.objects.aget()
    assert entry.status == "completed" and entry.answer == "".join(words(20))
    failures = [r for r in caplog.records if "progress save for entry" in r.getMessage()]
    assert failures and "disk full" in str(failures[0].exc_info[1])


async def test_the_last_words_are_shown_before_the_ends_database_work(owner, alinked, upstream, monkeypatch):
    """When the stream ends, what arrived since the last update goes out at once: the end's
    database work (bookkeeping, the final save) may queue behind other people's on its one
    thread, and the answer's last words used to wait for it."""
    import threading

    from search.live import runner

    released = threading.Event()
    monkeypatch.setattr(runner, "UPDATE_EVERY", 30.0)  # only the first words, then the end
    monkeypatch.setattr(outcome, "record_search", lambda *args: released.wait(30))
    serve(upstream, Paced(answer_stream(words(30)), pause=0.005))
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "busy end"}))
    try:
        await receive_until(comm, "word0")
        last = await receive_until(comm, "word29", timeout=20)  # while the end's work is held
    finally:
        released.set()
    assert "status-completed" not in last[-1]
    await receive_until(comm, "status-completed", timeout=20)
    await comm.disconnect()
    assert (await Entry.objects.aget()).answer == "".join(words(30))


async def test_the_last_words_go_out_at_once_even_when_a_progress_save_read_them_first(
    owner, alinked, upstream, monkeypatch
):
    """A progress save extracts the newest snapshot to write it. When it starts on the last event,
    that snapshot was read but never shown: the last words must still go out when the stream
    ends, not after the end's database work (which waits for that save)."""
    import threading

    from search.live import runner

    released = threading.Event()
    monkeypatch.setattr(runner, "UPDATE_EVERY", 30.0)
    monkeypatch.setattr(runner, "SAVE_EVERY", 0.0)  # a progress save on every event (each quick)
    monkeypatch.setattr(outcome, "record_search", lambda *args: released.wait(30))
    serve(upstream, Paced(answer_stream(words(12)), pause=0.02))
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "saved as it went"}))
    try:
        last = await receive_until(comm, "word11", timeout=20)  # while the end's work is held
    finally:
        released.set()
    assert "status-completed" not in last[-1]
    await receive_until(comm, "status-completed", timeout=20)
    await comm.disconnect()


async def test_a_fragment_for_a_socket_the_browser_is_closing_is_dropped_quietly():
    """An ASGI server may raise on a send once the browser's closing handshake began (the spec
    says: a subclass of OSError); nobody is left to tell."""
    from search.live.consumers import SearchConsumer

    class Disconnected(ConnectionError):
        """as a server names it"""

    async def closing(message):
        raise Disconnected("Attempt to send on a closed protocol")

    consumer = SearchConsumer()
    consumer.base_send, consumer.channel_name = closing, "specific.test"
    await consumer.entry_fragment({"type": "entry.fragment", "html": "<p>late</p>"})  # no exception

    async def broken(message):
        raise RuntimeError("something else")

    consumer.base_send = broken
    with pytest.raises(RuntimeError):  # only that one is expected
        await consumer.entry_fragment({"type": "entry.fragment", "html": "<p>late</p>"})


async def test_the_catalogue_is_refreshed_after_a_search_when_due(owner, alinked, upstream):
    """The end's one trip to the database says the catalogue is due (none is stored yet): it is
    fetched after the answer, and the next search finds it fresh."""
    from accounts.models import ModelCatalogue

    serve(upstream, Paced(answer_stream(words(3))), Paced(answer_stream(words(3))))
    await ask(owner, {"q": "first"}, "status-completed")
    for _ in range(100):  # the refresh runs after the answer is shown
        if await ModelCatalogue.objects.aexists():
            break
        await asyncio.sleep(0.02)
    catalogue = await ModelCatalogue.objects.aget()
    assert "pplx_pro" in json.dumps(catalogue.data)
    calls = len([c for c in upstream.calls if c.request.url.path == "/rest/models/config"])
    await ask(owner, {"q": "second"}, "status-completed")
    await asyncio.sleep(0.2)
    assert len([c for c in upstream.calls if c.request.url.path == "/rest/models/config"]) == calls == 1


async def test_a_failed_record_of_the_search_keeps_the_saved_answer(
    owner, alinked, upstream, monkeypatch, caplog
):

    def broken(*args):
        raise RuntimeError("accounts table locked")

    monkeypatch.setattr(outcome, "record_search", broken)
    serve(upstream, Paced(answer_stream(words(5))))
    await ask(owner, {"q": "bookkeeping fails"}, "status-completed")
    entry = await Entry.objects.aget()
    assert entry.status == "completed" and entry.answer == "".join(words(5))
    failed = [r for r in caplog.records if "recording the search of entry" in r.getMessage()]
    assert failed and "accounts table locked" in str(failed[0].exc_info[1])


async def test_the_last_words_go_out_when_perplexity_says_the_text_is_complete(
    owner, alinked, upstream, monkeypatch
):
    """The PENDING `final` event (text_completed) ends the text; COMPLETED can come much later.
    The last words are shown at that event, not at the end of the stream."""
    from search.live import runner

    monkeypatch.setattr(runner, "UPDATE_EVERY", 30.0)  # no cadence updates
    stream = answer_stream(words(30), complete=False)  # ends with the PENDING final event
    serve(upstream, Paced(stream, pause=0.005, end=False, stall=600))  # then COMPLETED never comes
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "a slow finish"}))
    await receive_until(comm, "word29", timeout=20)
    await stop_stalled(comm)


async def test_a_run_sends_no_part_the_new_entry_already_shows(owner, alinked, upstream):
    """The new entry shows the running state (status, "Searching…", no sources); the run's
    first update sends only what changed since, and the meta part only once, at the end."""
    serve(upstream, Paced(answer_stream(words(5))))
    messages = await ask(owner, {"q": "what changed"}, "status-completed")
    joined = "".join(messages)
    assert joined.count('class="entry-meta" hx-swap-oob') == 1
    assert joined.count('class="entry-status" hx-swap-oob') == 1  # running -> completed
    assert joined.count('class="related" hx-swap-oob') == 1


async def test_garbage_is_collected_fully_once_no_answer_is_running(owner, alinked, upstream, monkeypatch):
    """A full collection pauses every answer, so the server runs one when the last answer has
    ended (pplxweb.collector): not while another is still arriving."""
    import gc

    from pplxweb import collector

    monkeypatch.setattr(collector, "IDLE", 0.1)
    collections = []
    monkeypatch.setattr(gc, "collect", lambda *args: collections.append(asyncio.get_running_loop().time()))
    serve(upstream, Paced(answer_stream(words(3))), Paced(answer_stream(words(40)), pause=0.02))
    comm = await connect(owner)
    for question in ("short", "long"):
        await comm.send_to(text_data=json.dumps({"q": question}))
        await receive_until(comm, "entries")
    await receive_until(comm, "status-completed")  # the short one; the long one runs on
    await asyncio.sleep(0.3)
    assert collections == []
    await receive_until(comm, "status-completed")
    ended = asyncio.get_running_loop().time()
    await asyncio.sleep(0.3)
    assert len(collections) == 1 and collections[0] - ended >= 0.05
    await comm.disconnect()
