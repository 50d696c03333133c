"""A run lost by a restart or a killed process goes on from Perplexity's side (docs/protocol.md §9.1):
the watcher claims its row and rejoins it; a run Perplexity no longer has ends interrupted with
its partial answer kept."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from search.live import liveness, runner
from search.models import Entry, Thread
from tests.perplexity.test_client import whole
from tests.search.conftest import SSE, answer_stream, sse

pytestmark = pytest.mark.django_db(transaction=True)
DEAD = f"{socket.gethostname()}:999999"  # a process of this machine that is gone


@sync_to_async
def lost_entry(owner, backend_uuid="b-1", credential="session", answer="Hello wor"):
    thread = Thread.objects.create(user=owner, title="lost")
    return Entry.objects.create(
        thread=thread, question="lost", runner=DEAD, backend_uuid=backend_uuid, credential=credential,
        answer=answer, sources=[{"title": "Source 1", "url": "https://s1.example/page", "snippet": "", "date": ""}],
    )  # fmt: skip


async def wait_done(pk: int) -> Entry:
    async with asyncio.timeout(10):
        while (entry := await Entry.objects.aget(pk=pk)).status == "running":
            await asyncio.sleep(0.05)
    return entry


async def test_a_lost_run_is_claimed_and_rejoined_to_its_end(owner, alinked, upstream):
    events = answer_stream(["Hello ", "wor", "ld"])
    upstream.routes["rejoin"].respond(headers=SSE, content=sse([whole(events, 4), *events[4:]]))
    entry = await lost_entry(owner)
    swept, claimed = await sync_to_async(liveness.beat_and_sweep)(set())
    assert swept == 0 and [e.pk for e, _ in claimed] == [entry.pk]
    assert (await Entry.objects.aget(pk=entry.pk)).runner == liveness.RUNNER  # claimed by this process
    for lost, request in claimed:
        runner.rejoin_lost(lost, request)
    done = await wait_done(entry.pk)
    assert done.status == "completed" and done.answer == "Hello world"
    # claimed once: a second sweep finds nothing to rejoin
    assert (await sync_to_async(liveness.beat_and_sweep)(set()))[1] == []


async def test_a_run_perplexity_no_longer_has_ends_interrupted_with_its_partial_answer(
    owner, alinked, upstream
):
    upstream.routes["rejoin"].respond(403, json={})
    entry = await lost_entry(owner)
    _, claimed = await sync_to_async(liveness.beat_and_sweep)(set())
    runner.rejoin_lost(*claimed[0])
    done = await wait_done(entry.pk)
    assert done.status == "interrupted" and "no longer has this answer's run" in done.error
    assert done.answer == "Hello wor" and done.sources[0]["url"] == "https://s1.example/page"


async def test_rows_without_an_upstream_run_or_on_an_api_key_are_swept_not_rejoined(owner):
    plain = await lost_entry(owner, backend_uuid="")
    keyed = await lost_entry(owner, credential="api_key")
    swept, claimed = await sync_to_async(liveness.beat_and_sweep)(set())
    assert swept == 2 and claimed == []
    for pk in (plain.pk, keyed.pk):
        assert (await Entry.objects.aget(pk=pk)).status == "interrupted"


async def test_at_start_a_rejoinable_row_is_left_for_the_watcher(owner):
    entry = await lost_entry(owner)
    assert await sync_to_async(liveness.sweep_interrupted)(at_start=True) == 0
    left = await Entry.objects.aget(pk=entry.pk)
    assert left.status == "running" and left.runner == ""
    claimed = await sync_to_async(liveness.claim_lost)(set())
    assert [e.pk for e, _ in claimed] == [entry.pk]


def test_a_killed_process_nobody_has_reaped_yet_counts_as_gone():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        for _ in range(1000):  # its end, not yet reaped: a zombie (a bound, not a figure)
            if Path(f"/proc/{child.pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
                break
            time.sleep(0.01)
        assert not liveness.pid_alive(child.pid)
    finally:
        child.wait()
    assert liveness.pid_alive(os.getpid())


async def test_the_watcher_keeps_watching_another_processs_running_row_until_it_is_found_dead(
    owner, monkeypatch
):
    entry = await lost_entry(owner, backend_uuid="")  # not rejoinable: swept once found dead
    await Entry.objects.filter(pk=entry.pk).aupdate(heartbeat=timezone.now())  # fresh: not stale
    alive_for = [2]  # the other process is still there at the first two ticks

    def pid_alive(pid):
        alive_for[0] -= 1
        return alive_for[0] >= 0

    monkeypatch.setattr(liveness, "pid_alive", pid_alive)
    monkeypatch.setattr(liveness, "TICK", 0.01)
    monkeypatch.setattr(liveness, "sockets", 0)  # this process's open sockets: none here
    await asyncio.wait_for(liveness._watch({}, lambda *_: None), 30)  # a bound, not a figure
    assert (await Entry.objects.aget(pk=entry.pk)).status == "interrupted"
