"""The library's Settings section, its buttons and socket, each person's own library, the keeper,
and the new-conversation offer for a refused follow-up."""

from __future__ import annotations

import json
from datetime import time, timedelta

import pytest
from channels.testing import WebsocketCommunicator
from django.utils import timezone

from accounts.models import PerplexityAccount
from pplxweb.asgi import application
from search.library import jobs
from search.models import RUNNER, Entry, LibraryJob, LibrarySchedule, LibraryThread, Thread
from tests.conftest import session_cookie_for

ORIGIN = (b"origin", b"http://localhost")
HOST = (b"host", b"localhost")  # the socket is accepted only from the page's own origin


def link(user, shared: bool = False) -> PerplexityAccount:
    return PerplexityAccount.objects.create(
        user=user,
        email=f"{user.username}@example.com",
        session=json.dumps({"cookies": {"s": "x"}}),
        shared=shared,
    )


@pytest.mark.django_db
def test_settings_offers_the_import_and_starts_a_job(owner_client, owner):
    link(owner)
    page = owner_client.get("/settings/")
    assert (
        b"Import my Perplexity library" in page.content and b'ws-connect="/ws/library/?build=' in page.content
    )
    response = owner_client.post("/library/start/", {"kind": "import"})
    assert response.status_code == 302 and response["Location"].endswith("#library")
    job = LibraryJob.objects.get(user=owner)
    assert job.running and job.kind == "import" and job.runner == RUNNER  # no keeper here: this process's
    page = owner_client.get("/settings/")
    assert b'id="library-progress"' in page.content and b">Cancel</button>" in page.content
    owner_client.post("/library/cancel/")
    assert LibraryJob.objects.get(pk=job.pk).cancel_requested


@pytest.mark.django_db
def test_a_member_on_the_shared_link_cannot_import_the_owners_library(member_client, owner, member):
    link(owner, shared=True)
    page = member_client.get("/settings/")
    assert b"Link your own Perplexity account above" in page.content
    assert b"Import my Perplexity library" not in page.content
    response = member_client.post("/library/start/", {"kind": "import"}, follow=True)
    assert b"Link your own Perplexity account first" in response.content
    assert not LibraryJob.objects.exists()


@pytest.mark.django_db
def test_nothing_of_one_library_is_seen_by_another(client, owner, member):
    link(owner)
    thread = Thread.objects.create(user=owner, title="Owner's imported thread")
    Entry.objects.create(
        thread=thread, user=owner, question="secret q", answer="a", origin="perplexity", status="completed"
    )
    LibraryThread.objects.create(user=owner, key="k", slug="s", thread=thread, state="done", title="t")
    LibraryJob.objects.create(user=owner, state="done", listed=7, fetched=7)
    client.force_login(member)
    assert client.get(f"/thread/{thread.pk}/").status_code == 404
    page = client.get("/settings/")
    assert b"7 threads listed" not in page.content
    assert b"secret q" not in client.get("/history/").content
    assert not jobs.cancel(member)  # the owner's job is not theirs to cancel


@pytest.mark.django_db
def test_the_schedule_is_saved_and_checked(owner_client, owner):
    link(owner)
    owner_client.post("/library/schedule/", {"enabled": "on", "at": "04:30"})
    schedule = LibrarySchedule.objects.get(user=owner)
    assert schedule.enabled and schedule.at == time(4, 30)
    response = owner_client.post("/library/schedule/", {"enabled": "on", "at": "25:99"}, follow=True)
    assert b"not a time of day" in response.content
    assert LibrarySchedule.objects.get(user=owner).at == time(4, 30)


@pytest.mark.django_db
def test_a_due_sync_starts_once_a_day_and_only_after_an_import(owner):
    link(owner)
    LibrarySchedule.objects.create(user=owner, enabled=True, at=time(0, 0))
    assert jobs.due_syncs() == 0  # nothing imported yet: the first import is the person's choice
    LibrarySchedule.objects.update(last_run=None)
    LibraryThread.objects.create(user=owner, key="k", slug="s", state="done")
    assert jobs.due_syncs() == 1
    job = LibraryJob.objects.get(user=owner)
    assert job.kind == "sync" and job.automatic
    assert jobs.due_syncs() == 0  # today's has run


