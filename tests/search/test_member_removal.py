"""Removing a household member while things of theirs are going: an answer still arriving, their
Perplexity library import, an import of a history file. Each ends sensibly and leaves nothing
half-written, whether their history is kept for the owner or deleted."""

from __future__ import annotations

import asyncio
import io
import json
import threading

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.test import override_settings

from accounts.models import PerplexityAccount
from pplxweb.perplexity import cookies as jar
from search.history import export, import_jobs, imports
from search.library import jobs, store
from search.library import runner as library_runner
from search.live import runner
from search.members import remove_member
from search.models import Entry, ImportJob, LibraryJob, LibraryThread, Thread
from tests.fake_perplexity import app as fake
from tests.search.conftest import TOKEN, Paced, answer_stream, serve, words
from tests.search.test_consumer import connect, receive_until
from tests.search.test_library_job import factory, fresh_library, library  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db(transaction=True)


def linked(user, token: str = TOKEN) -> PerplexityAccount:
    return PerplexityAccount.objects.create(
        user=user,
        email=f"{user.get_username()}@example.com",
        account_id="fake-account",
        session=json.dumps({"cookies": {"__Secure-next-auth.session-token": token}}),
        tier="pro",
    )


def removed_elsewhere(owner, member, keep: bool) -> None:
    """The owner's removal, from another thread with its own connection (as another request)."""
    worker = threading.Thread(
        target=lambda: (remove_member(owner, member.pk, keep_history=keep), connections.close_all())
    )
    worker.start()
    worker.join(20)


async def settled(entry_id: int) -> Entry | None:
    async with asyncio.timeout(10):
        while entry_id in runner.RUNS:
            await asyncio.sleep(0.02)
    return await Entry.objects.filter(pk=entry_id).select_related("thread").afirst()


@pytest.mark.parametrize("keep", [True, False], ids=["kept", "deleted"])
async def test_an_answer_still_arriving_stops_and_perplexity_is_told(owner, member, upstream, keep):
    await sync_to_async(linked)(member)
    serve(upstream, Paced(answer_stream(words(300)), pause=0.02))
    terminate = upstream.post("/rest/sse/perplexity_terminate").respond(json={"status": "completed"})
    comm = await connect(member)
    await comm.send_to(text_data=json.dumps({"q": "a long answer"}))
    await receive_until(comm, "word5")
    entry = await Entry.objects.aget()
    await sync_to_async(remove_member)(owner, member.pk, keep_history=keep)
    ended = await settled(entry.pk)
    await comm.disconnect()
    if keep:
        assert ended.status == "stopped" and ended.user_id == owner.pk and ended.thread.kept_from == "member"
        assert "word5" in ended.answer and "word299" not in ended.answer  # what arrived, kept
    else:
        assert ended is None and not await Thread.objects.aexists()
    async with asyncio.timeout(5):
        while not terminate.called:
            await asyncio.sleep(0.02)  # Perplexity stops too (no more of the member's searches spent)


@override_settings(LIBRARY_PACE=0, PERPLEXITY_URL="http://fake.perplexity.test")
async def importing(user) -> None:
    job = await sync_to_async(jobs.start)(user, "import")
    await library_runner.launch(job.pk, factory)


@pytest.mark.parametrize("keep", [True, False], ids=["kept", "deleted"])
async def test_their_library_import_stops_and_keeps_only_whole_conversations(
    owner, member, monkeypatch, caplog, keep
):
    await sync_to_async(PerplexityAccount.objects.create)(
        user=member,
        email="member@example.com",
        account_id="fake-account",
        session=json.dumps({"cookies": jar.with_session({}, fake.TOKEN)}),
        tier="pro",
    )
    library(*({"turns": 3} for _ in range(6)))
    save = store.save_page  # (a thread of three turns is one page)
    saved = []

    def save_then_remove(row_id, turns, reports):
        if len(saved) == 3:  # the fourth thread was fetched whole when the owner removes its person
            removed_elsewhere(owner, member, keep)
        result = save(row_id, turns, reports)
        saved.append(result)
        return result

    monkeypatch.setattr(store, "save_page", save_then_remove)
    with caplog.at_level("ERROR"):
        await importing(member)  # the job ends by itself, quietly
    assert not caplog.records
    assert len(saved) == 3
    kept = await sync_to_async(lambda: [t.entries.count() for t in Thread.objects.all()])()
    if keep:
        assert kept == [3, 3, 3]  # three whole conversations, none in part
        assert not await Thread.objects.exclude(user=owner).aexists()
    else:
        assert kept == []
    assert not await LibraryJob.objects.aexists() and not await LibraryThread.objects.aexists()


@pytest.mark.parametrize("keep", [True, False], ids=["kept", "deleted"])
def test_their_file_import_is_removed_whole(owner, member, monkeypatch, keep):
    Entry.objects.create(
        thread=Thread.objects.create(user=member, title="before"), question="asked before", status="completed"
    )
    for n in range(4):
        Entry.objects.create(
            thread=Thread.objects.create(user=owner, title=f"t{n}"),
            question=f"exported {n}",
            status="completed",
        )
    raw = b"".join(export.history_zip(owner))
    Thread.objects.filter(user=owner).delete()
    monkeypatch.setattr(imports, "WRITE_BATCH", 1)
    beat = import_jobs.beat

    def beat_then_remove(job, imported, skipped):
        beat(job, imported, skipped)
        if imported == 2:  # two of four conversations in, the owner removes the importer
            removed_elsewhere(owner, member, keep)

    monkeypatch.setattr(import_jobs, "beat", beat_then_remove)
    with pytest.raises(imports.ImportRefused, match="removed from this pplxweb while the file was imported"):
        imports.import_history(member, io.BytesIO(raw))
    left = sorted(Entry.objects.values_list("question", flat=True))
    assert left == (["asked before"] if keep else [])  # nothing of the import, in either case
    assert not ImportJob.objects.exists()


def test_a_removal_with_nothing_going_touches_nobody_else(owner, member, django_user_model):
    other = django_user_model.objects.create_user(username="other", password="x" * 12)
    theirs = Entry.objects.create(
        thread=Thread.objects.create(user=other, title="others"), question="q", status="running"
    )
    remove_member(owner, member.pk, keep_history=True)
    theirs.refresh_from_db()
    assert theirs.status == "running" and theirs.user_id == other.pk
