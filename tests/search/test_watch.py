"""A page that rendered an answer as running while it ended gets its final state on connect."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from search.models import RUNNER, Entry, Thread
from tests.search.test_consumer import connect

pytestmark = pytest.mark.django_db(transaction=True)


async def test_an_answer_that_ended_a_moment_ago_is_sent_whole_on_connect(owner):
    thread = await Thread.objects.acreate(user=owner, title="t")
    just = await Entry.objects.acreate(
        thread=thread, question="q1", status="completed", answer="Ended just now", heartbeat=timezone.now()
    )
    await Entry.objects.acreate(
        thread=thread, question="q2", status="completed", answer="Long ago",
        heartbeat=timezone.now() - timedelta(minutes=5),
    )  # fmt: skip
    comm = await connect(owner, f"/ws/search/?thread={thread.pk}")
    message = await comm.receive_from(timeout=5)
    assert f'id="entry-{just.pk}" hx-swap-oob="true"' in message and "Ended just now" in message
    assert await comm.receive_nothing(timeout=0.3)  # the old one is not sent again
    await comm.disconnect()


async def test_a_reopened_page_gets_the_answers_it_shows_running_that_ended_meanwhile(owner, member):
    """Redis away for minutes: an answer the page shows running ended long ago. The page names
    the answers it shows running; the ended ones come whole (once), the running one and other
    people's do not, and what is not an id is passed over."""
    import json

    from search.live import runner

    thread = await Thread.objects.acreate(user=owner, title="t")
    long_ago = timezone.now() - timedelta(minutes=5)
    ended = await Entry.objects.acreate(
        thread=thread, question="q1", status="completed", answer="Ended long ago", heartbeat=long_ago
    )
    running = await Entry.objects.acreate(thread=thread, question="q2", status="running", runner=RUNNER)
    runner.RUNS[running.pk] = object()  # its run is alive here: not swept
    theirs_thread = await Thread.objects.acreate(user=member, title="theirs")
    theirs = await Entry.objects.acreate(
        thread=theirs_thread, question="q3", status="completed", answer="Not yours", heartbeat=long_ago
    )
    try:
        comm = await connect(owner)
        ids = [ended.pk, running.pk, theirs.pk, str(ended.pk), "x", None, -1, True, 1.5, "9" * 30, [1]]
        text = json.dumps({"action": "recheck", "entries": ids}).replace("1.5", "1e400")  # inf
        await comm.send_to(text_data=text)
        message = await comm.receive_from(timeout=5)
        assert f'id="entry-{ended.pk}" hx-swap-oob="true"' in message and "Ended long ago" in message
        assert await comm.receive_nothing(timeout=0.3)
        await comm.send_to(text_data=json.dumps({"action": "recheck", "entries": "all"}))
        assert "could not read that message" in await comm.receive_from(timeout=5)
        await comm.send_to(text_data='{"action": "watch", "thread": 1e400}')
        assert "conversation was not found" in await comm.receive_from(timeout=5)
        await comm.disconnect()
    finally:
        runner.RUNS.pop(running.pk, None)
