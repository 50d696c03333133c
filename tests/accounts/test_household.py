"""The household in Settings: removing a member asks first and keeps or deletes their history;
the owner's one-time code lets a member who forgot their password set a new one."""

from __future__ import annotations

import logging
import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import PasswordReset, PerplexityAccount
from accounts.services import resets
from search import images
from search.history.query import Filters, search
from search.models import Attachment, Entry, Thread
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db
NEW = "a brand new passphrase 42"


def history_of(user, *questions: str) -> list[Entry]:
    thread = Thread.objects.create(user=user, title=f"{user.get_username()}'s sourdough")
    return [
        Entry.objects.create(thread=thread, question=q, answer=f"About {q}", status="completed")
        for q in questions
    ]


def remove_page(client, member) -> str:
    return client.get(reverse("accounts:remove_member", args=[member.pk])).content.decode()


def test_remove_asks_first_on_a_page_that_works_without_javascript(owner_client, member):
    history_of(member, "How do I feed a starter?", "And in winter?")
    settings_page = owner_client.get(reverse("accounts:settings")).content.decode()
    link = reverse("accounts:remove_member", args=[member.pk])
    assert f'href="{link}"' in settings_page  # a link to the question, not a button that removes
    page = remove_page(owner_client, member)
    assert "Remove member?" in page
    assert "1 conversation here (2 answers)" in page
    assert 'type="radio" name="history" value="keep"' in page and "checked" in page
    assert "Keep it: their 1 conversation moves to your history, marked “from member”." in page
    assert "cannot be undone" in page
    # a forged post without a choice removes nothing and says what is missing
    response = owner_client.post(link, {"history": ""})
    assert response.status_code == 200
    assert "Choose whether to keep or delete their history." in response.content.decode()
    assert get_user_model().objects.filter(pk=member.pk).exists()


def test_kept_history_moves_to_the_owner_marked_with_the_members_name(owner_client, owner, member):
    PerplexityAccount.objects.create(user=member, email="m@example.com", session='{"cookies": {}}')
    entries = history_of(member, "How do I feed a starter?", "And in winter?")
    Attachment.objects.create(
        user=member, entry=entries[0], name="notes.txt", stored="s1", size=3, kind="text"
    )
    response = owner_client.post(reverse("accounts:remove_member", args=[member.pk]), {"history": "keep"})
    assert response.status_code == 302
    message = owner_client.get(response.url).content.decode()
    assert "member was removed. Their 1 conversation is in your history, marked “from member”." in message
    assert not get_user_model().objects.filter(username="member").exists()
    assert not PerplexityAccount.objects.filter(email="m@example.com").exists()  # their link is erased
    thread = Thread.objects.get()
    assert (thread.user, thread.kept_from) == (owner, "member")
    assert set(Entry.objects.values_list("user", flat=True)) == {owner.pk}
    assert Attachment.objects.get().user == owner
    history = owner_client.get(reverse("search:history")).content.decode()
    assert "How do I feed a starter?" in history and "· from member" in history
    assert [f.entry.pk for f in search(owner, Filters(text="winter"))] == [entries[1].pk]
    page = owner_client.get(reverse("search:thread", args=[thread.pk])).content.decode()
    assert "From member’s history, kept when member was removed" in page


def test_deleted_history_goes_with_the_member_and_their_images(owner_client, owner, member):
    mine = history_of(owner, "Owner's question")
    theirs = history_of(member, "Their question")
    for entry in (*mine, *theirs):
        images.folder(entry.pk).mkdir(parents=True)
        (images.folder(entry.pk) / "0.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    response = owner_client.post(reverse("accounts:remove_member", args=[member.pk]), {"history": "delete"})
    assert response.status_code == 302
    assert "member was removed, with their 1 conversation." in owner_client.get(response.url).content.decode()
    assert list(Entry.objects.values_list("question", flat=True)) == ["Owner's question"]
    assert images.folder(mine[0].pk).exists() and not images.folder(theirs[0].pk).exists()


def test_only_the_owner_removes_and_never_themselves(client, owner, member):
    client.force_login(member)
    assert client.get(reverse("accounts:remove_member", args=[owner.pk])).status_code == 302  # to sign-in
    client.force_login(owner)
    assert client.get(reverse("accounts:remove_member", args=[owner.pk])).status_code == 404
    assert (
        client.post(reverse("accounts:remove_member", args=[owner.pk]), {"history": "delete"}).status_code
        == 404
    )
    assert client.get(reverse("accounts:remove_member", args=[999_999])).status_code == 404


# --- password reset ----------------------------------------------------------------------------


def issue_code(owner_client, member) -> str:
    response = owner_client.post(reverse("accounts:member_password", args=[member.pk]))
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]  # the code is shown once, never kept by the browser
    page = response.content.decode()
    return re.search(r"<code>([A-Z0-9-]{14})</code>", page).group(1)


