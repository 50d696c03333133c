"""The library job (search/library/) against the fake's library, in-process: import, sync, the
odd data of issue 22, refusals, cancel, resume, and each person their own."""

from __future__ import annotations

import json

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings
from django.utils import timezone

from accounts.models import PerplexityAccount
from pplxweb.perplexity import cookies as jar
from pplxweb.perplexity.client import PerplexityClient
from search.history.query import Filters, search
from search.library import jobs, runner
from search.models import Entry, LibraryJob, LibraryThread, Thread
from tests.fake_perplexity import app as fake
from tests.fake_perplexity import library as fake_library

pytestmark = pytest.mark.django_db(transaction=True)
BASE = "https://fake.perplexity.test"


@pytest.fixture(autouse=True)
def fresh_library():
    fake_library.lib.update(threads=[], faults={}, calls={})
    yield
    fake_library.lib.update(threads=[], faults={}, calls={})


@pytest.fixture
def linked(owner):
    return PerplexityAccount.objects.create(
        user=owner,
        email="fake@example.com",
        account_id="fake-account",
        session=json.dumps({"cookies": jar.with_session({}, fake.TOKEN)}),
        tier="pro",
    )


def factory(**kwargs) -> PerplexityClient:
    return PerplexityClient(
        BASE, BASE, transport=httpx.ASGITransport(app=fake.application), cookies=kwargs.get("cookies")
    )


def library(*specs: dict) -> None:
    base = fake_library.BASE_TIME
    fake_library.lib["threads"] = [
        fake_library._thread(s, n, base - fake_library.timedelta(minutes=n)) for n, s in enumerate(specs)
    ]


@override_settings(LIBRARY_PACE=0, PERPLEXITY_URL="http://fake.perplexity.test")
async def run(user, kind: str = "import") -> LibraryJob:
    job = await sync_to_async(jobs.start)(user, kind)
    await runner.launch(job.pk, factory)
    return await sync_to_async(LibraryJob.objects.get)(pk=job.pk)


@sync_to_async
def entries(user, **filters) -> list[Entry]:
    return list(Entry.objects.filter(user=user, **filters).order_by("created", "pk"))


async def test_import_pages_the_listing_and_every_thread_whole(owner, linked):
    fake_library.lib["threads"] = fake_library.generate(130, 3)
    fake_library.lib["threads"][5]["turns"] = [
        fake_library._turn({}, i, 5, fake_library.BASE_TIME) for i in range(25)
    ]
    job = await run(owner)
    assert job.state == "done", job.error
    assert (job.listed, job.fetched, job.skipped, job.failed) == (130, 130, 0, 0)
    assert job.new_entries == 129 * 3 + 25 and job.walked
    assert fake_library.lib["calls"] == {"list": 2, "thread": 130}
    got = await entries(owner)
    assert len(got) == 412 and all(e.origin == "perplexity" for e in got)
    first = got[0]
    assert first.backend_uuid and first.context_uuid and first.sources and first.related
    # Perplexity's moments, not the import's
    assert first.created.year == 2026 and first.created.month == 9
    thread = await sync_to_async(Thread.objects.get)(pk=first.thread_id)
    assert thread.read_write_token.startswith("rwt-") and thread.thread_url_slug.startswith("library-thread-")
    found = await sync_to_async(lambda: search(owner, Filters(text="fakelibraryword7x2")))()
    assert len(found) == 1


async def test_importing_twice_or_syncing_never_duplicates(owner, linked):
    fake_library.lib["threads"] = fake_library.generate(12, 2)
    await run(owner)
    again = await run(owner, "import")
    assert again.state == "done" and again.new_entries == 0 and again.unchanged == 12
    assert fake_library.lib["calls"]["thread"] == 12  # the second run fetched nothing
    assert len(await entries(owner)) == 24


