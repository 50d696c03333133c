"""The search pages over plain HTTP (JavaScript off), OpenSearch, and runs that die."""

from __future__ import annotations

import asyncio
import re
import socket
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.urls import reverse
from django.utils import timezone

from search.live import asking, liveness, runner
from search.models import Entry, Thread
from tests.search.conftest import Paced, answer_stream, serve, words

pytestmark = pytest.mark.django_db(transaction=True)


async def client_for(user) -> AsyncClient:
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    return client


async def wait_done(pk: int) -> Entry:
    for _ in range(200):
        entry = await Entry.objects.aget(pk=pk)
        if entry.status != "running":
            return entry
        await asyncio.sleep(0.05)
    raise AssertionError("still running")


async def test_search_without_javascript_redirects_to_a_refreshing_thread(owner, alinked, upstream):
    serve(upstream, Paced(answer_stream(words(40)), pause=0.02))
    client = await client_for(owner)
    response = await client.post(
        reverse("search:ask"),
        {"q": "plain form", "sources_set": "1", "sources": ["web"], "incognito_set": "1"},
    )
    assert response.status_code == 302
    entry = await Entry.objects.aget()
    assert response.url.startswith(reverse("search:thread", args=[entry.thread_id]))
    page = (await client.get(reverse("search:thread", args=[entry.thread_id]))).content.decode()
    # to the address without its #fragment: a refresh to the same one would only scroll
    refresh = (
        f'<meta http-equiv="refresh" content="3;url={reverse("search:thread", args=[entry.thread_id])}">'
    )
    assert refresh in page and "plain form" in page
    entry = await wait_done(entry.pk)
    assert entry.status == "completed" and not entry.options["incognito"]  # the form said so
    page = (await client.get(reverse("search:thread", args=[entry.thread_id]))).content.decode()
    assert 'http-equiv="refresh"' not in page and "word39" in page and "What next?" in page
    assert "Answered by" in page


