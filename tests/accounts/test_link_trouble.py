"""After Perplexity refuses the linked session, the search page says so (with what searches use
meanwhile) and Settings opens Re-link, saying "Re-link below", not "Re-link in Settings"."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.urls import reverse

from accounts.models import PerplexityAccount
from accounts.services.link import mark_auth_problem
from pplxweb.perplexity.errors import AuthError, ChallengeError

pytestmark = pytest.mark.django_db
SESSION = json.dumps({"cookies": {"__Secure-next-auth.session-token": "t"}})


def account(user, **fields) -> PerplexityAccount:
    return PerplexityAccount.objects.create(user=user, email=f"{user.get_username()}@example.com",
                                            session=SESSION, **fields)  # fmt: skip


def notice(client) -> str:
    page = client.get(reverse("search:home")).content.decode()
    found = re.search(r'<p class="notice" role="alert">(.*?)</p>', page, re.S)
    return html.unescape(found.group(1)) if found else ""


def test_a_refused_session_is_said_on_the_search_page_and_settings_opens_re_link(owner_client, owner):
    linked = account(owner)
    assert notice(owner_client) == ""
    mark_auth_problem(linked, AuthError())
    said = notice(owner_client)
    assert "Perplexity did not accept the linked session." in said
    assert ">Re-link in Settings</a>" in said and said.count("Re-link") == 1
    settings_page = owner_client.get(reverse("accounts:settings")).content.decode()
    assert "Perplexity did not accept the linked session. Re-link below." in settings_page
    assert "Re-link in Settings" not in settings_page
    assert '<details open id="relink">' in settings_page
    PerplexityAccount.objects.filter(pk=linked.pk).update(status="ok", status_reason="")  # linked again
    assert notice(owner_client) == ""
    assert '<details  id="relink">' in owner_client.get(reverse("accounts:settings")).content.decode()


def test_the_search_page_says_what_searches_use_meanwhile(owner_client, owner):
    linked = account(owner, api_key="pplx-key", api_key_last4="key1")
    mark_auth_problem(linked, AuthError())
    assert "Until then you search with your API key." in notice(owner_client)


def test_a_cloudflare_block_is_said_with_the_way_to_settings(owner_client, owner):
    mark_auth_problem(account(owner), ChallengeError())
    said = notice(owner_client)
    assert "Cloudflare check blocked this server" in said and ">Open Settings</a>" in said


def test_a_member_on_the_owners_broken_shared_link_is_told_whose_it_is(member_client, owner):
    shared = account(owner, shared=True)
    mark_auth_problem(shared, AuthError())
    said = notice(member_client)
    assert "The owner's shared Perplexity link needs attention" in said
    page = member_client.get(reverse("search:home")).content.decode()
    assert "ask the owner to share theirs" not in page  # they do share it