async def test_sync_fetches_only_what_changed_and_keeps_deleted_threads(owner, linked):
    fake_library.lib["threads"] = fake_library.generate(20, 2)
    await run(owner)
    fake_library.lib["calls"] = {}
    deleted_slug = fake_library.ordered()[15]["slug"]
    fake_library.change({"touch": [3, 7], "rename": {"10": "A new name"}, "delete": [15], "add": 1})
    job = await run(owner, "sync")
    assert job.state == "done", job.error
    # 2 touched + 1 new fetched; 1 check that the missing one is gone; one listing page
    assert fake_library.lib["calls"] == {"list": 1, "thread": 4}
    assert (job.fetched, job.new_entries, job.deleted) == (3, 3, 1)
    assert await sync_to_async(Thread.objects.filter(user=owner, title="A new name").count)() == 1
    gone = await sync_to_async(LibraryThread.objects.get)(user=owner, slug=deleted_slug)
    assert gone.deleted and gone.thread_id  # kept here, marked
    assert len(await entries(owner)) == 40 + 3


async def test_odd_threads_are_imported_as_far_as_they_go(owner, linked):
    library(
        {"title": "empty", "turns": 0},
        {"title": "no answer", "turns": [{"shape": "none"}]},
        {"title": "text only", "turns": [{"shape": "text", "a": "From text."}]},
        {"title": "structured", "turns": [{"shape": "structured", "a": "From structure."}]},
        {"title": "no sources", "turns": [{"shape": "nosources", "a": "Bare."}]},
        {"title": "dirty", "turns": [{"a": "NUL\x00 and \ud800 lone", "q": "Q\x00?"}]},
        {"title": "huge", "turns": [{"size": 2_000_000}]},
        {"title": "long", "turns": 500},
        {"title": "deleted", "gone": "ENTRY_DELETED"},
        {"title": "expired", "gone": "ENTRY_EXPIRED"},
        {"title": "hidden", "gone": "VIEW_THREAD_NOT_ALLOWED"},
        {"title": "report", "turns": [{"report": "# The report\n\nDeep findings here."}]},
    )
    job = await run(owner)
    assert job.state == "done", job.error
    assert (job.listed, job.fetched, job.skipped, job.failed) == (12, 8, 4, 0)
    reasons = {n["title"]: n["reason"] for n in job.notes}
    assert reasons["empty"] == "It has no questions in it."
    assert "deleted on Perplexity" in reasons["deleted"] and "expired" in reasons["expired"]
    assert "not viewable" in reasons["hidden"]
    by_title = {}
    for entry in await entries(owner):
        title = await sync_to_async(lambda e=entry: e.thread.title)()
        by_title.setdefault(title, []).append(entry)
    assert by_title["no answer"][0].status == "failed" and "kept no answer" in by_title["no answer"][0].error
    assert by_title["text only"][0].answer == "From text." and by_title["text only"][0].sources
    assert by_title["structured"][0].answer == "From structure."
    assert by_title["no sources"][0].answer == "Bare." and by_title["no sources"][0].sources == []
    dirty = by_title["dirty"][0]
    assert "\x00" not in dirty.answer + dirty.question and "\ud800" not in dirty.answer
    huge = by_title["huge"][0].answer  # 2 MB upstream (the fake's pages hold it three times)
    assert len(huge) > 2_000_000 and "left out" not in huge
    assert len(by_title["long"]) == 500
    assert by_title["report"][0].report == "# The report\n\nDeep findings here."


async def test_an_empty_first_page_is_not_an_empty_library(owner, linked):
    fake_library.lib["threads"] = fake_library.generate(3, 1)
    await run(owner)
    fake_library.lib["faults"] = {"empty": True}
    job = await run(owner, "sync")
    assert job.state == "stopped" and "listed no threads, although 3 were imported" in job.error
    assert not await sync_to_async(LibraryThread.objects.filter(deleted=True).exists)()
    assert fake_library.lib["calls"]["list"] == 1 + 3  # the import's page, then three tries


async def test_a_first_import_of_an_empty_listing_says_so(owner, linked):
    fake_library.lib["faults"] = {"empty": True}
    job = await run(owner)
    assert job.state == "done" and job.listed == 0
    assert "listed no threads for this account (3 times" in job.notes[0]["reason"]


async def test_a_session_without_an_account_is_said_before_listing(owner, linked):
    fake_library.lib["faults"] = {"no_account": True}
    job = await run(owner)
    assert job.state == "stopped" and "names no account" in job.error
    assert "list" not in fake_library.lib["calls"]


