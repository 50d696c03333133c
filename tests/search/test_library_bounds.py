"""The library import is bounded and one bad thread never stops it: listed fields are cleaned as
every upstream text is (search.saving), a thread whose id cannot be stored is left out with a
note and the rest imported, and a long thread is saved a page at a time, never held whole."""

from __future__ import annotations

import gc
import tracemalloc

import pytest
from asgiref.sync import sync_to_async

from accounts.models import StorageQuota
from search import storage
from search.library import jobs, runner
from search.models import LibraryThread, Thread
from tests.fake_perplexity import library as fake_library
from tests.search.test_library_job import entries, fresh_library, library, linked, run  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


async def test_nul_and_lone_surrogates_in_listed_threads_never_stop_the_import(owner, linked):  # noqa: F811
    library(
        {"title": "NUL\x00 in the title", "turns": [{"uuid": "turn-with-\x00-in-its-id"}]},
        {"title": "lone \ud800 surrogate in the title"},
        {"title": "NUL in the address", "slug": "slug-\x00-nul"},
        {"title": "broken id", "context_uuid": "ctx-\udfff"},
        {"title": "fine"},
    )
    job = await run(owner)
    assert job.state == "done", job.error
    assert (job.fetched, job.skipped, job.failed) == (3, 2, 0)
    left_out = {n["title"]: n["reason"] for n in job.notes}
    assert set(left_out) == {"NUL in the address", "broken id"}
    assert all(reason == jobs.UNSTORABLE for reason in left_out.values())
    titles = set(await sync_to_async(lambda: list(Thread.objects.values_list("title", flat=True)))())
    assert titles == {"NUL in the title", "lone ? surrogate in the title", "fine"}
    uuids = {e.backend_uuid for e in await entries(owner)}
    assert "turn-with--in-its-id" in uuids
    # and again, as every daily sync would: nothing stops, nothing is written twice
    fake_library.change({"touch": [0]})
    again = await run(owner, "sync")
    assert again.state == "done" and again.skipped == 2 and again.failed == 0
    assert len(await entries(owner)) == 4
    rows = await sync_to_async(lambda: list(LibraryThread.objects.values_list("title", flat=True)))()
    assert all("\x00" not in title and "\ud800" not in title for title in rows)


async def test_a_long_thread_is_saved_a_page_at_a_time(owner, linked):  # noqa: F811
    """A thread of 25 pages of 100 turns of 8 KB answers (each page 2.4 MB of JSON, 60 MB in
    all) costs the import about what a thread of one such page costs, not 25 times that."""

    real = runner.thread_page

    async def collected(*args):  # what is alive, not what waits for the collector (the fake's too)
        gc.collect()
        return await real(*args)

    async def peak_importing() -> int:
        runner.thread_page = collected
        tracemalloc.start()
        try:
            job = await run(owner, "sync")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            runner.thread_page = real
        assert job.state == "done" and job.failed == 0, job.error
        return peak

    library({"title": "one page", "turns": [{"size": 8000}] * 100})
    one_page = await peak_importing()
    fake_library.lib["threads"].append(
        fake_library._thread({"title": "long", "turns": [{"size": 8000}] * 2500}, 1, fake_library.BASE_TIME)
    )
    fake_library.lib["calls"] = {}
    long = await peak_importing()
    assert fake_library.lib["calls"]["thread"] == 25
    assert len(await entries(owner)) == 2600
    assert long < one_page * 1.5, (long, one_page)  # the thread's answers alone are 20 MB


async def test_a_library_import_stops_when_the_quota_is_full_and_goes_on_when_there_is_room(owner, linked):  # noqa: F811
    fake_library.lib["threads"] = fake_library.generate(3, 2)
    quota = await sync_to_async(StorageQuota.objects.create)(user=owner, megabytes=0)
    job = await run(owner)
    assert (
        job.state == "stopped" and "would pass your storage quota: you keep 0 bytes of 0 bytes" in job.error
    )
    assert "What was imported so far is kept" in job.error and await entries(owner) == []
    quota.megabytes = 10
    await sync_to_async(quota.save)()
    job = await run(owner)
    assert job.state == "done" and job.new_entries == 6
    assert (await sync_to_async(storage.usage)(owner.pk)).imported > 0


async def test_a_thread_longer_than_the_cap_keeps_its_first_pages_with_a_note(owner, linked, monkeypatch):  # noqa: F811
    monkeypatch.setattr(runner, "MAX_TURNS", 150)  # read by pages of 100: two pages, then the note
    library({"title": "endless", "turns": [{}] * 250}, {"title": "short"})
    job = await run(owner)
    assert job.state == "done" and job.failed == 0, job.error
    assert len(await entries(owner)) == 201  # the long thread's first two pages, and the short one
    notes = {n["title"]: n["reason"] for n in job.notes}
    assert notes == {"endless": "It is longer than 150 turns; only its first 200 were imported."}


async def test_a_listing_longer_than_the_cap_is_read_up_to_it_with_a_note(owner, linked, monkeypatch):  # noqa: F811
    monkeypatch.setattr(runner, "MAX_LISTED", 100)  # one listing page of 100, then the note
    fake_library.lib["threads"] = fake_library.generate(130, 1)
    job = await run(owner)
    assert job.state == "done" and job.failed == 0, job.error
    assert job.fetched == 100 and len(await entries(owner)) == 100
    notes = {n["title"]: n["reason"] for n in job.notes}
    assert notes == {
        "The listing": "The listing did not end after 100 threads; pplxweb stopped reading it there."
    }