async def test_an_invalid_form_is_shown_again_with_its_error(owner, alinked):
    client = await client_for(owner)
    response = await client.post(reverse("search:ask"), {"q": "x", "include_domains": "bad domain!"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "is not a domain" in page and '<details class="options" open>' in page  # opened to show it
    # Model and Mode sit in the box's row: a refused one says so there, and Options stays shut
    page = (await client.post(reverse("search:ask"), {"q": "x", "model": "no-such-model"})).content.decode()
    assert '<label class="invalid" title="Model">' in page and "Model: Select a valid choice" in page
    assert '<details class="options">' in page
    assert not await Entry.objects.aexists()


async def test_stop_without_javascript(owner, alinked, upstream):
    serve(upstream, Paced(answer_stream(words(300)), pause=0.02))
    client = await client_for(owner)
    await client.post(reverse("search:ask"), {"q": "long one"})
    entry = await Entry.objects.aget()
    await asyncio.sleep(0.3)
    response = await client.post(reverse("search:stop", args=[entry.pk]))
    assert response.status_code == 302
    entry = await wait_done(entry.pk)
    assert entry.status == "stopped" and entry.answer.startswith("word0")


async def test_a_server_shutdown_saves_the_partial_answer_as_interrupted(owner, alinked, upstream):
    serve(upstream, Paced(answer_stream(words(300)), pause=0.02))
    client = await client_for(owner)
    await client.post(reverse("search:ask"), {"q": "shutdown"})
    await asyncio.sleep(0.4)
    await runner.shutdown()
    entry = await Entry.objects.aget()
    assert (
        entry.status == "interrupted" and entry.answer.startswith("word0") and "server stopped" in entry.error
    )


@sync_to_async
def _stale_entries(owner):
    thread = Thread.objects.create(user=owner, title="t")
    dead = Entry.objects.create(
        thread=thread, question="dead", runner=f"{socket.gethostname()}:999999", answer="partial"
    )
    elsewhere = Entry.objects.create(thread=thread, question="other host", runner="otherhost:1")
    alive = Entry.objects.create(thread=thread, question="alive", runner=liveness.RUNNER)
    return dead, elsewhere, alive


async def test_runs_that_died_are_marked_interrupted(owner):
    dead, elsewhere, alive = await _stale_entries(owner)
    from django.utils import timezone

    await Entry.objects.filter(pk=elsewhere.pk).aupdate(heartbeat=timezone.now() - liveness.STALE_AFTER * 2)
    assert await sync_to_async(liveness.sweep_interrupted)() == 2
    assert (await Entry.objects.aget(pk=dead.pk)).status == "interrupted"
    assert (await Entry.objects.aget(pk=dead.pk)).answer == "partial"
    assert (await Entry.objects.aget(pk=elsewhere.pk)).status == "interrupted"
    assert (await Entry.objects.aget(pk=alive.pk)).status == "running"
    assert await sync_to_async(liveness.sweep_interrupted)(at_start=True) == 0  # our own process is alive


async def test_home_prefills_q_and_asks_only_through_the_socket(owner):
    client = await client_for(owner)
    response = await client.get(
        reverse("search:home"), {"q": "from the address bar"}, headers={"Sec-Fetch-Site": "none"}
    )
    page = response.content.decode()
    assert "from the address bar" in page and 'data-autoask="1"' in page
    assert not await Entry.objects.aexists()  # a GET never spends a search
    assert 'rel="search" type="application/opensearchdescription+xml"' in page


async def test_opensearch_description():
    response = await AsyncClient().get(reverse("search:opensearch"))
    assert response.status_code == 200
    assert b'template="http://testserver/?q={searchTerms}"' in response.content


async def test_another_persons_thread_and_stop_are_not_found(owner, member, alinked, upstream):
    serve(upstream, Paced(answer_stream(["x"])))
    await (await client_for(owner)).post(reverse("search:ask"), {"q": "mine"})
    entry = await Entry.objects.aget()
    alinked.shared = True  # the member can search (else that is what they are told first)
    await alinked.asave()
    other = await client_for(member)
    assert (await other.get(reverse("search:thread", args=[entry.thread_id]))).status_code == 404
    assert (await other.post(reverse("search:stop", args=[entry.pk]))).status_code == 404
    response = await other.post(reverse("search:ask"), {"q": "sneak", "thread": entry.thread_id})
    assert response.status_code == 404 or "not found" in response.content.decode().lower()
    await wait_done(entry.pk)


async def test_thread_page_renders_saved_entries_safely(owner):
    @sync_to_async
    def make():
        thread = Thread.objects.create(user=owner, title="t")
        return Entry.objects.create(
            thread=thread,
            question="<script>q</script>",
            status="completed",
            answer="**A** [1] <img src=x onerror=y>",
            sources=[{"title": "<b>S</b>", "url": "https://s.example", "snippet": "", "date": ""}],
            related=["<i>r</i>"],
        )

    entry = await make()
    page = (
        await (await client_for(owner)).get(reverse("search:thread", args=[entry.thread_id]))
    ).content.decode()
    assert "<strong>A</strong>" in page and 'href="https://s.example" class="cite"' in page
    assert (
        "<script>q" not in page and "<img" not in page and "<b>S</b>" not in page and "<i>r</i>" not in page
    )


def test_search_limits_refuse_with_a_sentence_and_spend_nothing_on_a_refusal(owner):
    from accounts.models import TokenBucket
    from pplxweb.perplexity.request import AskOptions

    def start(q: str) -> Entry:
        return asking.start_search(owner, q, AskOptions())

    first, second = start("one"), start("two")
    with pytest.raises(asking.SearchRefused, match="You have 2 searches running"):
        start("three")
    bucket = TokenBucket.objects.get()
    assert round(bucket.tokens) == asking.PER_MINUTE - 2  # the refused one took no token
    assert Entry.objects.count() == 2
    Entry.objects.filter(pk__in=[first.pk, second.pk]).update(status="completed")
    for n in range(asking.PER_MINUTE - 2):
        Entry.objects.update(status="completed")
        start(f"more {n}")
    Entry.objects.update(status="completed")
    with pytest.raises(asking.SearchRefused, match=f"That is {asking.PER_MINUTE} searches this minute"):
        start("one too many")
    assert Entry.objects.count() == asking.PER_MINUTE


async def test_the_search_page_lists_recent_conversations(owner, member):
    for i in range(10):
        await Thread.objects.acreate(user=owner, title=f"conversation {i}")
    await Thread.objects.acreate(user=member, title="not yours")
    await Thread.objects.filter(title="conversation 2").aupdate(updated=timezone.now() + timedelta(minutes=1))
    page = (await (await client_for(owner)).get(reverse("search:home"))).content.decode()
    listed = re.findall(r'<a href="/thread/\d+/">(conversation \d)</a>', page)
    assert listed == [
        "conversation 2",
        *(f"conversation {i}" for i in (9, 8, 7, 6, 5, 4, 3)),
    ]  # a follow-up moves it up
    assert "not yours" not in page
    theirs = (await (await client_for(member)).get(reverse("search:home"))).content.decode()
    assert "not yours" in theirs and "conversation 2" not in theirs
    await Thread.objects.filter(user=member).adelete()
    blank = (await (await client_for(member)).get(reverse("search:home"))).content.decode()
    assert "Recent conversations" not in blank


async def test_edit_and_ask_again_fills_the_box_with_the_question_and_its_options(owner, member):
    thread = await Thread.objects.acreate(user=owner, title="t")
    options = {"model": "pplx_pro", "mode": "research", "sources": ["scholar"], "recency": "",
               "after": "2026-01-02", "include_domains": ["nature.com"], "language": "de", "incognito": False}  # fmt: skip
    entry = await Entry.objects.acreate(
        thread=thread, question="Why is the sky blue?", status="completed", options=options
    )
    page = (await (await client_for(owner)).get(reverse("search:home"), {"again": entry.pk})).content.decode()
    assert "Why is the sky blue?</textarea>" in page and "data-autoask" not in page
    assert '<details class="options" open>' in page
    assert re.search(r'<option value="research" selected>', page)
    assert re.search(r'value="scholar"[^>]*checked', page) and 'value="2026-01-02"' in page
    assert 'value="nature.com"' in page and 'value="de"' in page
    assert "<legend>Sources</legend>" in page and 'for=""' not in page  # the checkboxes' group is named
    assert (
        'aria-describedby="id_include_domains_helptext"' in page
        and 'id="id_include_domains_helptext"' in page
    )
    assert not re.search(r'name="incognito"[^>]*checked', page)
    assert not await Entry.objects.exclude(pk=entry.pk).aexists()  # nothing asked yet
    other = await (await client_for(member)).get(reverse("search:home"), {"again": entry.pk})
    assert other.status_code == 404
    shown = (await (await client_for(owner)).get(reverse("search:thread", args=[thread.pk]))).content.decode()
    assert f'href="/?again={entry.pk}"' in shown


async def test_ask_again_with_malformed_saved_options_uses_defaults_for_what_is_malformed(
    owner, alinked, upstream
):
    """Saved options may come from an imported file: garbage there must not break Ask again."""
    thread = await Thread.objects.acreate(user=owner, title="t")
    options = {"mode": "bogus", "after": "yesterday", "before": 7, "sources": "web", "recency": ["x"],
               "include_domains": [1, "nature.com"], "language": "<script>", "incognito": "no", "model": "a b"}  # fmt: skip
    entry = await Entry.objects.acreate(thread=thread, question="Why?", status="completed", options=options)
    client = await client_for(owner)
    page = (await client.get(reverse("search:home"), {"again": entry.pk})).content.decode()
    assert "Why?</textarea>" in page and 'value="nature.com"' in page
    serve(upstream, Paced(answer_stream(["fine"])))
    response = await client.post(reverse("search:redo", args=[entry.pk]))
    assert response.status_code == 302
    again = await Entry.objects.exclude(pk=entry.pk).aget()
    assert again.thread_id == entry.thread_id and again.turn == entry.pk  # a version, in place
    assert (again.options["mode"], again.options["sources"], again.options["after"]) == ("pro", ["web"], None)
    assert (again.options["model"], again.options["language"], again.options["incognito"]) == (
        "pplx_pro",
        "en-US",
        True,
    )
    assert again.options["include_domains"] == ["nature.com"]
    await wait_done(again.pk)
