"""Agent tokens: made and revoked in Settings and by `manage.py agent_token`, kept as hashes."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.urls import reverse

from accounts.models import AgentToken
from accounts.services import agent_tokens

pytestmark = pytest.mark.django_db


def command(*args: str) -> str:
    out = io.StringIO()
    call_command("agent_token", *args, stdout=out)
    return out.getvalue()


def test_the_command_prints_the_token_last_and_keeps_only_its_hash(owner, settings):
    printed = command("create", "--user", "owner", "--name", "laptop")
    token = printed.strip().splitlines()[-1]
    assert re.fullmatch(r"\S{32,}", token)
    row = AgentToken.objects.get(user=owner, name="laptop")
    assert row.digest == agent_tokens.digest(token) and token not in row.digest
    with connection.cursor() as cursor:  # nowhere in the database
        cursor.execute("SELECT name, digest FROM accounts_agenttoken")
        assert token not in repr(cursor.fetchall())
    for path in settings.DATA_DIR.rglob("*"):  # nor in the data dir (the database file included)
        if path.is_file() and path.stat().st_size < 50_000_000:
            assert token.encode() not in path.read_bytes(), path
    assert agent_tokens.authenticate(token).user == owner


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (("create", "--user", "nobody", "--name", "x"), "There is no person named “nobody”"),
        (("revoke", "--user", "owner", "--name", "never made"), "There is no token named “never made”"),
        (("create", "--user", "owner", "--name", "laptop"), "You already have a token named “laptop”"),
        (("create", "--user", "owner", "--name", " "), "Give the token a name"),
    ],
)
def test_the_command_refuses_with_a_sentence_and_a_non_zero_exit(owner, args, sentence):
    agent_tokens.create(owner, "laptop")
    with pytest.raises(CommandError, match=sentence):
        command(*args)
    assert AgentToken.objects.count() == 1


def test_revoking_by_command_refuses_the_token_at_once(owner):
    token = command("create", "--user", "owner", "--name", "laptop").strip().splitlines()[-1]
    assert "Revoked “laptop”" in command("revoke", "--user", "owner", "--name", "laptop")
    assert agent_tokens.authenticate(token) is None


def test_settings_shows_a_new_token_once_then_its_name_and_last_use(owner_client, owner):
    response = owner_client.post(reverse("accounts:agents"), {"name": "Open WebUI", "create": "1"})
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    token = re.search(r'value="(pplxweb_[^"]+)"', response.content.decode()).group(1)
    assert "shows it this once" in response.content.decode()
    page = owner_client.get(reverse("accounts:settings")).content.decode()
    assert token not in page and "Open WebUI" in page and "never used" in page
    agent_tokens.authenticate(token)
    assert "last used just now" in owner_client.get(reverse("accounts:settings")).content.decode()
    duplicate = owner_client.post(reverse("accounts:agents"), {"name": "Open WebUI", "create": "1"})
    assert "You already have a token named" in duplicate.content.decode()
    row = AgentToken.objects.get(name="Open WebUI")
    revoked = owner_client.post(reverse("accounts:agents"), {"revoke": str(row.pk)}, follow=True)
    assert "Revoked “Open WebUI”" in revoked.content.decode()
    assert agent_tokens.authenticate(token) is None


def test_nobody_revokes_anyone_elses_token(member_client, owner):
    agent_tokens.create(owner, "owner's")
    row = AgentToken.objects.get()
    member_client.post(reverse("accounts:agents"), {"revoke": str(row.pk)})
    assert AgentToken.objects.filter(pk=row.pk).exists()


def test_a_token_of_someone_who_may_no_longer_sign_in_opens_nothing(member):
    token = agent_tokens.create(member, "phone")
    member.is_active = False
    member.save()
    assert agent_tokens.authenticate(token) is None
