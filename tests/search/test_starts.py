"""Search starts: limits and conversations checked in one transaction; each socket's start is its
own, and people asking at the same moment each get their own answer."""

from __future__ import annotations

import json
import threading

import pytest
from django.http import Http404

from accounts.models import PerplexityAccount, TokenBucket
from accounts.services import credentials_for, credentials_for_many
from pplxweb.perplexity.request import AskOptions
from search.live import asking, starts
from search.live.consumers import _as_querydict
from search.models import Entry, Thread
from tests.search.conftest import TOKEN, Paced, answer_stream, serve
from tests.search.test_consumer import connect, receive_until

SESSION = json.dumps({"cookies": {"__Secure-next-auth.session-token": TOKEN}})


def link(user) -> PerplexityAccount:
    return PerplexityAccount.objects.create(user=user, email=f"{user.username}@example.com", session=SESSION)


@pytest.mark.django_db
def test_starts_check_limits_and_conversations(owner, member):
    mine = asking.start_search(member, "mine", AskOptions())
    theirs = asking.start_search(owner, "theirs", AskOptions())
    Entry.objects.update(status="completed")
    one = asking.start_search(owner, "one", AskOptions())
    follow_up = asking.start_search(member, "follow-up", AskOptions(), thread_id=mine.thread_id)
    two = asking.start_search(owner, "two", AskOptions())
    with pytest.raises(asking.SearchRefused, match="You have 2 searches running"):
        asking.start_search(owner, "three", AskOptions())
    with pytest.raises(Http404):  # not the member's conversation
        asking.start_search(member, "sneak", AskOptions(), thread_id=theirs.thread_id)
    assert one.thread_id != two.thread_id and follow_up.thread_id == mine.thread_id
    assert Entry.objects.filter(user=owner, status="running").count() == 2
    assert Entry.objects.filter(thread__user=owner).count() == 3
    assert Entry.objects.filter(thread_id=theirs.thread_id).count() == 1
    thread = Thread.objects.get(pk=mine.thread_id)
    assert thread.updated >= follow_up.created > thread.created  # the follow-up's thread moved up
    buckets = sorted(round(b.tokens) for b in TokenBucket.objects.all())
    assert buckets == [asking.PER_MINUTE - 3, asking.PER_MINUTE - 2]  # refusals took no token


@pytest.mark.django_db
def test_the_rate_limit_counts_within_a_burst(owner, monkeypatch):
    monkeypatch.setattr(asking, "MAX_RUNNING", 100)
    for n in range(asking.PER_MINUTE):
        asking.start_search(owner, f"q{n}", AskOptions())
    with pytest.raises(asking.SearchRefused, match=f"That is {asking.PER_MINUTE} searches this minute"):
        asking.start_search(owner, "one too many", AskOptions())
    assert Entry.objects.count() == asking.PER_MINUTE


@pytest.mark.django_db
def test_credentials_of_many_people_are_each_ones_own(django_user_model, owner, member):
    keyed = django_user_model.objects.create_user(username="keyed")
    nobody = django_user_model.objects.create_user(username="nobody")
    link(owner)
    PerplexityAccount.objects.create(user=keyed, api_key="pplx-key-1234")
    people = [owner, member, keyed, nobody]

    def kinds() -> list:
        together = credentials_for_many(people)
        for person in people:  # the same as asking for each one alone
            if together[person.pk] is not None:
                assert together[person.pk] == credentials_for(person)
        return [together[p.pk] and together[p.pk].kind for p in people]

    assert kinds() == ["session", None, "api_key", None]
    PerplexityAccount.objects.filter(user=owner).update(shared=True)
    assert kinds() == ["session", "shared", "shared", "shared"]  # the owner's link comes before a key


@pytest.mark.django_db(transaction=True)
async def test_people_asking_at_the_same_moment_each_get_their_own_answer(
    django_user_model, owner, member, upstream
):
    from asgiref.sync import sync_to_async

    third = await django_user_model.objects.acreate(username="third")
    for person in (owner, member, third):
        await sync_to_async(link)(person)
    serve(upstream, *(Paced(answer_stream([f"answer {n}"])) for n in range(3)))
    sockets = [await connect(person) for person in (owner, member, third)]
    for person, socket in zip((owner, member, third), sockets, strict=True):
        await socket.send_to(text_data=json.dumps({"q": f"question of {person.username}"}))
    for person, socket in zip((owner, member, third), sockets, strict=True):
        first = await socket.receive_from(timeout=5)
        assert f"question of {person.username}" in first  # its own new entry comes first
        await receive_until(socket, "status-completed")
        await socket.disconnect()
    saved = {e.user_id: (e.question, e.status) async for e in Entry.objects.all()}
    assert saved == {p.pk: (f"question of {p.username}", "completed") for p in (owner, member, third)}