def redeem(client, code: str, username: str = "member", password: str = NEW):
    return client.post(
        reverse("accounts:reset"),
        {"username": username, "code": code, "new_password1": password, "new_password2": password},
    )


def test_a_reset_code_sets_a_new_password_once(owner_client, member, caplog):
    caplog.set_level(logging.INFO)
    elsewhere = Client()
    elsewhere.force_login(member)  # a browser where the member is still signed in
    code = issue_code(owner_client, member)
    assert code not in caplog.text  # only its expiry is logged
    settings_page = owner_client.get(reverse("accounts:settings")).content.decode()
    assert "a reset code works until" in settings_page and "Cancel code" in settings_page
    browser = Client()
    assert "Forgot your password?" in browser.get(reverse("accounts:login")).content.decode()
    response = redeem(browser, code.lower().replace("-", " "))  # as typed on a phone
    assert response.status_code == 302 and response.url == reverse("search:home")
    assert browser.get(reverse("search:home")).status_code == 200  # signed in
    member.refresh_from_db()
    assert member.check_password(NEW)
    assert elsewhere.get(reverse("search:home")).status_code == 302  # the other browser signed out
    again = redeem(Client(), code, password="yet another passphrase 9")
    assert "has expired or been used" in again.content.decode()
    member.refresh_from_db()
    assert member.check_password(NEW)


def test_a_code_expires_after_thirty_minutes(owner_client, member):
    code = issue_code(owner_client, member)
    PasswordReset.objects.update(expires=timezone.now() - timedelta(seconds=1))
    response = redeem(Client(), code)
    assert response.status_code == 200 and "has expired or been used" in response.content.decode()
    member.refresh_from_db()
    assert member.check_password(PASSWORD)
    assert timedelta(minutes=30) == resets.RESET_VALID


def test_wrong_codes_void_the_code_and_a_code_is_only_its_members(owner_client, member, django_user_model):
    other = django_user_model.objects.create_user(username="other", password=PASSWORD)
    code = issue_code(owner_client, member)
    assert "has expired or been used" in redeem(Client(), code, username="other").content.decode()
    for n in range(resets.MAX_TRIES):
        redeem(Client(), f"AAAA-BBBB-CCC{n}")
    assert "has expired or been used" in redeem(Client(), code).content.decode()  # void after 5 wrong
    member.refresh_from_db()
    other.refresh_from_db()
    assert member.check_password(PASSWORD) and other.check_password(PASSWORD)
    assert "a reset code works until" not in owner_client.get(reverse("accounts:settings")).content.decode()


def test_a_new_code_replaces_the_last_and_cancel_voids_it(owner_client, member):
    first = issue_code(owner_client, member)
    second = issue_code(owner_client, member)
    assert "has expired or been used" in redeem(Client(), first).content.decode()
    owner_client.post(reverse("accounts:member_password", args=[member.pk]), {"cancel": "1"})
    assert "has expired or been used" in redeem(Client(), second).content.decode()
    assert not PasswordReset.objects.exists()


def test_the_new_password_is_checked_like_any_other(owner_client, member):
    code = issue_code(owner_client, member)
    response = redeem(Client(), code, password="member")  # too short, like the user name
    page = response.content.decode()
    assert response.status_code == 200 and "too short" in page
    response = Client().post(
        reverse("accounts:reset"),
        {"username": "member", "code": code, "new_password1": NEW, "new_password2": NEW + "x"},
    )
    assert "The two passwords differ." in response.content.decode()
    assert redeem(Client(), code).status_code == 302  # still usable: nothing was tried with it


def test_only_the_owner_makes_codes_and_never_for_an_owner(client, owner, member):
    client.force_login(member)
    assert client.post(reverse("accounts:member_password", args=[owner.pk])).status_code == 302  # sign-in
    client.force_login(owner)
    assert client.post(reverse("accounts:member_password", args=[owner.pk])).status_code == 404
    assert not PasswordReset.objects.exists()
    anonymous = Client()
    assert anonymous.get(reverse("accounts:member_password", args=[member.pk])).status_code in (302, 405)


def test_reset_tries_are_rate_limited_per_user_name(owner_client, member, settings):
    settings.LOGIN_RATE_PER_USER = 3
    code = issue_code(owner_client, member)
    for n in range(3):
        redeem(Client(REMOTE_ADDR=f"10.0.0.{n}"), "WRONG-CODE-0000")
    response = redeem(Client(REMOTE_ADDR="10.0.0.9"), code)
    assert response.status_code == 429 and "Too many tries" in response.content.decode()
    member.refresh_from_db()
    assert member.check_password(PASSWORD)