@pytest.mark.parametrize(
    ("fault", "words", "status"),
    [
        ("unauthorized", "did not accept the linked session", "needs_attention"),
        ("challenge", "Cloudflare", "blocked"),
    ],
)
async def test_refused_session_or_cloudflare_stops_with_a_sentence(owner, linked, fault, words, status):
    fake_library.lib["threads"] = fake_library.generate(4, 1)
    fake_library.lib["faults"] = {fault: True}
    job = await run(owner)
    assert job.state == "stopped" and words in job.error and "kept" in job.error
    account = await sync_to_async(PerplexityAccount.objects.get)(pk=linked.pk)
    assert account.status == status


async def test_429_waits_for_retry_after_and_goes_on(owner, linked):
    fake_library.lib["threads"] = fake_library.generate(3, 1)
    fake_library.lib["faults"] = {"rate_every": 3, "retry_after": 1}
    job = await run(owner)
    assert job.state == "done" and job.fetched == 3
    assert job.requests > sum(fake_library.lib["calls"].values()) - 1  # the refused ones counted too


async def test_repeating_or_endless_listings_end_with_a_sentence(owner, linked):
    fake_library.lib["threads"] = fake_library.generate(250, 1)
    fake_library.lib["faults"] = {"repeat": True}
    job = await run(owner)
    assert job.state == "done" and job.listed == 250 and job.fetched == 250
    fake_library.lib["threads"] = fake_library.generate(150, 1)
    fake_library.lib["faults"] = {"endless": True}
    job = await run(owner, "sync")
    assert job.state == "done" and not job.walked
    assert any("repeated itself" in n["reason"] for n in job.notes)


async def test_a_slug_that_changes_keeps_one_conversation(owner, linked):
    fake_library.lib["threads"] = fake_library.generate(2, 1)
    await run(owner)
    fake_library.change({"slug": {"0": "renamed-slug"}, "touch": [0]})
    job = await run(owner, "sync")
    assert job.fetched == 1 and job.new_entries == 1
    assert await sync_to_async(Thread.objects.filter(user=owner).count)() == 2
    assert await sync_to_async(Thread.objects.filter(thread_url_slug="renamed-slug").count)() == 1


async def test_cancel_mid_thread_keeps_the_pages_saved_and_the_next_run_goes_on(owner, linked):
    fake_library.lib["threads"] = fake_library.generate(3, 250)  # 3 pages a thread
    calls = {"n": 0}
    real = runner.thread_page

    async def counting(client, slug, *args):
        calls["n"] += 1
        if calls["n"] == 5:  # the second page of the second thread
            await sync_to_async(jobs.cancel)(owner)
        return await real(client, slug, *args)

    runner.thread_page = counting
    try:
        job = await run(owner)
    finally:
        runner.thread_page = real
    assert job.state == "cancelled" and job.fetched == 1
    # the first thread whole, and the pages of the second read before Cancel took effect (each
    # page is saved as it comes; the cancel is heeded before the next request)
    assert len(await entries(owner)) == 450
    second = await sync_to_async(LibraryThread.objects.get)(
        user=owner, slug=fake_library.ordered()[1]["slug"]
    )
    assert second.state == "pending" and second.thread_id
    again = await run(owner)
    assert again.state == "done" and again.new_entries == 300
    got = await entries(owner)
    assert len(got) == 750 and len({e.backend_uuid for e in got}) == 750