@pytest.mark.django_db
def test_a_bad_ask_gets_its_sentence_and_the_next_one_starts(owner, member):
    link(member)
    prepared = [
        starts.prepare(person, _as_querydict(data))
        for person, data in [
            (owner, {"q": "x", "thread": str(10**30)}),  # past any database's integer
            (owner, {"q": "x", "thread": "the first one"}),
            (owner, {"q": ""}),
            (member, {"q": "fine"}),
        ]
    ]
    assert prepared[:3] == ["That conversation was not found."] * 2 + ["Type a question first."]
    entry, request, preloaded = prepared[3]
    assert entry.question == request.query == "fine" and preloaded["credential"].kind == "session"


@pytest.mark.django_db
def test_someone_removed_with_their_socket_open_starts_nothing_and_the_others_start(owner, member):
    from search.members import remove_member

    link(owner)
    stale = type(member).objects.get(pk=member.pk)  # what their open socket still holds
    remove_member(owner, member.pk, keep_history=False)
    prepared = [
        starts.prepare(stale, _as_querydict({"q": "still here?"})),
        starts.prepare(owner, _as_querydict({"q": "fine"})),
    ]
    assert prepared[0] == "Your pplxweb account was removed, so nothing was started."
    assert prepared[1][0].question == "fine"
    assert list(Entry.objects.values_list("question", flat=True)) == ["fine"]


@pytest.mark.django_db(transaction=True)
def test_a_follow_up_and_deleting_its_threads_last_entry_at_the_same_moment_both_work(
    owner, client, monkeypatch
):
    """The follow-up starts first and is held after reading its thread; meanwhile another tab
    deletes the thread's only entry. The delete waits, sees the new entry and keeps the thread.
    (Unlocked on PostgreSQL the delete removed the thread and the start failed at its commit.)"""
    from django.db import connections

    first = asking.start_search(owner, "first", AskOptions())
    Entry.objects.update(status="completed")
    reached, go = threading.Event(), threading.Event()
    conversation = asking._conversation

    def held(*args):
        thread = conversation(*args)  # read and locked
        reached.set()
        go.wait(10)
        return thread

    monkeypatch.setattr(asking, "_conversation", held)
    outcome: dict = {}

    def follow_up():
        try:
            outcome["entry"] = asking.start_search(owner, "again", AskOptions(), thread_id=first.thread_id)
        finally:
            connections.close_all()

    def delete():
        try:
            client.force_login(owner)
            outcome["delete"] = client.post("/history/delete/", {"entry": first.pk, "confirm": "1"})
        finally:
            connections.close_all()

    starting = threading.Thread(target=follow_up)
    starting.start()
    assert reached.wait(10)
    deleting = threading.Thread(target=delete)
    deleting.start()
    deleting.join(0.5)
    assert deleting.is_alive()  # waiting for the start's lock
    go.set()
    starting.join(10)
    deleting.join(10)
    assert isinstance(outcome["entry"], Entry) and outcome["delete"].status_code == 302
    assert list(Entry.objects.values_list("question", "thread_id")) == [("again", first.thread_id)]


@pytest.mark.django_db(transaction=True)
def test_someone_removed_between_the_checks_and_the_commit_is_told_so(owner, member, monkeypatch):
    """The removal commits after the start read the member's defaults: their row would break
    the commit. The start is judged again and the member is refused with the sentence."""
    from django.db import connections

    from search.members import remove_member

    link(owner)
    link(member)  # (without a credential they would be refused before the trip)
    read = asking.defaults_of_member
    calls = []

    def defaults_then_removal(user):
        found = read(user)
        if not calls:  # the first time only: the member goes right after their defaults were read
            worker = threading.Thread(
                target=lambda: (remove_member(owner, member.pk, keep_history=False), connections.close_all())
            )
            worker.start()
            worker.join(10)
        calls.append(int(found is not None))
        return found

    monkeypatch.setattr(asking, "defaults_of_member", defaults_then_removal)
    prepared = [
        starts.prepare(member, _as_querydict({"q": "mine"})),
        starts.prepare(owner, _as_querydict({"q": "fine"})),
    ]
    assert calls == [1, 0, 1]  # the member's judged twice (the second time they were gone), the owner's once
    assert prepared[0] == "Your pplxweb account was removed, so nothing was started."
    assert prepared[1][0].question == "fine"
    assert list(Entry.objects.values_list("question", flat=True)) == ["fine"]
