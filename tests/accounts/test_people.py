"""Owner set-up, sign-in with its rate limit, and the household in Settings."""

from __future__ import annotations

import pytest
from django.urls import reverse

from accounts import services
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a long enough passphrase"


def setup_post(client, code, username="alice"):
    return client.post(
        reverse("accounts:setup"),
        {
            "setup_code": code,
            "username": username,
            "password1": NEW_PASSWORD,
            "password2": NEW_PASSWORD,
        },
    )


def test_first_visit_goes_to_setup(client):
    response = client.get(reverse("accounts:login"))
    assert response.status_code == 302
    assert response.url == reverse("accounts:setup")


def test_setup_with_the_printed_code_creates_the_owner_and_signs_in(client, django_user_model):
    code = services.issue_setup_code()
    response = setup_post(client, code.lower().replace("-", " "))  # forgiving about case and dashes
    assert response.status_code == 302
    owner = django_user_model.objects.get()
    assert owner.username == "alice" and owner.is_superuser
    assert client.get(reverse("search:home")).status_code == 200
    # the code is spent
    assert not services.setup_code_matches(code)


def test_setup_refuses_a_wrong_code(client, django_user_model):
    services.issue_setup_code()
    response = setup_post(client, "AAAA-BBBB-CCCC")
    assert response.status_code == 200
    assert "not the one the server printed" in response.content.decode()
    assert not django_user_model.objects.exists()