async def test_resume_after_a_restart_goes_on_where_it_stopped(owner, linked):
    fake_library.lib["threads"] = fake_library.generate(6, 1)
    job = await sync_to_async(jobs.start)(owner)
    # a process elsewhere that listed and fetched two, then died (its heartbeat is fresh, so a
    # keeper of another server sharing this database leaves it to this test)
    await sync_to_async(LibraryJob.objects.filter(pk=job.pk).update)(
        runner="elsewhere:1", heartbeat=timezone.now()
    )
    with override_settings(LIBRARY_PACE=0):
        run_ = runner.JobRun(await sync_to_async(jobs.reload)(job.pk), factory)
        run_.client = factory(cookies=jar.with_session({}, fake.TOKEN))
        run_.shared = False
        await run_.request(runner.library_account)
        await run_.listing(await sync_to_async(jobs.reload)(job.pk))
        for _ in range(2):
            await run_.fetch(await sync_to_async(jobs.next_pending)(owner.pk))
    fake_library.lib["calls"] = {}
    assert await sync_to_async(jobs.claim)(job.pk, "elsewhere:1")  # as the keeper does (test_library_pages)
    with override_settings(LIBRARY_PACE=0):
        await runner.launch(job.pk, factory)
    done = await sync_to_async(LibraryJob.objects.get)(pk=job.pk)
    assert done.state == "done" and done.fetched == 6
    assert fake_library.lib["calls"] == {"thread": 4}  # no listing again, only the four left
    assert len(await entries(owner)) == 6


async def test_one_job_at_a_time_and_only_for_ones_own_link(owner, member, linked):
    await sync_to_async(PerplexityAccount.objects.filter(pk=linked.pk).update)(shared=True)
    with pytest.raises(jobs.JobRefused, match="Link your own"):
        await sync_to_async(jobs.start)(member)
    await sync_to_async(jobs.start)(owner)
    with pytest.raises(jobs.JobRefused, match="already running"):
        await sync_to_async(jobs.start)(owner)


async def test_the_job_waits_for_a_running_search(owner, linked):
    fake_library.lib["threads"] = fake_library.generate(1, 1)
    thread = await sync_to_async(Thread.objects.create)(user=owner, title="asking")
    entry = await sync_to_async(Entry.objects.create)(
        thread=thread, user=owner, question="q", status="running"
    )
    job = await sync_to_async(jobs.start)(owner)
    import asyncio

    with override_settings(LIBRARY_PACE=0):
        task = runner.launch(job.pk, factory)
        await asyncio.sleep(1.5)
        assert fake_library.lib["calls"] == {}  # nothing upstream while the search runs
        await sync_to_async(Entry.objects.filter(pk=entry.pk).update)(status="completed")
        await task
    assert (await sync_to_async(LibraryJob.objects.get)(pk=job.pk)).fetched == 1


async def test_a_cursor_that_does_not_move_fails_the_thread_not_the_job(owner, linked):
    fake_library.lib["threads"] = fake_library.generate(2, 3)
    fake_library.lib["faults"] = {"stuck_cursor": True}
    job = await run(owner)
    assert job.state == "done" and job.failed == 2 and job.fetched == 0
    assert "did not move on" in job.notes[0]["reason"]
    # what was read is kept, and said
    assert "3 of its turns were imported; the next sync tries the rest" in job.notes[0]["reason"]
    assert len(await entries(owner)) == 6
    assert fake_library.lib["calls"]["thread"] == 4  # two pages each, then it stopped


async def test_a_turn_in_two_threads_is_stored_once(owner, linked):
    library(
        {"title": "first", "turns": [{"uuid": "shared-turn"}, {}]},
        {"title": "second", "turns": [{"uuid": "shared-turn"}]},
    )
    job = await run(owner)
    assert job.state == "done" and job.new_entries == 2 and job.failed == 0
    assert job.skipped == 1 and "all here already" in job.notes[0]["reason"]
    got = await entries(owner)
    assert sorted(e.backend_uuid for e in got).count("shared-turn") == 1


async def test_unlinking_stops_the_job_and_its_cookies_are_not_written_back(owner, linked):
    from accounts.services import unlink

    fake_library.lib["threads"] = fake_library.generate(5, 1)
    real = runner.thread_page

    async def unlinking(client, slug, *args):
        await sync_to_async(unlink)(owner)
        return await real(client, slug, *args)

    runner.thread_page = unlinking
    try:
        job = await run(owner)
    finally:
        runner.thread_page = real
    assert job.state == "stopped" and "unlinked" in job.error and job.fetched == 1
    account = await sync_to_async(PerplexityAccount.objects.get)(pk=linked.pk)
    assert not account.session  # the job did not bring the session back