@pytest.mark.django_db
def test_the_keeper_claims_new_and_orphaned_jobs_but_not_live_ones(owner, member):
    new = LibraryJob.objects.create(user=owner, runner="")
    dead = LibraryJob.objects.create(
        user=member, runner="otherhost:1", heartbeat=timezone.now() - timedelta(minutes=5)
    )
    alive = LibraryJob.objects.create(user=member, runner="otherhost:2", heartbeat=timezone.now())
    assert sorted(jobs.orphans(set())) == sorted([new.pk, dead.pk])
    assert LibraryJob.objects.get(pk=new.pk).runner == RUNNER
    assert LibraryJob.objects.get(pk=alive.pk).runner == "otherhost:2"
    assert jobs.orphans({new.pk, dead.pk}) == []  # running here already


@pytest.mark.django_db(transaction=True)
async def test_a_started_import_wakes_the_keeper_which_otherwise_looks_rarely(
    owner_client, owner, settings, monkeypatch
):
    """The keeper looks for jobs every POLL seconds (an idle server does not ask its database
    every second); an import started here wakes it, so the job starts at once."""
    import asyncio

    from asgiref.sync import sync_to_async

    from search.library import keeper, runner

    settings.LIBRARY_KEEPER = True
    monkeypatch.setattr(keeper, "POLL", 60.0)
    looks, launched = [], []
    orphans = jobs.orphans
    monkeypatch.setattr(jobs, "orphans", lambda here: looks.append(1) or orphans(here))
    monkeypatch.setattr(runner, "launch", launched.append)
    await sync_to_async(link)(owner)
    keeper.ensure_started()
    try:
        async with asyncio.timeout(5):
            while not looks:
                await asyncio.sleep(0.02)
        await asyncio.sleep(0.5)
        assert len(looks) == 1  # nothing more until POLL
        response = await sync_to_async(owner_client.post)("/library/start/", {"kind": "import"})
        assert response.status_code == 302
        async with asyncio.timeout(2):
            while not launched:
                await asyncio.sleep(0.02)
        job = await LibraryJob.objects.aget(user=owner)
        assert launched == [job.pk] and job.runner == RUNNER and len(looks) == 2
    finally:
        task, _ = keeper._keepers.pop(asyncio.get_running_loop())
        task.cancel()


@pytest.mark.django_db(transaction=True)
async def test_the_socket_sends_the_section_with_this_browsers_csrf_token(owner):
    from asgiref.sync import sync_to_async

    await sync_to_async(link)(owner)
    cookie = await session_cookie_for(owner)
    token = "a" * 32
    comm = WebsocketCommunicator(
        application,
        "/ws/library/",
        headers=[ORIGIN, HOST, (b"cookie", f"{cookie}; pplxweb_csrftoken={token}".encode())],
    )
    connected, _ = await comm.connect()
    assert connected
    html = await comm.receive_from()
    assert 'id="library"' in html and 'hx-swap-oob="true"' in html
    assert f'value="{token}"' in html and "__library_csrf__" not in html
    await comm.disconnect()
    anonymous = WebsocketCommunicator(application, "/ws/library/", headers=[ORIGIN, HOST])
    connected, _ = await anonymous.connect()
    assert not connected
    await anonymous.disconnect()


@pytest.mark.django_db
def test_a_follow_up_refused_before_is_asked_again_in_place(owner_client, owner):
    """An answer saved failed because Perplexity no longer had its thread (before pplxweb carried
    such follow-ups into a new thread itself) offers Ask again in its conversation, which now
    carries it (search/live/upstream.py), not a new conversation."""
    thread = Thread.objects.create(user=owner, title="t")
    Entry.objects.create(
        thread=thread, user=owner, question="What is X?", backend_uuid="b1", status="completed"
    )
    refused = Entry.objects.create(
        thread=thread, user=owner, question="And Y?", status="failed",
        error="Perplexity no longer has this conversation: it is deleted on Perplexity.",
    )  # fmt: skip
    page = owner_client.get(f"/thread/{thread.pk}/").content.decode()
    assert f'action="/entry/{refused.pk}/redo/"' in page and "?carry=" not in page


@pytest.mark.django_db
def test_an_imported_answer_is_exported_and_imported_back_with_its_mark(owner, member):
    from search.history import export, imports

    thread = Thread.objects.create(user=owner, title="From the library")
    Entry.objects.create(
        thread=thread, user=owner, question="Imported q", answer="Imported a", origin="perplexity",
        backend_uuid="up-1", status="completed",
    )  # fmt: skip
    data = json.dumps(export.thread_json(thread)).encode()
    assert imports.import_history(member, data) == (1, 0)
    copy = Entry.objects.get(user=member)
    assert copy.origin == "perplexity" and copy.backend_uuid == "up-1"
