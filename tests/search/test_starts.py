"""Search starts gathered: many at once cost one trip and the same statements as a few, with the
same outcome as one after another."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from django.db import connection
from django.http import Http404
from django.test.utils import CaptureQueriesContext

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
def test_asks_started_together_end_as_one_after_another_would(owner, member):
    mine = asking.start_search(member, "mine", AskOptions())
    theirs = asking.start_search(owner, "theirs", AskOptions())
    Entry.objects.update(status="completed")
    batch = [
        asking.Ask(owner, "one", AskOptions()),
        asking.Ask(member, "follow-up", AskOptions(), thread_id=mine.thread_id),
        asking.Ask(owner, "two", AskOptions()),
        asking.Ask(owner, "three", AskOptions()),  # the owner's third: two are running
        asking.Ask(member, "sneak", AskOptions(), thread_id=theirs.thread_id),  # not the member's
    ]
    one, follow_up, two, three, sneak = asking.start_searches(batch)
    assert [one.question, two.question, follow_up.question] == ["one", "two", "follow-up"]
    assert one.thread_id != two.thread_id and follow_up.thread_id == mine.thread_id
    assert isinstance(three, asking.SearchRefused) and "You have 2 searches running" in three.message
    assert isinstance(sneak, Http404)
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
    batch = [asking.Ask(owner, f"q{n}", AskOptions()) for n in range(asking.PER_MINUTE + 1)]
    *started, refused = asking.start_searches(batch)
    assert all(isinstance(e, Entry) for e in started)
    assert isinstance(refused, asking.SearchRefused)
    assert f"That is {asking.PER_MINUTE} searches this minute" in refused.message
    assert Entry.objects.count() == asking.PER_MINUTE


@pytest.mark.django_db
def test_a_burst_of_starts_costs_the_statements_of_two(django_user_model, owner):
    people = [owner] + [django_user_model.objects.create_user(username=f"p{n}") for n in range(11)]
    for person in people:
        link(person)
    message = _as_querydict({"q": "what is new?", "model": "pplx_pro"})

    def statements(group) -> int:
        with CaptureQueriesContext(connection) as queries:
            prepared = starts.prepare_many([(person, message) for person in group])
        assert all(isinstance(p, tuple) for p in prepared), prepared
        Entry.objects.update(status="completed")
        return len(queries)

    statements(people)  # everyone's first search makes their defaults and rate-limit bucket
    few, many = statements(people[:2]), statements(people)
    assert many == few <= 12


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


async def test_asks_arriving_while_a_start_runs_go_together_and_get_their_own_results():
    batches, gate = [], threading.Event()

    def work(items: list) -> list:
        batches.append(list(items))
        if len(batches) == 1:
            gate.wait(5)  # the first start is slow: everyone else arrives meanwhile
        return [f"started {item}" for item in items]

    gathered = starts.Gathered(work)
    first = asyncio.ensure_future(gathered("a"))
    await asyncio.sleep(0.05)
    rest = [asyncio.ensure_future(gathered(item)) for item in "bcd"]
    await asyncio.sleep(0.05)
    gate.set()
    assert await first == "started a"
    assert await asyncio.gather(*rest) == ["started b", "started c", "started d"]
    assert batches == [["a"], ["b", "c", "d"]]
    assert await gathered("e") == "started e"  # and the next one on its own


async def test_a_failed_start_reaches_everyone_in_it_and_the_next_one_works():
    gate, calls = threading.Event(), []

    def work(items: list) -> list:
        calls.append(items)
        if len(calls) == 1:
            gate.wait(5)
            return ["first"]
        if len(calls) == 2:
            raise RuntimeError("database is locked")
        return ["fine"] * len(items)

    gathered = starts.Gathered(work)
    first = asyncio.ensure_future(gathered(1))
    await asyncio.sleep(0.05)
    failing = [asyncio.ensure_future(gathered(n)) for n in (2, 3)]
    gone = asyncio.ensure_future(gathered(4))  # its socket closes while it waits
    await asyncio.sleep(0.05)
    gone.cancel()
    gate.set()
    assert await first == "first"
    for task in failing:
        with pytest.raises(RuntimeError, match="database is locked"):
            await task
    assert gone.cancelled()
    assert await gathered(5) == "fine"


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
def test_one_bad_ask_does_not_spoil_the_others_in_its_trip(owner, member):
    link(member)
    prepared = starts.prepare_many(
        [
            (owner, _as_querydict({"q": "x", "thread": str(10**30)})),  # past any database's integer
            (owner, _as_querydict({"q": "x", "thread": "the first one"})),
            (owner, _as_querydict({"q": ""})),
            (member, _as_querydict({"q": "fine"})),
        ]
    )
    assert prepared[:3] == ["That conversation was not found."] * 2 + ["Type a question first."]
    entry, request, preloaded = prepared[3]
    assert entry.question == request.query == "fine" and preloaded["credential"].kind == "session"


@pytest.mark.django_db
def test_someone_removed_with_their_socket_open_starts_nothing_and_the_others_start(owner, member):
    from accounts.services import remove_member

    link(owner)
    stale = type(member).objects.get(pk=member.pk)  # what their open socket still holds
    remove_member(owner, member.pk)
    prepared = starts.prepare_many(
        [(stale, _as_querydict({"q": "still here?"})), (owner, _as_querydict({"q": "fine"}))]
    )
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
    judge = asking._judge

    def held(*args):
        reached.set()
        go.wait(10)
        return judge(*args)

    monkeypatch.setattr(asking, "_judge", held)
    outcome: dict = {}

    def follow_up():
        try:
            outcome["entry"] = asking.start_searches(
                [asking.Ask(owner, "again", AskOptions(), thread_id=first.thread_id)]
            )[0]
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
def test_someone_removed_between_the_checks_and_the_commit_does_not_spoil_the_trip(
    owner, member, monkeypatch
):
    """The removal commits after the trip read everyone's defaults: the member's rows would
    break the shared commit. The trip is judged again and only the member is refused."""
    from django.db import connections

    from accounts.services import remove_member

    link(owner)
    link(member)  # (without a credential they would be refused before the trip)
    read = asking.defaults_for_many
    calls = []

    def defaults_then_removal(users):
        found = read(users)
        if not calls:  # the first time only: the member goes right after their defaults were read
            worker = threading.Thread(
                target=lambda: (remove_member(owner, member.pk), connections.close_all())
            )
            worker.start()
            worker.join(10)
        calls.append(len(found))
        return found

    monkeypatch.setattr(asking, "defaults_for_many", defaults_then_removal)
    prepared = starts.prepare_many(
        [(member, _as_querydict({"q": "mine"})), (owner, _as_querydict({"q": "fine"}))]
    )
    assert calls == [2, 1]  # judged twice: the second time the member was gone
    assert prepared[0] == "Your pplxweb account was removed, so nothing was started."
    assert prepared[1][0].question == "fine"
    assert list(Entry.objects.values_list("question", flat=True)) == ["fine"]
