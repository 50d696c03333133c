"""Every ask is judged alone: a question is scrubbed before anything is written, and one ask's
exception refuses that ask with a sentence while the others start."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from search.live import asking, starts
from search.live.consumers import _as_querydict
from search.models import Entry, Thread
from tests.search.conftest import Paced, answer_stream, serve
from tests.search.test_consumer import connect, receive_until
from tests.search.test_starts import link


@pytest.mark.django_db(transaction=True)
async def test_a_lone_surrogate_in_one_question_breaks_nobodys_start(
    django_user_model, owner, member, upstream
):
    for person in (owner, member):
        await sync_to_async(link)(person)
    serve(upstream, *(Paced(answer_stream([f"answer {n}"])) for n in range(2)))
    sockets = [await connect(person) for person in (owner, member)]
    await sockets[0].send_to(text_data=json.dumps({"q": "bad \ud800 and \u0000 nul"}))
    await sockets[1].send_to(text_data=json.dumps({"q": "a fine question"}))
    for socket in sockets:
        await receive_until(socket, "status-completed")
        await socket.disconnect()
    saved = {e.user_id: (e.question, e.status) async for e in Entry.objects.all()}
    assert saved == {
        owner.pk: ("bad ? and  nul", "completed"),
        member.pk: ("a fine question", "completed"),
    }


@pytest.mark.django_db
def test_an_exception_for_one_ask_refuses_it_alone(owner, member, monkeypatch, caplog):
    link(owner)
    link(member)
    link_files = asking.attachments_module.link

    def failing(entry, files):  # the last step of the write, after its rows
        if entry.question == "boom":
            raise RuntimeError("this ask breaks the write")
        return link_files(entry, files)

    monkeypatch.setattr(asking.attachments_module, "link", failing)
    batch = [(owner, _as_querydict({"q": "one"})), (member, _as_querydict({"q": "boom"})), (owner, _as_querydict({"q": "two"}))]  # fmt: skip
    one, boom, two = [starts.prepare(person, data) for person, data in batch]
    assert boom == starts.NOT_STARTED
    assert one[0].question == "one" and two[0].question == "two"
    assert sorted(Entry.objects.values_list("question", flat=True)) == ["one", "two"]
    assert not Entry.objects.filter(user=member).exists()  # nothing half-written for the failed one
    assert not Thread.objects.filter(user=member).exists()
    assert "this ask breaks the write" in caplog.text


@pytest.mark.django_db
def test_a_request_that_cannot_be_built_fails_its_entry_and_starts_the_others(owner, member, monkeypatch):
    link(owner)
    link(member)
    build = asking.build_request

    def failing(entry, new_thread=False):
        if entry.question == "boom":
            raise ValueError("cannot build")
        return build(entry, new_thread)

    monkeypatch.setattr(asking, "build_request", failing)
    boom, fine = (
        starts.prepare(owner, _as_querydict({"q": "boom"})),
        starts.prepare(member, _as_querydict({"q": "fine"})),
    )
    assert boom == starts.NOT_STARTED and fine[0].question == "fine"
    failed = Entry.objects.get(question="boom")
    assert (failed.status, failed.error) == ("failed", starts.NOT_STARTED)  # never left running
    assert Entry.objects.get(question="fine").status == "running"
