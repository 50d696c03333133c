"""A page that rendered an answer as running while it ended gets its final state on connect."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from search.models import Entry, Thread
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
