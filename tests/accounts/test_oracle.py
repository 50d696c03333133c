"""No unlimited password oracle: no Django admin (its sign-in had no limit), and the password
change form counts wrong old passwords like the sign-in does."""

from __future__ import annotations

import pytest
from django.contrib.staticfiles import finders
from django.urls import reverse

from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db
NEW_PASSWORD = "a much longer passphrase 42"


def test_there_is_no_admin_to_guess_passwords_at(client, owner, settings):
    assert "django.contrib.admin" not in settings.INSTALLED_APPS
    for _ in range(3):
        response = client.post("/admin/login/", {"username": "owner", "password": "wrong"})
        assert response.status_code == 404
    response = client.post("/admin/login/?next=/admin/", {"username": "owner", "password": PASSWORD})
    assert response.status_code == 404
    assert settings.SESSION_COOKIE_NAME not in response.cookies
    assert client.get("/admin/").status_code == 404
    assert finders.find("admin/css/base.css") is None  # its static files are gone too


def change(client, old: str):
    return client.post(
        reverse("accounts:password"),
        {"old_password": old, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )


def test_the_password_change_form_is_limited_like_the_sign_in(owner_client, owner, settings):
    settings.LOGIN_RATE_PER_USER = 4
    for _ in range(4):
        response = change(owner_client, "wrong guess")
        assert response.status_code == 200
        assert "Your old password was entered incorrectly" in response.content.decode()
    response = change(owner_client, PASSWORD)  # even the right one waits now
    assert response.status_code == 429
    assert "Too many password attempts. Try again in" in response.content.decode()
    owner.refresh_from_db()
    assert owner.check_password(PASSWORD)


def test_a_right_password_change_empties_the_count(owner_client, owner, settings):
    settings.LOGIN_RATE_PER_USER = 3
    change(owner_client, "wrong guess")
    change(owner_client, "wrong guess")
    assert change(owner_client, PASSWORD).status_code == 302
    owner.refresh_from_db()
    assert owner.check_password(NEW_PASSWORD)
    for _ in range(3):
        assert change(owner_client, "wrong guess").status_code == 200
