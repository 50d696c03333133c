"""Shared fixtures. The suite never touches the checkout's ./data: it gets its own data dir."""

from __future__ import annotations

import os
import tempfile

# Before Django reads its settings (pytest-django loads this file first).
os.environ.setdefault("PPLXWEB_DATA_DIR", tempfile.mkdtemp(prefix="pplxweb-test-"))
# WhiteNoise looks for STATIC_ROOT when the app is built; collectstatic fills it below.
os.makedirs(os.path.join(os.environ["PPLXWEB_DATA_DIR"], "static"), exist_ok=True)
for name in ("PPLXWEB_ADMIN_USER", "PPLXWEB_ADMIN_PASSWORD", "PPLXWEB_DEBUG", "PPLXWEB_HTTPS"):
    os.environ.pop(name, None)

import pytest  # noqa: E402
from asgiref.sync import sync_to_async  # noqa: E402

PASSWORD = "correct horse battery"


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_superuser(username="owner", password=PASSWORD)


@pytest.fixture
def member(django_user_model, owner):
    return django_user_model.objects.create_user(username="member", password=PASSWORD)


@pytest.fixture
def owner_client(client, owner):
    client.force_login(owner)
    return client


@pytest.fixture
def member_client(client, member):
    client.force_login(member)
    return client


@sync_to_async
def session_cookie_for(user) -> str:
    """A real session for user, as the Cookie header a browser would send."""
    from django.conf import settings
    from django.test import Client

    c = Client()
    c.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={c.cookies[settings.SESSION_COOKIE_NAME].value}"


@pytest.fixture(scope="session", autouse=True)
def _static_files():
    """Collect static files once into the test data dir, as `make run` does for the server."""
    from django.core.management import call_command

    call_command("collectstatic", interactive=False, verbosity=0)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item):
    """Async tests touch the database from asgiref's worker thread; close that connection so
    PostgreSQL can drop the test database at the end."""
    import asyncio
    import inspect

    from django.db import connections

    if inspect.iscoroutinefunction(getattr(item, "function", None)):
        asyncio.run(sync_to_async(connections.close_all)())
