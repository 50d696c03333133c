"""A stored sign-in that no configured key opens (a key lost or changed): every path that meets
it says so in a sentence, starts nothing half-way, and leaves everyone else's searches alone."""

from __future__ import annotations

import json
import logging

import pytest
from asgiref.sync import sync_to_async
from cryptography.fernet import Fernet
from django.db import connection
from django.urls import reverse

from accounts.fields import UNREADABLE
from accounts.models import PerplexityAccount
from search.history.forget import Upstream, forget
from search.live import starts
from search.live.consumers import _as_querydict
from search.models import Entry
from tests.search.conftest import TOKEN, Paced, answer_stream, serve
from tests.search.test_consumer import connect
from tests.search.test_pages import client_for, wait_done

SESSION = json.dumps({"cookies": {"__Secure-next-auth.session-token": TOKEN}})


def seal_with_another_key(account: PerplexityAccount) -> None:
    """The row as a data dir restored with another key file leaves it."""
    stranger = Fernet(Fernet.generate_key()).encrypt(SESSION.encode()).decode()
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE accounts_perplexityaccount SET session = %s WHERE id = %s", [stranger, account.pk]
        )


def link(user, unreadable: bool = False) -> PerplexityAccount:
    account = PerplexityAccount.objects.create(
        user=user, email=f"{user.username}@example.com", session=SESSION
    )
    if unreadable:
        seal_with_another_key(account)
    return account


@pytest.mark.django_db
def test_a_start_with_an_unreadable_sign_in_writes_nothing_and_the_others_start(owner, member, caplog):
    link(owner, unreadable=True)
    link(member)
    with caplog.at_level(logging.ERROR):
        mine = starts.prepare(owner, _as_querydict({"q": "mine"}))
        theirs = starts.prepare(member, _as_querydict({"q": "theirs"}))
    assert mine == f"{UNREADABLE} Nothing was started."
    assert theirs[0].question == "theirs" and theirs[2]["credential"].kind == "session"
    assert list(Entry.objects.values_list("question", flat=True)) == ["theirs"]
    assert "PPLXWEB_FIELD_KEYS" in caplog.text and "Traceback" not in caplog.text


@pytest.mark.django_db(transaction=True)
async def test_the_socket_says_why_and_stays_open(owner, upstream):
    await sync_to_async(link)(owner, unreadable=True)
    serve(upstream, Paced(answer_stream(["fine"])))
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "anything"}))
    reply = await comm.receive_from(timeout=5)
    assert 'id="search-error"' in reply and "cannot read the stored Perplexity sign-in" in reply
    assert not await Entry.objects.aexists()
    await comm.send_to(text_data=json.dumps({"action": "watch", "thread": "999999"}))  # still listening
    assert "not found" in await comm.receive_from(timeout=5)
    await comm.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_a_search_without_javascript_ends_failed_with_the_sentence(owner, upstream, caplog):
    await sync_to_async(link)(owner, unreadable=True)
    client = await client_for(owner)
    with caplog.at_level(logging.ERROR):
        await client.post(reverse("search:ask"), {"q": "plain form"})
        entry = await wait_done((await Entry.objects.aget()).pk)
    assert entry.status == "failed" and entry.error == UNREADABLE
    assert "Traceback" not in caplog.text and "PPLXWEB_FIELD_KEYS" in caplog.text


@pytest.mark.django_db
def test_pages_that_read_it_say_so_instead_of_a_server_error(owner, client, caplog):
    link(owner, unreadable=True)
    client.force_login(owner)
    with caplog.at_level(logging.ERROR):
        response = client.get(reverse("accounts:settings"))
    page = response.content.decode()
    assert response.status_code == 500
    assert "cannot read the stored Perplexity sign-in" in page and "Nothing you typed was lost" in page
    assert TOKEN not in page and "Traceback" not in caplog.text
    # unlinking does not need to read it, and afterwards Settings opens again to link anew
    assert 'name="unlink"' in page  # it is their own link: they may unlink it here
    response = client.post(reverse("accounts:perplexity"), {"unlink": "1"})
    assert response.status_code == 302
    assert client.get(reverse("accounts:settings")).status_code == 200


@pytest.mark.django_db
def test_deleting_on_perplexity_says_why_it_was_not_done(owner):
    link(owner, unreadable=True)
    done, said = forget(owner, [Upstream(entry_uuid="b-1", kind="session", read_write_token="rw")])
    assert not done and said == f"It was not deleted on Perplexity: {UNREADABLE}"