def test_setup_without_any_issued_code_refuses(client, django_user_model, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    response = setup_post(client, "")
    assert response.status_code == 200
    assert not django_user_model.objects.exists()


def test_setup_is_404_once_somebody_exists(client, owner):
    code = services.issue_setup_code()
    assert client.get(reverse("accounts:setup")).status_code == 404
    assert setup_post(client, code, "mallory").status_code == 404


def test_setup_refuses_a_weak_password(client, django_user_model):
    code = services.issue_setup_code()
    response = client.post(
        reverse("accounts:setup"),
        {"setup_code": code, "username": "alice", "password1": "123", "password2": "123"},
    )
    assert response.status_code == 200
    assert "too short" in response.content.decode()
    assert not django_user_model.objects.exists()


def test_owner_from_environment(django_user_model):
    created = services.ensure_owner_from_env(
        {"PPLXWEB_ADMIN_USER": "root", "PPLXWEB_ADMIN_PASSWORD": NEW_PASSWORD}
    )
    assert created == "root"
    assert django_user_model.objects.get().is_superuser
    # leaving the variables set changes nothing later
    assert (
        services.ensure_owner_from_env(
            {"PPLXWEB_ADMIN_USER": "root", "PPLXWEB_ADMIN_PASSWORD": "another passphrase!"}
        )
        is None
    )
    assert django_user_model.objects.get().check_password(NEW_PASSWORD)


def test_serve_prepare_prints_a_setup_code_only_without_users(django_user_model):
    from pplxweb.management.commands.serve import Command

    lines = "\n".join(Command().prepare())
    assert "setup code:" in lines
    code = lines.split("setup code:")[1].split()[0]
    assert services.setup_code_matches(code)
    django_user_model.objects.create_superuser(username="o", password=PASSWORD)
    assert "setup code" not in "\n".join(Command().prepare())


def test_sign_in_and_out(client, owner):
    response = client.post(reverse("accounts:login"), {"username": "owner", "password": PASSWORD})
    assert response.status_code == 302
    assert client.get(reverse("search:home")).status_code == 200
    client.post(reverse("accounts:logout"))
    assert client.get(reverse("search:home")).status_code == 302


def test_sign_in_is_rate_limited_per_user_name_with_a_retry_time(client, owner, settings):
    for _ in range(settings.LOGIN_RATE_PER_USER):
        response = client.post(reverse("accounts:login"), {"username": "owner", "password": "wrong"})
        assert response.status_code == 200
    response = client.post(reverse("accounts:login"), {"username": "owner", "password": PASSWORD})
    assert response.status_code == 429
    text = response.content.decode()
    assert "Too many sign-in attempts. Try again in" in text
    assert "minute" in text


def test_sign_in_is_rate_limited_per_address(client, owner, settings):
    settings.LOGIN_RATE_PER_IP = 3
    for n in range(3):
        client.post(reverse("accounts:login"), {"username": f"guess{n}", "password": "x"})
    response = client.post(reverse("accounts:login"), {"username": "owner", "password": PASSWORD})
    assert response.status_code == 429


def test_forwarded_for_is_ignored_unless_the_proxy_is_trusted(client, owner, settings):
    settings.LOGIN_RATE_PER_IP = 2
    for n in range(2):
        client.post(
            reverse("accounts:login"),
            {"username": f"g{n}", "password": "x"},
            HTTP_X_FORWARDED_FOR=f"10.0.0.{n}",
        )
    response = client.post(
        reverse("accounts:login"),
        {"username": "g9", "password": "x"},
        HTTP_X_FORWARDED_FOR="10.0.0.9",
    )
    assert response.status_code == 429  # same REMOTE_ADDR, so the same bucket


def test_pages_need_a_session(client):
    for name in ("search:home", "search:history", "accounts:settings"):
        response = client.get(reverse(name))
        assert response.status_code == 302
        assert response.url.startswith(reverse("accounts:login"))


def test_owner_adds_and_removes_a_household_member(owner_client, django_user_model):
    response = owner_client.post(
        reverse("accounts:settings"),
        {
            "add_member": "1",
            "username": "kid",
            "password1": NEW_PASSWORD,
            "password2": NEW_PASSWORD,
        },
    )
    assert response.status_code == 302
    kid = django_user_model.objects.get(username="kid")
    assert not kid.is_superuser
    page = owner_client.get(reverse("accounts:settings")).content.decode()
    assert "kid" in page
    response = owner_client.post(reverse("accounts:remove_member", args=[kid.pk]), {"history": "delete"})
    assert response.status_code == 302
    assert not django_user_model.objects.filter(username="kid").exists()


def test_owner_cannot_remove_themselves(owner_client, owner):
    response = owner_client.post(reverse("accounts:remove_member", args=[owner.pk]), {"history": "delete"})
    assert response.status_code == 404


def test_a_member_cannot_manage_the_household(member_client, owner, django_user_model):
    response = member_client.post(
        reverse("accounts:settings"),
        {"add_member": "1", "username": "x", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD},
    )
    assert response.status_code == 404
    response = member_client.post(reverse("accounts:remove_member", args=[owner.pk]), {"history": "delete"})
    assert response.status_code == 302  # to sign-in: only the owner passes
    assert django_user_model.objects.filter(pk=owner.pk).exists()
    assert "Add a person" not in member_client.get(reverse("accounts:settings")).content.decode()


def test_serve_keeps_temporary_files_in_the_data_dir(settings, monkeypatch):
    """/tmp is often a tmpfs (memory): an upload, the request body behind it, an export's listing
    go to the data dir's disk instead."""
    import os
    import tempfile
    import time

    from pplxweb.server import use_temp_dir

    monkeypatch.setattr(tempfile, "tempdir", tempfile.tempdir)  # put back after the test
    stale, fresh = settings.TEMP_DIR / "stale-upload", settings.TEMP_DIR / "fresh-upload"
    stale.write_bytes(b"left by a crash")
    fresh.write_bytes(b"another process's, in use")
    os.utime(stale, (time.time() - 2 * 86400,) * 2)
    use_temp_dir()
    assert tempfile.gettempdir() == str(settings.TEMP_DIR) == settings.FILE_UPLOAD_TEMP_DIR
    assert settings.TEMP_DIR.parent == settings.DATA_DIR
    assert not stale.exists() and fresh.exists()
    fresh.unlink()
