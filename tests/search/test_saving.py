"""Saving never sticks a run: upstream strings are cleaned and fitted before saving, a final save
that still fails saves the entry failed, and a row whose run is gone is swept within a minute."""

from __future__ import annotations

import asyncio
import json
import socket
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from search.live import liveness, outcome, runner
from search.models import Entry, Thread
from search.saving import NOT_SAVED, clean, deep, fitted
from tests.search.conftest import Paced, answer_stream, serve
from tests.search.test_consumer import connect, receive_until


def test_clean_and_fit():
    assert clean("a\x00b\ud800c") == "ab?c"
    assert clean("x" * 10, 4) == "xxxx"
    assert deep({"t\x00": ["\ud800", {"k": "v\x00"}], "n": 1}) == {"t": ["?", {"k": "v"}], "n": 1}
    fields = fitted(
        Entry, {"model": "m" * 100, "backend_uuid": "b\x00" * 300, "answer": "a\x00" * 5, "done_ms": 3}
    )
    assert fields == {"model": "m" * 80, "backend_uuid": "b" * 200, "answer": "aaaaa", "done_ms": 3}


def hostile_stream() -> list[dict]:
    events = answer_stream(["Hello \x00", "world [1]"], model="m" * 120)
    events[0]["backend_uuid"] = "u" * 300
    events[0]["read_write_token"] = "t\x00" * 300
    for block in events[1]["blocks"]:
        for item in block.get("web_result_block", {}).get("web_results", []):
            item["name"] = "Title\x00 with NUL"
    return events


@pytest.mark.django_db(transaction=True)
async def test_nul_and_overlong_upstream_fields_are_saved_cleaned(owner, alinked, upstream):
    serve(upstream, Paced(hostile_stream()))
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "hostile"}))
    await receive_until(comm, "status-completed")
    await comm.disconnect()
    entry = await Entry.objects.select_related("thread").aget()
    assert entry.status == "completed"
    assert "\x00" not in entry.answer and entry.answer.startswith("Hello world")
    assert len(entry.backend_uuid) == 200 and len(entry.model) <= 80
    assert all("\x00" not in s["title"] for s in entry.sources) and entry.sources
    assert entry.thread.read_write_token == "t" * 200


@pytest.mark.django_db(transaction=True)
async def test_a_final_save_that_fails_saves_the_entry_failed_with_what_it_can(
    owner, alinked, upstream, monkeypatch
):
    def broken_save(run, final):
        if final:
            raise RuntimeError("the database refused the row")  # e.g. PostgreSQL's DataError

    monkeypatch.setattr(outcome, "save_run", broken_save)
    serve(upstream, Paced(answer_stream(["Kept ", "words"])))
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "unsavable"}))
    messages = await receive_until(comm, "status-failed")
    await comm.disconnect()
    assert "pplxweb could not save this answer whole" in "".join(messages)
    entry = await Entry.objects.aget()
    assert (entry.status, entry.error, entry.answer) == ("failed", NOT_SAVED, "Kept words")
    async with asyncio.timeout(10):  # the run leaves the table once its end is sent (its HTML rendered first)
        while runner.RUNS:
            await asyncio.sleep(0.01)


@pytest.mark.django_db(transaction=True)
async def test_a_run_that_dies_without_saving_is_swept_within_the_watchers_tick(
    owner, alinked, upstream, monkeypatch
):
    monkeypatch.setattr(liveness, "TICK", 0.2)
    monkeypatch.setattr(liveness, "LAUNCH_GRACE", timedelta(0))

    def dead(run, searched):
        raise RuntimeError("the end could not be saved at all")

    monkeypatch.setattr(outcome, "finish_run", dead)
    serve(upstream, Paced(answer_stream(["lost"])))
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "dies"}))
    assert "dies" in await comm.receive_from(timeout=5)  # the new entry: its row is written
    async with asyncio.timeout(5):
        while (await Entry.objects.aget()).status == "running":
            await asyncio.sleep(0.05)
    entry = await Entry.objects.aget()
    assert entry.status == "interrupted" and "ended without saving" in entry.error
    await comm.disconnect()


@sync_to_async
def _rows(owner):
    thread = Thread.objects.create(user=owner, title="t")
    long_ago = timezone.now() - timedelta(minutes=5)

    def row(question, runner_id, heartbeat):
        entry = Entry.objects.create(thread=thread, question=question, runner=runner_id, heartbeat=heartbeat)
        Entry.objects.filter(pk=entry.pk).update(created=long_ago)
        return entry.pk

    return {
        "ours, no run": row("ours", liveness.RUNNER, long_ago),
        "ours, live run": row("live", liveness.RUNNER, long_ago),
        "this machine, process alive, silent": row("silent", f"{socket.gethostname()}:1", long_ago),
        "elsewhere, silent": row("far", "otherhost:1", long_ago),
        "elsewhere, beating": row("beating", "otherhost:2", timezone.now()),
    }


@pytest.mark.django_db(transaction=True)
async def test_the_watcher_sweeps_every_kind_of_dead_row_and_beats_for_live_runs(owner):
    rows = await _rows(owner)
    live = rows["ours, live run"]
    before = (await Entry.objects.aget(pk=live)).heartbeat
    swept, claimed = await sync_to_async(liveness.beat_and_sweep)({live})
    assert claimed == []
    assert swept == 3
    status = {name: (await Entry.objects.aget(pk=pk)).status for name, pk in rows.items()}
    assert status == {
        "ours, no run": "interrupted",
        "ours, live run": "running",
        "this machine, process alive, silent": "interrupted",  # pid 1 lives, but its runs are silent
        "elsewhere, silent": "interrupted",
        "elsewhere, beating": "running",
    }
    assert (await Entry.objects.aget(pk=live)).heartbeat > before  # it beat
