"""Credentials at rest: encrypted, never handed back as ciphertext, and keys that rotate."""

from __future__ import annotations

import io
import json

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from accounts import fields
from accounts.models import PerplexityAccount

pytestmark = pytest.mark.django_db
SECRET = "eyJhbGciOiJkaXIiLCJlbmMiOiJBMjU2R0NNIn0..ROUND-TRIP-TOKEN.tag"


@pytest.fixture
def keys(settings, tmp_path):
    """A data dir of our own with one generated key file, as a fresh install has."""
    key = Fernet.generate_key().decode()
    (tmp_path / "field_keys").write_text(key + "\n")
    settings.DATA_DIR = tmp_path
    settings.FIELD_ENCRYPTION_KEYS = [key]
    fields._fernet.cache_clear()
    yield tmp_path
    fields._fernet.cache_clear()


def raw(pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT session FROM accounts_perplexityaccount WHERE id = %s", [pk])
        return cursor.fetchone()[0]


def test_round_trip_and_the_column_holds_no_plain_text(owner, keys):
    account = PerplexityAccount.objects.create(user=owner, session=json.dumps({"cookies": {"t": SECRET}}))
    stored = raw(account.pk)
    assert SECRET not in stored and "ROUND-TRIP" not in stored
    assert PerplexityAccount.objects.get(pk=account.pk).session_data()["cookies"]["t"] == SECRET
    assert (
        PerplexityAccount.objects.create(
            user=owner.__class__.objects.create(username="x"), session=""
        ).session
        == ""
    )


def test_a_wrong_key_raises_and_never_returns_ciphertext(owner, keys, settings):
    account = PerplexityAccount.objects.create(user=owner, session=SECRET)
    settings.FIELD_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    fields._fernet.cache_clear()
    with pytest.raises(fields.DecryptionError, match="none of the keys"):
        PerplexityAccount.objects.get(pk=account.pk)


def test_rotation_adds_a_key_reencrypts_and_retirement_drops_the_old(owner, keys, settings):
    old_key = settings.FIELD_ENCRYPTION_KEYS[0]
    account = PerplexityAccount.objects.create(user=owner, session=SECRET, api_key="pplx-0123456789abcdef")
    before = raw(account.pk)
    out = io.StringIO()
    call_command("rotate_keys", stdout=out)
    assert "re-encrypted 1 rows" in out.getvalue()
    written = (keys / "field_keys").read_text().split()
    assert len(written) == 2 and written[1] == old_key
    assert raw(account.pk) != before
    assert Fernet(written[0]).decrypt(raw(account.pk).encode()).decode() == SECRET  # the new key opens it
    call_command("rotate_keys", "--retire", stdout=io.StringIO())
    assert (keys / "field_keys").read_text().split() == [written[0]]
    fields._fernet.cache_clear()
    settings.FIELD_ENCRYPTION_KEYS = [written[0]]
    loaded = PerplexityAccount.objects.get(pk=account.pk)
    assert loaded.session == SECRET and loaded.api_key == "pplx-0123456789abcdef"
    settings.FIELD_ENCRYPTION_KEYS = [old_key]  # the retired key opens nothing any more
    fields._fernet.cache_clear()
    with pytest.raises(fields.DecryptionError):
        PerplexityAccount.objects.get(pk=account.pk)


def test_retiring_refuses_while_a_row_needs_an_old_key(owner, keys, settings):
    PerplexityAccount.objects.create(user=owner, session=SECRET)
    settings.FIELD_ENCRYPTION_KEYS = [Fernet.generate_key().decode(), *settings.FIELD_ENCRYPTION_KEYS]
    fields._fernet.cache_clear()
    with pytest.raises(CommandError, match="Cannot decrypt"):
        call_command("rotate_keys", "--retire", stdout=io.StringIO())
    assert len((keys / "field_keys").read_text().split()) == 1  # the file was not touched


def test_keys_from_the_environment_are_not_written(owner, keys, monkeypatch):
    monkeypatch.setenv("PPLXWEB_FIELD_KEYS", "x")
    out = io.StringIO()
    call_command("rotate_keys", stdout=out)
    assert "Put this new key first" in out.getvalue()
    Fernet(out.getvalue().strip().splitlines()[-1])  # a real key
